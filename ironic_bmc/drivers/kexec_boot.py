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

"""Boot the run's kernel from a warm agent with kexec: no firmware, no iPXE.

When the agent cleaning left up is safe to reuse (:mod:`warm`) but the run
boots another kernel, initrds or kernel arguments, the conductor stages
the run's boot files as for a cold boot (the iPXE script stays the
fallback), then has the agent

1. download the kernel and the initrds (packed here into one lz4 archive,
   :mod:`ironic_bmc.kernel.initrd_pack`) from the conductor's HTTP
   server, check each against the
   sha256 computed here, and load them
   (``bmc_kexec_load``; any failure is seen here, and the deploy boots
   the node cold instead);
2. jump into them (``bmc_kexec_exec``: the agent stops heartbeating,
   answers, then execs).

The conductor then treats it as a reboot of the agent, as a power action
would: the agent's URL and token are forgotten, the agent's steps
uncached, and the deploy waits in DEPLOYWAIT for the new agent's lookup.
"""

import hashlib
import os
import secrets

from ironic.common import exception
from ironic.common.i18n import _
from ironic.conductor import utils as manager_utils
from oslo_log import log

from bmc_common import protocol
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import boot_files
from ironic_bmc.kernel import artifact
from ironic_bmc.kernel import initrd_pack

LOG = log.getLogger(__name__)

#: The files a kexec boots, in the order the iPXE script loads them.
INITRD_LABELS = (boot_files.LABEL_RAMDISK, boot_files.LABEL_MODULES)
#: Under the HTTP root: the initrds a kexec boots, packed (see _packed).
PACKED_DIR = 'bmc-kexec'
#: Packed initrds kept (the newest; one per agent ramdisk and modules).
PACKED_KEEP = 4


def _file_spec(node, label, path):
    return {'url': '/'.join([CONF.deploy.http_url, node.uuid, label]),
            'sha256': artifact.sha256_file(path),
            'size': os.path.getsize(path)}


def _packed(images):
    """``(path, url, sha256, size)`` of the initrds of ``images`` packed
    into one lz4 archive under the HTTP root, made once per content: the
    sources' digests name it (Ironic stages a ``file://`` image afresh for
    every boot, so a new inode says nothing; hashing them is a tenth of
    the time lz4 takes)."""
    paths = [images[label][1] for label in INITRD_LABELS if label in images]
    ident = ' '.join(artifact.sha256_file(p) for p in paths)
    name = hashlib.sha256(ident.encode()).hexdigest()[:32] + '.initrd'
    directory = os.path.join(CONF.deploy.http_root, PACKED_DIR)
    path = os.path.join(directory, name)
    url = '/'.join([CONF.deploy.http_url, PACKED_DIR, name])
    try:
        with open(path + '.sha256') as f:
            return path, url, f.read().strip(), os.path.getsize(path)
    except FileNotFoundError:
        pass
    os.makedirs(directory, exist_ok=True)
    tmp = '%s.%s.tmp' % (path, secrets.token_hex(4))
    try:
        initrd_pack.pack(paths, tmp)
        digest = artifact.sha256_file(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    with open(path + '.sha256.tmp', 'w') as f:
        f.write(digest)
    os.replace(path + '.sha256.tmp', path + '.sha256')
    LOG.info('Packed the kexec initrds %(src)s into %(path)s (%(size)d '
             'bytes)', {'src': paths, 'path': path,
                        'size': os.path.getsize(path)})
    _prune(directory)
    return path, url, digest, os.path.getsize(path)


def _prune(directory):
    """Keep the newest :data:`PACKED_KEEP` packed initrds."""
    found = sorted((os.path.getmtime(os.path.join(directory, n)), n)
                   for n in os.listdir(directory) if n.endswith('.initrd'))
    for _mtime, name in found[:-PACKED_KEEP]:
        for suffix in ('', '.sha256'):
            try:
                os.unlink(os.path.join(directory, name + suffix))
            except FileNotFoundError:
                pass


def _pxe_mac(task):
    for port in task.ports:
        if port.pxe_enabled:
            return port.address
    raise exception.InvalidParameterValue(
        _('Node %s has no PXE-enabled port: kexec has no BOOTIF to give '
          'the agent') % task.node.uuid)


def load_args(task, images, options):
    """What ``bmc_kexec_load`` gets: the files the iPXE script would boot,
    with their digests, and its kernel command line."""
    node = task.node
    _path, url, digest, size = _packed(images)
    return {
        'kernel': _file_spec(node, boot_files.LABEL_KERNEL,
                             images[boot_files.LABEL_KERNEL][1]),
        'initrds': [{'url': url, 'sha256': digest, 'size': size}],
        'cmdline': boot_files.kernel_cmdline(options, _pxe_mac(task)),
    }


def kexec(task, images, options):
    """Load and jump; on return the node is booting the new kernel.

    :returns: what the load step reported (method, download and load
        seconds).
    :raises: IronicException when the agent could not load or jump (the
        node still runs the old agent: boot it cold).
    """
    loaded = agent_calls.call(task, protocol.STEP_KEXEC_LOAD,
                              load_args(task, images, options),
                              timeout=CONF.container.kexec_load_timeout)
    agent_calls.call(task, protocol.STEP_KEXEC_EXEC, timeout=30)
    # A reboot of the agent, as a power action is one.
    node = task.node
    manager_utils.wipe_token_and_url(task)
    node.del_driver_internal_info('agent_cached_deploy_steps')
    node.del_driver_internal_info('agent_last_heartbeat')
    return loaded
