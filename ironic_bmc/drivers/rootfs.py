# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The conductor's use of the image pipeline: one cache, node limits."""

import functools
import ipaddress
import urllib.parse

from ironic.common import context as ironic_context
from ironic.common import exception
from ironic.common.i18n import _
from ironic import objects
from oslo_log import log

from bmc_common import protocol
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import agent_calls
from ironic_bmc.image import cache as artifact_cache
from ironic_bmc.image import exceptions as image_exc
from ironic_bmc.image import layers
from ironic_bmc.image import pipeline
from ironic_bmc.image import reference
from ironic_bmc import image_properties
from ironic_bmc.nfs import ganesha

LOG = log.getLogger(__name__)
MiB = 1024 * 1024


@functools.lru_cache(maxsize=None)
def _cache(cache_dir, size_mb):
    cache = artifact_cache.ArtifactCache(cache_dir,
                                         max_size=(size_mb * MiB) or None)
    # Once per conductor process: what a crashed build left behind.
    cache.clean_stale_work()
    return cache


def get_cache():
    return _cache(CONF.container.image_cache_dir,
                  CONF.container.image_cache_size_mb)


def artifact_format(mode):
    """(format, compression) of the artifact a rootfs mode uses."""
    if mode == protocol.ROOTFS_NFS:
        return protocol.FORMAT_TREE, None
    return CONF.container.rootfs_format, _compression()


def with_verity(fmt):
    """Whether artifacts of ``fmt`` get a dm-verity hash tree."""
    return CONF.container.rootfs_verity and fmt in pipeline.VERITY_FORMATS


def size_limit(node, mode=protocol.ROOTFS_RAMFS):
    """Bytes of unpacked rootfs the node may hold, and why that bound.

    The smaller of ``[container]max_image_size_mb`` (always applies) and,
    when the root lives in the node's RAM (``ramfs``),
    ``[container]max_image_ram_fraction`` of ``properties/memory_mb``
    (when the node has it).  An NFS root stays on the conductor host; a
    streamed root is held in RAM only as far as its cache bound allows
    (see :func:`stream_stage_args`).

    :returns: (limit in bytes, a phrase naming where the limit comes from)
    """
    limit = CONF.container.max_image_size_mb * MiB
    why = '[container]max_image_size_mb'
    if mode in (protocol.ROOTFS_NFS, protocol.ROOTFS_STREAM):
        return limit, why
    try:
        memory_mb = int(node.properties.get('memory_mb') or 0)
    except (TypeError, ValueError):
        memory_mb = 0
    if memory_mb > 0:
        ram = int(memory_mb * MiB * CONF.container.max_image_ram_fraction)
        if ram < limit:
            limit = ram
            why = ('%s of properties/memory_mb'
                   % CONF.container.max_image_ram_fraction)
    return limit, why


def layer_limits():
    """What one layer may hold, from the [container] options."""
    return layers.Limits(
        max_entries=CONF.container.max_layer_entries,
        max_header_bytes=CONF.container.max_tar_header_kb * 1024,
        allowed_xattrs=tuple(CONF.container.allowed_xattrs))


def _insecure(image_ref):
    """Plain HTTP for registries listed by host:port or by host alone."""
    return reference.registry_in(reference.parse(image_ref).registry,
                                 CONF.container.insecure_registries)


def _compression():
    value = CONF.container.rootfs_compression
    return None if value in (None, '', 'none') else value


