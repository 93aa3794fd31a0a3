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

"""OCI image reference -> rootfs artifact in the cache.

The steps: parse the reference, resolve tag -> manifest (through an index
for the node's ``cpu_arch``), fetch the config, then, unless the cache has
the artifact for (manifest digest, format, compression, builder version),
download each layer (sha256-verified, streamed to a file in the cache's
work directory), apply it to a tree, build the artifact and publish it.
"""

import dataclasses
import hashlib
import os
import platform
import time

from oslo_log import log

from bmc_common import protocol
from ironic_bmc.image import artifact, layers, reference, registry
from ironic_bmc.image import verity as verity_mod
from ironic_bmc.image import cache as cache_mod
from ironic_bmc.image import exceptions as exc

LOG = log.getLogger(__name__)

#: Layers an image may have (Docker's overlay2 limit).
MAX_LAYERS = 128

#: Bump when a change of this package changes the artifacts it builds or
#: what their metadata holds (2: the image config's StopSignal).
BUILDER_VERSION = 2
DEFAULT_FORMAT = protocol.FORMAT_EROFS
DEFAULT_COMPRESSION = None
#: Formats mounted from a block device, which dm-verity can check.
VERITY_FORMATS = (protocol.FORMAT_EROFS, protocol.FORMAT_SQUASHFS)


@dataclasses.dataclass
class ImageConfig:
    """The runtime part of the image config."""

    entrypoint: list = dataclasses.field(default_factory=list)
    cmd: list = dataclasses.field(default_factory=list)
    env: list = dataclasses.field(default_factory=list)
    working_dir: str = ''
    user: str = ''
    #: The signal that asks the workload to end (default SIGTERM).
    stop_signal: str = ''

    @classmethod
    def from_config(cls, config):
        c = (config or {}).get('config') or {}
        return cls(entrypoint=list(c.get('Entrypoint') or []),
                   cmd=list(c.get('Cmd') or []),
                   env=list(c.get('Env') or []),
                   working_dir=c.get('WorkingDir') or '',
                   user=c.get('User') or '',
                   stop_signal=c.get('StopSignal') or '')

    @property
    def command(self):
        """Entrypoint + Cmd, as a container runtime would run it."""
        return self.entrypoint + self.cmd

    @property
    def env_dict(self):
        return dict(e.split('=', 1) if '=' in e else (e, '')
                    for e in self.env)


@dataclasses.dataclass
class ResolvedImage:
    """What the registry says about an image, before any layer fetch."""

    ref: reference.ImageReference
    manifest_digest: str
    manifest: dict
    index_digest: str | None
    architecture: str | None
    #: Sum of the (compressed) layer sizes from the manifest.
    layers_size: int


@dataclasses.dataclass
class RootfsArtifact:
    """The result of :func:`prepare_rootfs`."""

    path: str
    digest: str
    format: str
    compression: str | None
    size: int
    unpacked_size: int
    manifest_digest: str
    image: str
    architecture: str | None
    config: ImageConfig
    cache_key: str
    built: bool
    build_seconds: float
    #: dm-verity parameters (root hash, ...) when the entry has a tree.
    verity: dict | None = None
    verity_path: str | None = None

    @classmethod
    def from_entry(cls, entry, built):
        m = entry.meta
        return cls(path=entry.artifact, digest=m['digest'],
                   format=m['format'], compression=m.get('compression'),
                   size=m['size'], unpacked_size=m['unpacked_size'],
                   manifest_digest=m['manifest_digest'], image=m['image'],
                   architecture=m.get('architecture'),
                   config=ImageConfig(**m['config']), cache_key=entry.key,
                   built=built, build_seconds=m.get('build_seconds', 0.0),
                   verity=m.get('verity'), verity_path=entry.verity)

    def to_dict(self):
        return dataclasses.asdict(self)


def _is_layer_type(media_type):
    return ('tar' in media_type
            and ('image.layer' in media_type or 'rootfs' in media_type))


