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

"""The smoke deploy: Ironic's ``ramdisk`` deploy of the lab kernel and a
tiny busybox initrd onto a lab node, proven by the node itself.

The initrd prints a nonce from its kernel command line to the serial
console and fetches ``/callback/<nonce>`` from the lab's HTTP server, so
the test sees both that the node ran *this* initrd and that Ironic's
kernel arguments arrived.
"""

import glob
import gzip
import io
import os
import secrets
import shutil
import time

from bmc_lab import client as lab_client
from bmc_lab import logcursor
from bmc_lab import nodes
from bmc_lab import procs

BUSYBOX = '/bin/busybox'
NIC_MODULES = ('virtio_pci', 'virtio_net')

#: Start of every lab initrd's /init: busybox, the pseudo filesystems, and
#: the nonce and call-back URL from the kernel command line.
INIT_HEAD = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
nonce=$(sed -n 's/.*bmclab.nonce=\\([^ ]*\\).*/\\1/p' /proc/cmdline)
callback=$(sed -n 's/.*bmclab.callback=\\([^ ]*\\).*/\\1/p' /proc/cmdline)
"""

#: Bring eth0 up (QEMU user networking) and call back to the lab's HTTP
#: server with the nonce, retrying while the link comes up under TCG.
CALL_BACK = """ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
for i in $(seq 1 20); do
    timeout 10 wget -q -O /dev/null "$callback/$nonce" && break
    sleep 1
done
"""

INIT = INIT_HEAD + """echo "BMC-LAB-SMOKE booted nonce=$nonce"
for m in {modules}; do insmod "$m"; done
for i in $(seq 1 40); do [ -e /sys/class/net/eth0 ] && break; sleep 0.25; done
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
# The link may take a moment under TCG: retry for about a minute.
ok=no
for i in $(seq 1 20); do
    # (busybox-static 1.35 wget segfaults with -T; bound it with timeout.)
    if timeout 10 wget -q -O /dev/null "$callback/$nonce"; then
        ok=yes; break
    fi
    sleep 2
done
if [ $ok = yes ]; then
    echo "BMC-LAB-SMOKE callback-ok nonce=$nonce"
else
    ip addr; ip route
    echo "BMC-LAB-SMOKE callback-failed nonce=$nonce"
fi
while true; do sleep 3600; done
"""


def lab_kernel():
    """(version, vmlinuz path) of the newest Debian kernel installed."""
    found = sorted(glob.glob('/boot/vmlinuz-*-amd64'))
    if not found:
        raise procs.LabError('no Debian kernel in /boot: install the '
                             'linux-image-amd64 package')
    path = found[-1]
    return os.path.basename(path)[len('vmlinuz-'):], path


def module_files(version, names):
    """Module files for ``names`` and their dependencies, in load order."""
    files = []
    for name in names:
        res = procs.run(['modprobe', '-S', version, '--show-depends', name],
                        'modprobe --show-depends %s' % name)
        for line in res.stdout.splitlines():
            parts = line.split()
            if parts and parts[0] == 'insmod' and parts[1] not in files:
                files.append(parts[1])
    return files


def _cpio_newc(entries):
    """A newc cpio archive from (name, mode, data) entries."""
    out = io.BytesIO()
    ino = 1
    for name, mode, data in entries + [('TRAILER!!!', 0, b'')]:
        namebytes = name.encode() + b'\0'
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0,
                  len(namebytes), 0]
        out.write(b'070701' + b''.join(b'%08X' % f for f in fields))
        out.write(namebytes)
        out.write(b'\0' * (-(110 + len(namebytes)) % 4))
        out.write(data)
        out.write(b'\0' * (-len(data) % 4))
        ino += 1
    return out.getvalue()


def build_initrd(path, version, init=INIT, modules=NIC_MODULES):
    """Write a busybox initrd for kernel ``version`` to ``path``.

    ``init`` is the ``/init`` script, with ``{modules}`` standing for the
    module files of ``modules`` (and their dependencies) in load order.
    """
    mods = module_files(version, modules)
    entries = []
    dirs = set()

    def add_dirs(p):
        parent = os.path.dirname(p)
        if parent and parent not in dirs:
            add_dirs(parent)
            dirs.add(parent)
            entries.append((parent, 0o40755, b''))

    for d in ('bin', 'proc', 'sys', 'dev'):
        dirs.add(d)
        entries.append((d, 0o40755, b''))
    with open(BUSYBOX, 'rb') as f:
        entries.append(('bin/busybox', 0o100755, f.read()))
    for m in mods:
        rel = m.lstrip('/')
        add_dirs(rel)
        with open(m, 'rb') as f:
            entries.append((rel, 0o100644, f.read()))
    init = init.format(modules=' '.join(mods))
    entries.append(('init', 0o100755, init.encode()))
    with open(path + '.tmp', 'wb') as f:
        f.write(gzip.compress(_cpio_newc(entries), compresslevel=6))
    os.replace(path + '.tmp', path)
    return path


def prepare_images(settings):
    """Kernel and smoke initrd under the lab's file:// allowed path."""
    version, vmlinuz = lab_kernel()
    os.makedirs(settings.images_dir, exist_ok=True)
    kernel = os.path.join(settings.images_dir, 'vmlinuz-' + version)
    if not os.path.exists(kernel):
        shutil.copyfile(vmlinuz, kernel)
    initrd = build_initrd(os.path.join(settings.images_dir,
                                       'smoke-initrd.gz'), version)
    return kernel, initrd