def resolve(node, container):
    """Resolve the image for the node; refuse one that cannot fit.

    :returns: the ``(ResolvedImage, client)`` pair to hand to
        :func:`prepare`: the image is resolved once per deploy.
    """
    try:
        resolved, client = pipeline.resolve(
            container.image, cpu_arch=node.properties.get('cpu_arch'),
            pull_secret=container.pull_secret,
            insecure=_insecure(container.image))
    except image_exc.RegistryAuthError as exc:
        if not container.pull_secret_withheld:
            raise
        raise image_exc.RegistryAuthError(
            registry=reference.parse(container.image).registry,
            ref=container.image,
            reason=_('%(err)s; the node has an image_pull_secret, which '
                     'is %(rule)s') % {
                'err': exc.kwargs.get('reason', exc),
                'rule': container.pull_secret_rule}) from None
    limit, why = size_limit(node, container.rootfs)
    if resolved.layers_size > limit:
        raise exception.InvalidParameterValue(
            _('%(where)s: image %(image)s has %(size)d MiB of compressed '
              'layers; node %(node)s can hold at most %(limit)d MiB of '
              'rootfs in RAM (%(why)s)')
            % {'where': image_properties.where(node, protocol.II_IMAGE),
               'image': container.image, 'size': resolved.layers_size // MiB,
               'node': node.uuid, 'limit': limit // MiB, 'why': why})
    return resolved, client


def prepare(node, container, resolved):
    """Build (or find) the rootfs artifact of the image :func:`resolve`
    resolved, pinned for this node."""
    fmt, compression = artifact_format(container.rootfs)
    artifact = pipeline.prepare_rootfs(
        container.image, get_cache(),
        cpu_arch=node.properties.get('cpu_arch'),
        fmt=fmt, compression=compression,
        pull_secret=container.pull_secret,
        insecure=_insecure(container.image),
        max_unpacked_size=size_limit(node, container.rootfs)[0],
        pin=node.uuid, limits=layer_limits(), resolved=resolved,
        verity=with_verity(fmt))
    if fmt == protocol.FORMAT_TREE:
        try:
            sync_exports()
        except Exception:
            get_cache().unpin(artifact.cache_key, node.uuid)
            raise
    return artifact


def release(node):
    """Unpin every cache entry this node held; drop the NFS exports no
    node uses any more."""
    release_holder(node.uuid)


def release_holder(holder):
    """:func:`release` by the holder's name (a node UUID)."""
    get_cache().unpin_all(holder)
    _withdraw_exports()


def unpin(key, holder):
    """Unpin one entry (and withdraw its export if nobody else uses it)."""
    get_cache().unpin(key, holder)
    _withdraw_exports()


def _withdraw_exports():
    if not nfs_configured():
        return
    try:
        sync_exports()
    except ganesha.NFSServerUnavailable as exc:
        # The file no longer lists them; a server started later will not
        # export them.
        LOG.warning('Could not withdraw NFS exports: %s', exc)


# --- NFS exports (the nfs rootfs mode) ---------------------------------------

def nfs_configured():
    return bool(CONF.container.nfs_server_address)


def export_table():
    return ganesha.ExportTable(CONF.container.nfs_exports_file,
                               CONF.container.nfs_pid_file,
                               clients=CONF.container.nfs_clients,
                               squash=CONF.container.nfs_squash)


def sync_exports(context=None):
    """Export the tree of every cache entry a node holds, nothing else,
    each to the nodes that hold it (and ``[container]nfs_clients``).

    A node's address is the one its agent looked up from (the host of its
    ``agent_url``): known once the agent is up, before the staging step,
    which syncs again.  An entry with a pin cannot be evicted, so no tree
    is removed while exported.
    """
    cache = get_cache()
    context = context or ironic_context.get_admin_context()
    wanted = {}
    for key, _size, _used in cache.list_entries():
        pins = cache.pins(key)
        if not pins:
            continue
        entry = cache.lookup(key, touch=False)
        if entry and entry.meta.get('format') == protocol.FORMAT_TREE:
            wanted[key] = (entry.artifact, sorted(
                filter(None, (node_address(context, uuid)
                              for uuid in pins))))
    return export_table().sync(wanted)


def node_address(context, node_uuid):
    """The provisioning address of a node's agent, or None."""
    try:
        node = objects.Node.get_by_uuid(context, node_uuid)
    except exception.NodeNotFound:
        return None
    info = node.driver_internal_info or {}
    url = info.get('agent_url') or (info.get(agent_calls.AGENT_KEY)
                                    or {}).get('agent_url')
    host = urllib.parse.urlsplit(url).hostname if url else None
    try:
        return str(ipaddress.ip_address(host)) if host else None
    except ValueError:
        return None     # a name: ganesha's Clients wants addresses


def check_nfs_server():
    """Before power-on: the server runs and answers (NFSServerUnavailable
    otherwise)."""
    export_table().require_server()
    ganesha.check_server(CONF.container.nfs_check_address,
                         CONF.container.nfs_port)


def nfs_stage_args(artifact):
    """What the agent needs to mount the export of ``artifact``."""
    return {'server': CONF.container.nfs_server_address,
            'port': CONF.container.nfs_port,
            'export': ganesha.pseudo_path(artifact.cache_key),
            'options': CONF.container.nfs_mount_options}


# --- the stream rootfs mode --------------------------------------------------

def stream_stage_args(node, cache_bytes, size):
    """What the agent needs to stream an artifact of ``size`` bytes.

    ``cache_max`` is the RAM the node's block cache may take: the bound
    the deploy asked for (``container_stream_cache``) or, by default, as
    much as a ramfs root may hold.  None when the whole image fits: it
    then becomes local and the network is no longer used.
    """
    if cache_bytes is None:
        cache_bytes = size_limit(node, protocol.ROOTFS_RAMFS)[0]
    return {'cache_max': None if cache_bytes >= size else cache_bytes,
            'rate': CONF.container.stream_background_rate_mb * MiB}


def check_known_size(node, container):
    """At validate time: refuse an image already known to be too large.

    Only a digest reference whose artifact is in the cache has a known
    size without asking the registry; anything else is checked by the
    deploy step before the node is powered on.
    """
    ref = reference.parse(container.image)
    limit, why = size_limit(node, container.rootfs)
    if not ref.digest:
        return
    fmt, compression = artifact_format(container.rootfs)
    key = artifact_cache.ArtifactCache.make_key(
        ref.digest, fmt, compression, pipeline.BUILDER_VERSION,
        variant='verity' if with_verity(fmt) else None)
    entry = get_cache().lookup(key, touch=False)
    if entry is None:
        return
    size = entry.meta.get('unpacked_size', 0)
    if size > limit:
        raise exception.InvalidParameterValue(
            _('%(where)s: %(image)s unpacks to %(size)d MiB; node '
              '%(node)s can hold at most %(limit)d MiB of rootfs in RAM '
              '(%(why)s)')
            % {'where': image_properties.where(node, protocol.II_IMAGE),
               'image': container.image, 'size': size // MiB,
               'node': node.uuid, 'limit': limit // MiB, 'why': why})
