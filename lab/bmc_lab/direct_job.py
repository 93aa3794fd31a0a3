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

"""Ironic's ``direct`` deploy of a whole-disk image on a lab node, timed.

The baseline of the benchmark: the agent ramdisk boots, writes the image
(see :mod:`bmc_lab.diskimage`) to the node's disk, Ironic sets the
boot device to disk and reboots the node, the OS on the disk starts the
workload and calls back.  "Workload started" is when the host sees that
call-back in nginx's access log (polled, so up to ``POLL`` late).
"""

import os
import secrets
import shutil
import subprocess
import time

from ironic_bmc.kernel import artifact
from bmc_lab import client as lab_client
from bmc_lab import diskimage
from bmc_lab import ironic_conf
from bmc_lab import logcursor
from bmc_lab import nodes
from bmc_lab import procs
from bmc_lab import smoke

POLL = 0.2
#: Where the image is published, under Ironic's http_root.
SUBDIR = 'bench'


def build_image(settings, tree, command, index=0):
    """Build and publish the whole-disk image of ``tree``.

    :returns: dict with the image's node-side URL, sha256, size and the
        nonce its OS calls back with.
    """
    version, kernel = smoke.lab_kernel()
    nonce = secrets.token_hex(8)
    outdir = os.path.join(settings.http_root, SUBDIR)
    os.makedirs(outdir, exist_ok=True)
    initrd = diskimage.build_initrd(os.path.join(outdir, 'initrd.gz'),
                                    version)
    append = ' '.join([
        'console=ttyS0,115200',
        'bmclab.nonce=%s' % nonce,
        'bmclab.callback=%s/callback' % settings.guest_http_url,
        'bmclab.cmd=%s' % command,
    ])
    image = os.path.join(outdir, 'disk.img')
    size = diskimage.build(image, tree, kernel, initrd, append)
    os.unlink(initrd)
    return {'path': image, 'size': size, 'sha256': artifact.sha256_file(image),
            'nonce': nonce,
            'url': '%s/%s/disk.img' % (settings.guest_http_url, SUBDIR)}


#: The first bytes of a zstd frame.
ZSTD_MAGIC = b'\x28\xb5\x2f\xfd'


def _unzstd(path, out):
    try:
        res = subprocess.run(['zstd', '-dcq', path], stdout=out,
                             stderr=subprocess.PIPE, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise procs.LabError('unpacking %s failed (the zstd package): %s'
                             % (path, exc))
    if res.returncode != 0:
        raise procs.LabError('unpacking %s failed (exit %d): %s' % (
            path, res.returncode, res.stderr.decode(errors='replace')[-400:]))


def concatenate_initrds(parts, path):
    """Write the initramfs archives ``parts`` as one file, in order.

    A zstd-compressed part is written unpacked: Ironic's image cache
    decompresses a file that starts as zstd
    (``[conductor]disable_zstandard_decompression``) and keeps only what
    that first frame holds, which would drop every part after it.
    """
    with open(path + '.tmp', 'wb') as out:
        for part in parts:
            with open(part, 'rb') as f:
                if f.read(4) == ZSTD_MAGIC:
                    out.flush()
                    _unzstd(part, out)
                else:
                    f.seek(0)
                    shutil.copyfileobj(f, out, 4 * 1024 * 1024)
            out.write(b'\0' * (-out.tell() % 4))
    os.replace(path + '.tmp', path)
    return path


def standalone_agent_ramdisk(settings):
    """The agent ramdisk with the lab kernel's modules appended.

    Container deploys hand the kernel's modules to the agent as a second
    initrd; Ironic's own deploy interfaces boot one ramdisk, so the
    ``direct`` baseline gets both in one file (the kernel unpacks
    concatenated initramfs archives in order).
    """
    parts = (settings.path('images', ironic_conf.AGENT_RAMDISK),
             settings.path('images', 'modules-default.cpio.gz'))
    path = concatenate_initrds(
        parts, settings.path('images', 'agent-standalone.initramfs'))
    return settings.path('images', ironic_conf.AGENT_KERNEL), path


def run(settings, image, index=0, out=print, timeout=900):
    """Deploy ``image`` (from :func:`build_image`), time it, undeploy.

    The node's deploy interface is put back to what it was afterwards.
    :returns: dict of timings (seconds from the deploy request).
    """
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    before = cli.node.get(name, fields=['deploy_interface']).deploy_interface
    access_log = logcursor.Cursor(settings.log('nginx-access.log'))
    kernel, ramdisk = standalone_agent_ramdisk(settings)
    cli.node.update(name, [
        {'op': 'replace', 'path': '/deploy_interface', 'value': 'direct'},
        {'op': 'add', 'path': '/driver_info/deploy_kernel',
         'value': 'file://' + kernel},
        {'op': 'add', 'path': '/driver_info/deploy_ramdisk',
         'value': 'file://' + ramdisk},
        {'op': 'add', 'path': '/instance_info/image_source',
         'value': image['url']},
        {'op': 'add', 'path': '/instance_info/image_disk_format',
         'value': 'raw'},
        {'op': 'add', 'path': '/instance_info/image_os_hash_algo',
         'value': 'sha256'},
        {'op': 'add', 'path': '/instance_info/image_os_hash_value',
         'value': image['sha256']},
    ])
    watcher = lab_client.StateWatcher(cli, name)
    try:
        out('Deploying the whole-disk image (%.0f MB) on %s with the direct '
            'deploy interface ...' % (image['size'] / 1e6, name))
        t0 = time.time()
        cli.node.set_provision_state(name, 'active')
        watcher.wait('active', timeout)
        t_active = time.time()
        deadline = time.monotonic() + timeout
        callback = '/callback/%s ' % image['nonce']
        while callback not in access_log.text():
            if time.monotonic() > deadline:
                raise procs.LabError(
                    'the deployed disk of %s never called back within %ds; '
                    'see %s' % (name, timeout,
                                nodes.console_log(settings, index)))
            time.sleep(POLL)
        t_started = time.time()
        out('%s: ACTIVE after %.1fs, workload started from its disk after '
            '%.1fs' % (name, t_active - t0, t_started - t0))
        cli.node.set_provision_state(name, 'deleted')
        watcher.wait('available', timeout)
    finally:
        _restore(cli, name, before, timeout)
    return {'active_s': round(t_active - t0, 2),
            'workload_started_s': round(t_started - t0, 2),
            'transitions': [list(t) for t in watcher.transitions]}


def _restore(cli, name, deploy_interface, timeout):
    """Leave the node available (undeployed) with its deploy interface."""
    state = cli.node.get(name, fields=['provision_state']).provision_state
    if state != 'available':
        try:
            cli.node.set_provision_state(name, 'deleted')
            lab_client.StateWatcher(cli, name).wait('available', timeout)
        except Exception:  # noqa: BLE001 - the original error matters more
            return
    driver_info = cli.node.get(name, fields=['driver_info']).driver_info
    cli.node.update(name, [
        {'op': 'replace', 'path': '/deploy_interface',
         'value': deploy_interface}] + [
        {'op': 'remove', 'path': '/driver_info/' + key}
        for key in ('deploy_kernel', 'deploy_ramdisk')
        if key in driver_info])