def ramdisk_patch(kernel, initrd, kernel_args):
    """The node update for Ironic's ``ramdisk`` deploy of these files."""
    return [
        {'op': 'add', 'path': '/deploy_interface', 'value': 'ramdisk'},
        {'op': 'add', 'path': '/instance_info/kernel',
         'value': 'file://' + kernel},
        {'op': 'add', 'path': '/instance_info/ramdisk',
         'value': 'file://' + initrd},
        {'op': 'add', 'path': '/instance_info/ramdisk_kernel_arguments',
         'value': kernel_args},
    ]


def run(settings, index=0, out=print, timeout=600):
    """Deploy, prove the initrd ran, undeploy; returns a result dict."""
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    kernel, initrd = prepare_images(settings)
    nonce = secrets.token_hex(8)
    # Put back after: the node's own deploy interface (e.g. the cloud
    # profile's container) is what later deploys expect.
    deploy_interface = cli.node.get(name).deploy_interface
    console = nodes.console_cursor(settings, index)
    access_log = logcursor.Cursor(settings.log('nginx-access.log'))
    watcher = lab_client.StateWatcher(cli, name)
    t0 = time.time()
    cli.node.update(name, ramdisk_patch(
        kernel, initrd, 'bmclab.nonce=%s bmclab.callback=%s/callback'
        % (nonce, settings.guest_http_url)))
    out('Deploying %s with the ramdisk deploy interface (nonce %s) ...'
        % (name, nonce))
    cli.node.set_provision_state(name, 'active')
    watcher.wait('active', timeout)
    t_active = time.time()
    out('%s is ACTIVE after %.1fs; waiting for the initrd to call back ...'
        % (name, t_active - t0))
    deadline = time.monotonic() + timeout
    marker = 'BMC-LAB-SMOKE callback-ok nonce=%s' % nonce
    while time.monotonic() < deadline:
        printed = console.text()
        if marker in printed:
            break
        if 'BMC-LAB-SMOKE callback-failed' in printed:
            raise procs.LabError('the initrd booted but its call-back to '
                                 '%s failed; see %s' % (
                                     settings.guest_http_url,
                                     nodes.console_log(settings, index)))
        time.sleep(1)
    else:
        raise procs.LabError('node %s never printed %r on its console '
                             'within %ds; see %s\n%s' % (
                                 name, marker, timeout,
                                 nodes.console_log(settings, index),
                                 watcher.describe()))
    t_booted = time.time()
    requests = access_log.text()
    fetched = [p for p in ('/kernel ', '/ramdisk ', '/callback/' + nonce)
               if p in requests]
    out('Node ran the initrd: console shows the nonce, nginx served %s.'
        % ', '.join(p.strip() for p in fetched))
    out('Undeploying %s ...' % name)
    cli.node.set_provision_state(name, 'deleted')
    watcher.wait('available', timeout)
    t_done = time.time()
    cli.node.update(name, [{'op': 'replace', 'path': '/deploy_interface',
                            'value': deploy_interface}])
    power = nodes.bmc_power_state(settings, index)
    result = {
        'node': name,
        'nonce': nonce,
        'deploy_to_active_s': round(t_active - t0, 1),
        'deploy_to_callback_s': round(t_booted - t0, 1),
        'undeploy_s': round(t_done - t_booted, 1),
        'http_requests_seen': [p.strip() for p in fetched],
        'power_after_undeploy': power,
        'deploy_interface_after': cli.node.get(name).deploy_interface,
        'deploy_interface_before': deploy_interface,
        'transitions': [list(t) for t in watcher.transitions],
    }
    return result