def resolve(image_ref, cpu_arch=None, pull_secret=None, insecure=False,
            verify=None, client=None):
    """Resolve a reference to the manifest for ``cpu_arch``.

    :param cpu_arch: Ironic's cpu_arch (x86_64, aarch64, ...); defaults to
        the conductor's architecture.
    :returns: (ResolvedImage, RegistryClient)
    """
    ref = (image_ref if isinstance(image_ref, reference.ImageReference)
           else reference.parse(image_ref))
    arch = registry.oci_arch(cpu_arch or platform.machine())
    client = client or registry.RegistryClient(
        ref, pull_secret=pull_secret, insecure=insecure, verify=verify)
    digest, mtype, doc = client.get_manifest(ref.reference)
    index_digest = None
    if mtype in registry.INDEX_TYPES:
        index_digest = digest
        entry = client.select_platform(doc, arch)
        if entry is None:
            raise exc.NoManifestForArch(
                ref=ref, arch=f'{cpu_arch or arch} ({arch})',
                available=client.available_platforms(doc))
        digest, mtype, doc = client.get_manifest(entry['digest'])
        if mtype not in registry.MANIFEST_TYPES:
            raise exc.UnsupportedImage(
                ref=ref, reason='index entry {} is not an image manifest '
                '({})'.format(entry['digest'], mtype))
    config = doc.get('config') or {}
    if not isinstance(config, dict) or not reference.is_digest(
            config.get('digest')):
        raise exc.UnsupportedImage(ref=ref, reason='the manifest has no '
                                   'valid config descriptor')
    if (config.get('mediaType') == 'application/vnd.oci.empty.v1+json'
            or doc.get('artifactType')):
        raise exc.UnsupportedImage(
            ref=ref, reason='it is an OCI artifact, not a container image')
    layer_list = doc.get('layers')
    if not isinstance(layer_list, list):
        raise exc.UnsupportedImage(ref=ref, reason='the manifest has no '
                                   'layer list')
    if len(layer_list) > MAX_LAYERS:
        # Each layer is a download, a pass of the applier and a line of
        # the run report; Docker's overlay driver stops at 128 too.
        raise exc.UnsupportedImage(
            ref=ref, reason=f'it has {len(layer_list)} layers, more than '
            f'{MAX_LAYERS}')
    total = 0
    for layer in layer_list:
        if not isinstance(layer, dict) or not reference.is_digest(
                layer.get('digest')):
            raise exc.UnsupportedImage(
                ref=ref,
                reason=f'layer descriptor {layer!r} has no sha256 digest')
        mt = layer.get('mediaType', '')
        if not _is_layer_type(mt):
            raise exc.UnsupportedImage(
                ref=ref, reason=f'layer {layer["digest"]} has unsupported '
                f'media type {mt!r}')
        size = layer.get('size')
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            # The size bounds the download of the blob: no size, no limit.
            raise exc.UnsupportedImage(
                ref=ref, reason=f'layer {layer["digest"]} has no valid '
                f'size in its descriptor ({size!r})')
        total += size
    resolved = ResolvedImage(
        ref=ref.with_digest(digest) if not ref.digest or index_digest
        else ref,
        manifest_digest=digest, manifest=doc, index_digest=index_digest,
        architecture=arch, layers_size=total)
    return resolved, client


def _file_digest(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1024 * 1024), b''):
            h.update(chunk)
    return 'sha256:' + h.hexdigest()


def _build(resolved, client, workdir, fmt, compression, max_unpacked_size,
           same_owner, index_arch, limits, verity=False):
    ref = resolved.ref
    config_desc = resolved.manifest['config']
    config = client.get_blob_json(config_desc['digest'])
    arch = config.get('architecture')
    if index_arch is None and resolved.architecture and arch and \
            arch != resolved.architecture:
        raise exc.NoManifestForArch(ref=ref, arch=resolved.architecture,
                                    available=f'linux/{arch}')
    tree = os.path.join(workdir, 'tree')
    blobs = os.path.join(workdir, 'blobs')
    os.mkdir(tree, 0o755)
    os.mkdir(blobs, 0o700)
    timings = {'download': 0.0, 'apply': 0.0}
    with layers.LayerApplier(tree, same_owner=same_owner,
                             max_size=max_unpacked_size,
                             limits=limits) as applier:
        for layer in resolved.manifest['layers']:
            digest = layer['digest']
            blob = os.path.join(blobs, digest.split(':', 1)[1])
            start = time.monotonic()
            with open(blob, 'xb') as f:
                client.download_blob(digest, f, expected_size=layer['size'])
            timings['download'] += time.monotonic() - start
            start = time.monotonic()
            applier.apply_file(blob, digest)
            timings['apply'] += time.monotonic() - start
            os.unlink(blob)
        info = applier.finish()
    start = time.monotonic()
    out = os.path.join(workdir, cache_mod.ARTIFACT_NAME)
    size = artifact.build(tree, out, fmt, info=info, compression=compression,
                          same_owner=same_owner)
    timings['mkfs'] = time.monotonic() - start
    if fmt != protocol.FORMAT_TREE:
        cache_mod.rmtree(tree)
    verity_params = None
    if verity:
        start = time.monotonic()
        verity_params = verity_mod.build(
            out, os.path.join(workdir, cache_mod.VERITY_NAME))
        timings['verity'] = time.monotonic() - start
    LOG.info('Built %(fmt)s artifact of %(ref)s: %(size)d bytes from '
             '%(unpacked)d unpacked; download %(d).1fs, apply %(a).1fs, '
             'mkfs %(m).1fs', {'fmt': fmt, 'ref': ref, 'size': size,
                               'unpacked': info.unpacked_size,
                               'd': timings['download'],
                               'a': timings['apply'], 'm': timings['mkfs']})
    return {
        # A tree is named by the image it holds.
        'digest': (resolved.manifest_digest if fmt == protocol.FORMAT_TREE
                   else _file_digest(out)),
        'format': fmt,
        'compression': compression,
        'size': size,
        'unpacked_size': info.unpacked_size,
        'entries': info.entries,
        'manifest_digest': resolved.manifest_digest,
        'image': str(ref),
        'architecture': arch or resolved.architecture,
        'config': dataclasses.asdict(ImageConfig.from_config(config)),
        'layers': [layer['digest'] for layer in resolved.manifest['layers']],
        'builder_version': BUILDER_VERSION,
        'timings': {k: round(v, 3) for k, v in timings.items()},
        'verity': verity_params,
    }


