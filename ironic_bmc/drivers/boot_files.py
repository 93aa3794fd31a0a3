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

"""Boot files of a container deploy: kernel, agent ramdisk, modules.

Ironic's (i)PXE boot interfaces boot the agent with the deploy kernel and
ramdisk of ``driver_info``/``[conductor]``, and boot a user's kernel only
for the deploy interface named ``ramdisk``.  A container deploy boots the
agent ramdisk with the kernel chosen for the image, plus that kernel's
modules as a second initrd, so it renders its own iPXE script with
Ironic's pxe_utils, the way the anaconda deploy does.

Resolution, first match wins:

* kernel: ``instance_info/kernel``, else the Glance image's ``kernel_id``,
  else the deploy kernel;
* ramdisk: ``instance_info/ramdisk`` on the operator's own nodes
  (:mod:`ironic_bmc.ownership`), else the deploy ramdisk (the agent):
  the operator's only, never a project's;
* modules: ``instance_info/kernel_modules``; with the image's kernel, its
  ``ramdisk_id``; with the default kernel also
  ``driver_info/container_kernel_modules``, else
  ``[container]default_kernel_modules``.

Cleaning boots the agent with the operator's files only
(``agent_only``): driver_info's or ``[conductor]``'s deploy kernel and
ramdisk and the default modules, whatever ``instance_info`` says (a
lessee may write it while the node is AVAILABLE, then ask for cleaning;
that agent would be left up, warm, for the next tenant's deploy).  A
deploy for a project may not name the agent ramdisk nor a ``file://``
boot file (a file on the conductor): :func:`validate` refuses both.
"""

import os
import secrets
import shutil
import threading

from ironic.common import boot_devices
from ironic.common import dhcp_factory
from ironic.common import exception
from ironic.common.glance_service import service_utils
from ironic.common.i18n import _
from ironic.common import image_service
from ironic.common import pxe_utils
from ironic.common import utils
from ironic.conductor import utils as manager_utils
from ironic.drivers import utils as driver_utils
from oslo_log import log
import tenacity

from ironic_bmc import image_properties
from ironic_bmc import ownership
from ironic_bmc.conf import CONF

LOG = log.getLogger(__name__)

LABEL_KERNEL = 'deploy_kernel'
LABEL_RAMDISK = 'deploy_ramdisk'
LABEL_MODULES = 'bmc_modules'

TEMPLATE = os.path.join(os.path.dirname(__file__), 'templates',
                        'container_ipxe_config.template')

#: Where a deploy's rootfs artifact is published, under the node's
#: directory of the HTTP root, in a directory named by a random token.
#: The name holds "token": Ironic's API masks the value for whoever may
#: not see driver secrets (the node's owner, among others).
ARTIFACT_DIR_KEY = 'bmc_artifact_token_dir'
#: The key releases before 0.3 used (not masked); read on clean-up only.
_OLD_ARTIFACT_DIR_KEY = 'bmc_artifact_dir'


def boot_images(task, agent_only=False):
    """{label: (href, path under the HTTP root)} for this deploy.

    :param agent_only: the operator's agent files only (cleaning), see
        the module's docstring.
    """
    node = task.node
    # The kernel and its modules may come from the Glance image (kernel_id,
    # ramdisk_id); the agent ramdisk is the operator's, always.
    ii = {} if agent_only else image_properties.effective(node)
    agent = driver_utils.get_agent_kernel_ramdisk(node)
    ramdisk = None
    if not agent_only and ownership.is_operators(node):
        ramdisk = node.instance_info.get('ramdisk')
    hrefs = {
        LABEL_KERNEL: ii.get('kernel') or agent.get('deploy_kernel'),
        LABEL_RAMDISK: ramdisk or agent.get('deploy_ramdisk'),
    }
    modules = ii.get('kernel_modules')
    if (image_properties.from_image(node, 'kernel_modules')
            and not image_properties.from_image(node, 'kernel')):
        # The tenant's modules go with the tenant's kernel only.
        modules = None
    if not modules and not ii.get('kernel'):
        modules = (node.driver_info.get('container_kernel_modules')
                   or CONF.container.default_kernel_modules)
    if modules:
        hrefs[LABEL_MODULES] = modules
    return {label: (href, pxe_utils.get_file_path_from_label(
        node.uuid, CONF.deploy.http_root, label))
        for label, href in hrefs.items()}


