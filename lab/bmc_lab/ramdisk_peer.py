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

"""The benchmark's boot peers, through Ironic's own ``ramdisk`` deploy.

* **busybox**: the lab kernel and a minimal busybox initrd, through the
  same firmware and iPXE path as the agent.  From the node's QEMU start
  (libvirt's ``starting up`` line, on the host's clock) to its ``/init``
  printing on the serial console: the floor of a cold boot on this node.
* **content**: what a user would pick instead of a container deploy: the
  benchmark's content packed as an initrd behind that busybox ``/init``
  (no agent, no tunables, no report).  From the deploy request to the
  workload's call-back in nginx's log, as the direct deploy is timed.
"""

import datetime
import gzip
import os
import secrets
import subprocess
import time

from bmc_lab import client as lab_client
from bmc_lab import direct_job
from bmc_lab import logcursor
from bmc_lab import nodes
from bmc_lab import procs
from bmc_lab import smoke

#: The libvirt log of each domain: one line per QEMU start, time-stamped.
QEMU_LOG = '/var/log/libvirt/qemu/%s.log'
POLL = 0.1
BOOTED = 'BMC-RAMDISK booted'
STARTED = 'BMC-RAMDISK workload-started'

INIT = smoke.INIT_HEAD + """echo "%(booted)s nonce=$nonce"
cmd=$(sed -n 's/.*bmclab.cmd=\\([^ ]*\\).*/\\1/p' /proc/cmdline)
for m in {modules}; do insmod "$m" 2>/dev/null; done
if [ -n "$cmd" ]; then $cmd & fi
echo "%(started)s nonce=$nonce"
for i in $(seq 1 40); do [ -e /sys/class/net/eth0 ] && break; sleep 0.25; done
""" % {'booted': BOOTED, 'started': STARTED} + smoke.CALL_BACK + """wait
while true; do sleep 3600; done
"""


def qemu_starts(settings, index=0):
    """Epoch seconds of every start of the node's QEMU process."""
    starts = []
    try:
        with open(QEMU_LOG % settings.node_name(index)) as f:
            for line in f:
                if ': starting up ' in line:
                    stamp = line.split(': starting up ', 1)[0]
                    starts.append(datetime.datetime.strptime(
                        stamp, '%Y-%m-%d %H:%M:%S.%f%z').timestamp())
    except FileNotFoundError:
        pass
    return starts


def build_initrds(settings, tree, outdir):
    """(busybox initrd, busybox + ``tree`` initrd) for the lab kernel."""
    version, _vmlinuz = smoke.lab_kernel()
    busybox = smoke.build_initrd(os.path.join(outdir, 'busybox.gz'),
                                 version, init=INIT)
    content = os.path.join(outdir, 'content.cpio.gz')
    files = subprocess.run(['find', '.', '-mindepth', '1'], cwd=tree,
                           check=True, capture_output=True).stdout
    archive = subprocess.run(['cpio', '--quiet', '-o', '-H', 'newc'],
                             cwd=tree, input=files, check=True,
                             capture_output=True).stdout
    with open(content, 'wb') as f:
        f.write(gzip.compress(archive, compresslevel=1))
    # The kernel unpacks both, in order: the tree over the busybox root.
    direct_job.concatenate_initrds([busybox, content],
                                   os.path.join(outdir, 'content.initrd'))
    os.unlink(content)
    return busybox, os.path.join(outdir, 'content.initrd')


def deploy(settings, initrd, command='', index=0, out=print, timeout=600):
    """Ramdisk-deploy ``initrd`` with the lab kernel; time it; undeploy.

    :returns: dict of epoch seconds: ``requested``, ``qemu_start``,
        ``booted`` (the console's first line from /init), ``started``
        (the workload's call-back seen in nginx's log).
    """
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    kernel, _smoke = smoke.prepare_images(settings)
    nonce = secrets.token_hex(8)
    before = cli.node.get(name, fields=['deploy_interface']).deploy_interface
    console = nodes.console_cursor(settings, index)
    access_log = logcursor.Cursor(settings.log('nginx-access.log'))
    starts = len(qemu_starts(settings, index))
    cli.node.update(name, smoke.ramdisk_patch(
        kernel, initrd, 'bmclab.nonce=%s bmclab.callback=%s/callback '
        'bmclab.cmd=%s' % (nonce, settings.guest_http_url, command)))
    watcher = lab_client.StateWatcher(cli, name)
    times = {'requested': time.time()}
    try:
        cli.node.set_provision_state(name, 'active')
        deadline = time.monotonic() + timeout
        callback = '/callback/%s ' % nonce
        while 'started' not in times:
            if time.monotonic() > deadline:
                raise procs.LabError(
                    'the ramdisk of %s never called back within %ds; see '
                    '%s\n%s' % (name, timeout,
                                nodes.console_log(settings, index),
                                watcher.describe()))
            if 'booted' not in times and BOOTED in console.text():
                times['booted'] = time.time()
            if callback in access_log.text():
                times['started'] = time.time()
            time.sleep(POLL)
        watcher.wait('active', timeout)
        times['qemu_start'] = qemu_starts(settings, index)[starts]
        out('%s: ramdisk booted %.1fs after its QEMU start, called back '
            '%.1fs after the request' % (
                name, times['booted'] - times['qemu_start'],
                times['started'] - times['requested']))
    finally:
        if cli.node.get(name).provision_state != 'available':
            cli.node.set_provision_state(name, 'deleted')
            watcher.wait('available', timeout)
        cli.node.update(name, [{'op': 'replace', 'path': '/deploy_interface',
                                'value': before}])
    return times


def run(settings, initrds, command, out=print):
    """Both peers, from :func:`build_initrds`; the numbers the benchmark
    reports.  The initrds are removed."""
    busybox, content = initrds
    size = os.path.getsize(content)
    try:
        small = deploy(settings, busybox, out=out)
        full = deploy(settings, content, command=command, out=out)
    finally:
        for path in (busybox, content):
            os.unlink(path)
    return {
        'busybox_boot_s': round(small['booted'] - small['qemu_start'], 2),
        't_ready_ramdisk_deploy_s': round(full['started']
                                          - full['requested'], 2),
        'ramdisk_deploy_initrd_mb': round(size / 1e6, 1),
    }