def prepare_rootfs(image_ref, cache, cpu_arch=None, fmt=DEFAULT_FORMAT,
                   compression=DEFAULT_COMPRESSION, pull_secret=None,
                   insecure=False, verify=None, max_unpacked_size=None,
                   pin=None, same_owner=None, limits=None, resolved=None,
                   verity=False):
    """Make sure the rootfs artifact of an image is in the cache.

    :param image_ref: ``[oci://]registry/repo[:tag][@sha256:...]``.
    :param cache: an :class:`~ironic_bmc.image.cache.ArtifactCache`.
    :param cpu_arch: the node's ``properties/cpu_arch``.
    :param fmt: one of ``protocol.ARTIFACT_FORMATS``.
    :param compression: None (uncompressed) or a compressor of the format
        (erofs: lz4, lz4hc; squashfs: lz4, gzip, lzo, xz, zstd).
    :param pull_secret: bare token or ``user:password``.
    :param insecure: plain HTTP to the registry.
    :param max_unpacked_size: refuse (ImageTooLarge) an image whose files
        add up to more bytes, e.g. the node's RAM.  Checked while
        unpacking and against cached entries.
    :param pin: holder name (node UUID) to pin the entry for; the caller
        must ``cache.unpin(result.cache_key, pin)`` when done with it.
    :param same_owner: apply ownership/devices to the tree; default: root.
    :param limits: :class:`~ironic_bmc.image.layers.Limits` on what a
        layer may hold (entries, header sizes, xattrs).
    :param resolved: the ``(ResolvedImage, client)`` pair :func:`resolve`
        returned for this image, so that the manifest checked and reported
        before is the one built, even if the tag moves meanwhile; resolved
        here when None.
    :param verity: also build the artifact's dm-verity hash tree (erofs
        and squashfs only).
    :returns: :class:`RootfsArtifact`
    """
    artifact.validate(fmt, compression)
    if verity and fmt not in VERITY_FORMATS:
        raise ValueError(f'a {fmt} artifact cannot have a dm-verity tree '
                         f'(only {", ".join(VERITY_FORMATS)})')
    if resolved is None:
        resolved = resolve(image_ref, cpu_arch=cpu_arch,
                           pull_secret=pull_secret, insecure=insecure,
                           verify=verify)
    resolved, client = resolved
    key = cache.make_key(resolved.manifest_digest, fmt, compression,
                         BUILDER_VERSION,
                         variant='verity' if verity else None)

    def _do_build(workdir):
        return _build(resolved, client, workdir, fmt, compression,
                      max_unpacked_size, same_owner, resolved.index_digest,
                      limits, verity=verity)

    entry, built = cache.get_or_build(key, _do_build, pin=pin)
    result = RootfsArtifact.from_entry(entry, built)
    try:
        if (not resolved.index_digest and result.architecture
                and resolved.architecture
                and result.architecture != resolved.architecture):
            raise exc.NoManifestForArch(
                ref=resolved.ref, arch=resolved.architecture,
                available=f'linux/{result.architecture}')
        if max_unpacked_size and result.unpacked_size > max_unpacked_size:
            raise exc.ImageTooLarge(ref=resolved.ref,
                                    what='the unpacked root filesystem',
                                    size=result.unpacked_size,
                                    limit=max_unpacked_size)
    except exc.ImagePipelineError:
        if pin:
            cache.unpin(key, pin)
        raise
    LOG.info('Rootfs artifact of %(ref)s ready (%(how)s): %(path)s',
             {'ref': resolved.ref, 'how': 'built' if built else 'cached',
              'path': result.path})
    return result