def validate(task):
    """Check the boot files are named and reachable.

    :raises: MissingParameterValue naming the keys to set.
    :raises: InvalidParameterValue for a kernel/ramdisk/modules URL that
        cannot be fetched (e.g. HTTP 404).
    """
    if not getattr(task.driver.boot, 'ipxe_enabled', False):
        raise exception.InvalidParameterValue(
            _('The container deploy interface boots the node through iPXE; '
              'node %(node)s uses boot interface %(boot)s. Set '
              '--boot-interface ipxe.') % {'node': task.node.uuid,
                                           'boot': task.node.boot_interface})
    _operator_only_files(task.node)
    images = boot_images(task)
    missing = [label for label, (href, _path) in images.items() if not href]
    if missing:
        raise exception.MissingParameterValue(
            _('Node %(node)s has no kernel or ramdisk for a container '
              'deploy: set instance_info/kernel and instance_info/ramdisk, '
              'or driver_info/deploy_kernel and deploy_ramdisk, or '
              '[conductor]deploy_kernel and deploy_ramdisk (missing: '
              '%(missing)s)') % {'node': task.node.uuid,
                                 'missing': ', '.join(missing)})
    for label, (href, _path) in images.items():
        key = {LABEL_KERNEL: 'kernel', LABEL_RAMDISK: 'ramdisk',
               LABEL_MODULES: 'kernel_modules'}[label]
        tenants = image_properties.from_image(task.node, key)
        info = None
        try:
            service = image_service.get_image_service(
                href, context=task.context)
            if service_utils.is_glance_image(href):
                # Glance's service has no validate_href: show() is the
                # check (not found, not visible to the caller).
                info = service.show(href)
            else:
                service.validate_href(href)
        except exception.IronicException as exc:
            raise exception.InvalidParameterValue(
                _('%(key)s %(href)s cannot be used: %(err)s')
                % {'key': (image_properties.where(task.node, key)
                           if tenants else key),
                   'href': href, 'err': exc})
        if tenants and info is not None:
            # kernel_id / ramdisk_id of the tenant's Glance image.
            image_properties.check_boot_image(task.node, key, info)


def _operator_only_files(node):
    """Refuse what only the operator may boot on a project's node: the
    agent ramdisk (its agent receives the deploy's image, configdrive and
    group keys, and stays up warm for the next tenant) and files of the
    conductor's own file system (``file://``)."""
    if ownership.is_operators(node):
        return
    ii = image_properties.effective(node)
    if (node.instance_info or {}).get('ramdisk'):
        ownership.require_operator(node, _(
            'instance_info/ramdisk: the agent ramdisk (a project\'s run '
            'boots driver_info/deploy_ramdisk; remove the key)'))
    for key in ('kernel', 'kernel_modules'):
        href = ii.get(key)
        if isinstance(href, str) and href.strip().lower().startswith(
                'file:'):
            ownership.require_operator(node, _(
                '%(where)s: a file:// boot file (a file on the conductor); '
                'name an http(s) URL or a Glance image') % {
                    'where': image_properties.where(node, key)})


_CACHE_TURN = threading.Lock()


@tenacity.retry(retry=tenacity.retry_if_exception_type(FileNotFoundError),
                stop=tenacity.stop_after_attempt(4),
                wait=tenacity.wait_random(0.1, 0.5), reraise=True)
def cache_boot_files(task, images):
    """Link the boot files into the node's directory from Ironic's master
    image cache.

    The cache's clean-up lists the master directory, then stats each
    file; a download of another node's files that completes in between
    (its temporary file renamed) makes that stat fail with
    FileNotFoundError.  Seen with 200 deploys at once (the scale
    benchmark): the cache is consistent, and the call is made again.
    Within this conductor the calls take turns (a cached file is only
    linked, so the turn is short); another process sharing the master
    directory can still race, hence the retries.
    """
    with _CACHE_TURN:
        pxe_utils.cache_ramdisk_kernel(task, images, ipxe_enabled=True)


def prepare(task, ramdisk_params, extra_kernel_args=(), pxe_boot=True,
            agent_only=False):
    """Stage the boot files and the iPXE script; set PXE boot.

    ``agent_only``: the operator's agent files only (cleaning).

    ``extra_kernel_args`` (e.g. boot-time tunables) are appended to the
    kernel command line.  ``pxe_boot=False``: the boot device is left as
    it is (a kexec boots without firmware; :func:`set_pxe_boot` before
    the firmware boot it falls back to).

    :returns: ``(images, options)``: :func:`boot_images` and the options
        the iPXE script was rendered with (a kexec boots the same).
    """
    node = task.node
    ipxe_dhcp(task)
    images = boot_images(task, agent_only=agent_only)
    options = pxe_utils.build_pxe_config_options(
        task, images, ipxe_enabled=True, ramdisk_params=ramdisk_params)
    if extra_kernel_args:
        options['pxe_append_params'] = ' '.join(
            [options.get('pxe_append_params') or ''] + list(extra_kernel_args)
        ).strip()
    if LABEL_MODULES in images:
        options['bmc_modules_path'] = '/'.join(
            [CONF.deploy.http_url, node.uuid, LABEL_MODULES])
    pxe_utils.create_pxe_config(task, options, TEMPLATE, ipxe_enabled=True)
    cache_boot_files(task, images)
    if pxe_boot:
        set_pxe_boot(task)
    return images, options


def ipxe_dhcp(task):
    """As Ironic's own iPXE boot does (pxe_base.prepare_ramdisk): the
    DHCP provider (neutron, dnsmasq; "none" where DHCP is not Ironic's to
    manage) hands the node the iPXE script, for IPv4 and IPv6."""
    pxe_utils.create_ipxe_boot_script()
    dhcp_opts = []
    for ip_version in (4, 6):
        dhcp_opts += pxe_utils.dhcp_options_for_instance(
            task, ipxe_enabled=True, ip_version=ip_version)
    dhcp_factory.DHCPFactory().update_dhcp(task, dhcp_opts)


def set_pxe_boot(task):
    """The node boots from the network (iPXE), persistently."""
    manager_utils.node_set_boot_device(task, boot_devices.PXE,
                                       persistent=True)


def kernel_cmdline(options, mac):
    """The kernel command line the iPXE script gives (without its
    ``initrd=`` names, which only iPXE and EFI stubs read)."""
    return ' '.join(['text', options.get('pxe_append_params') or '',
                     'BOOTIF=%s' % mac]).replace('  ', ' ').strip()


#: What the artifact's dm-verity hash tree is published as, beside it.
VERITY_SUFFIX = '.verity'


#: SELinux hosts restore the file context of what is published.
RESTORECON = '/usr/sbin/restorecon'


def _selinux():
    return os.path.exists(RESTORECON)


def _link(source, directory, name):
    path = os.path.join(directory, name)
    try:
        os.link(source, path)
    except OSError as exc:
        LOG.debug('Cannot hard-link %(src)s into %(dir)s (%(err)s); '
                  'copying it', {'src': source, 'dir': directory,
                                 'err': exc})
        shutil.copyfile(source, path)
    os.chmod(path, 0o644)


def publish_artifact(task, artifact_path, fmt, verity_path=None):
    """Publish a rootfs artifact for this deploy; returns its URL.

    Its dm-verity hash tree, if given, is published beside it, at the
    artifact's URL plus :data:`VERITY_SUFFIX`.

    As Ironic's ``LocalPublisher``: the artifact is hard-linked (or
    copied across filesystems) under ``[deploy]http_root``, into a
    directory named by a random token, so only the node told the URL can
    fetch it, and the cache keeps the entry while the link exists; an
    SELinux host restores the files' context.  Unlike it, no process is
    started where there is no ``restorecon``: ``LocalPublisher`` tries to
    run it for every publication, and that fork of the conductor was 4 %
    of its CPU with 40 deploys at once.  The URL is under
    ``[deploy]http_url``: the agent fetches it from the provisioning
    network, as it fetches the boot files.
    """
    name = 'rootfs.' + fmt
    files = [(artifact_path, name)]
    if verity_path:
        files.append((verity_path, name + VERITY_SUFFIX))
    return publish_files(task, 'rootfs', ARTIFACT_DIR_KEY, files)


def publish_files(task, kind, key, files):
    """Publish ``files`` (``(path, name)`` pairs) for this deploy under
    a new directory named ``kind-<random token>``, recorded in the node's
    driver_internal_info ``key``; returns the URL of the first.  (See
    :func:`publish_artifact`.)"""
    node = task.node
    rel = os.path.join(node.uuid, kind + '-' + secrets.token_urlsafe(24))
    directory = os.path.join(CONF.deploy.http_root, rel)
    os.makedirs(directory, mode=0o755)
    for chmod_dir in (os.path.dirname(directory), directory):
        # served by the HTTP server; the name is the secret.
        os.chmod(chmod_dir, 0o755)  # noqa: S103
    node.set_driver_internal_info(key, rel)
    for path, name in files:
        _link(path, directory, name)
    if _selinux():
        utils.execute(RESTORECON, '-i', '-R', directory)
    return '/'.join((CONF.deploy.http_url.rstrip('/'), rel, files[0][1]))


def unpublish(task, *keys):
    """Remove what :func:`publish_files` published under ``keys``."""
    for key in keys:
        rel = task.node.del_driver_internal_info(key)
        if rel:
            shutil.rmtree(os.path.join(CONF.deploy.http_root, rel),
                          ignore_errors=True)


def unpublish_artifact(task):
    unpublish(task, ARTIFACT_DIR_KEY, _OLD_ARTIFACT_DIR_KEY)


def clean_up(task):
    """Remove what prepare() and publish_artifact() staged."""
    unpublish_artifact(task)
    try:
        images = boot_images(task)
    except exception.IronicException as exc:
        LOG.warning('Cannot determine the boot files of node %(node)s to '
                    'remove them: %(err)s', {'node': task.node.uuid,
                                              'err': exc})
        images = {}
    pxe_utils.clean_up_pxe_env(task, images, ipxe_enabled=True)
