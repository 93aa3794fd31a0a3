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

"""The host's libvirtd and virtlogd, which every lab on the host shares.

Whether libvirtd answers and which domains it has; the settings QEMU
needs in qemu.conf; libvirtd and virtlogd started for all labs when none
runs (in the host's state directory, not a lab's) and stopped by the
last lab to go down, under a host-wide lock.
"""

import contextlib
import os
import subprocess
import time

from bmc_lab import inifile
from bmc_lab import procs
from bmc_lab import programs
from bmc_lab import settings as lab_settings

LIBVIRT_URI = 'qemu:///system'
LIBVIRT_SOCKET = '/run/libvirt/libvirt-sock'
QEMU_CONF = '/etc/libvirt/qemu.conf'

#: libvirtd and virtlogd serve every lab on the host (labs run side by
#: side, e.g. one per test worker): a lab that finds none running starts
#: them here, not in its own state directory, and the last lab to go down
#: (no libvirt domain left) stops them.
HOST_STATE_DIR = os.environ.get('BMC_LAB_HOST_DIR', '/var/lib/bmc-lab-host')
HOST_PROCESSES = ('virtlogd', 'libvirtd')


def libvirt_reachable():
    try:
        res = subprocess.run(['virsh', '-c', LIBVIRT_URI, 'uri'],
                             capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def _check_qemu_conf():
    try:
        with open(QEMU_CONF) as f:
            text = f.read()
    except FileNotFoundError:
        raise procs.LabError('%s is missing: install libvirt-daemon-system '
                             '(tools/host-setup.sh does)' % QEMU_CONF)
    lines = [ln.strip().replace(' ', '') for ln in text.splitlines()]
    wanted = {'user="root"': 'for QEMU to read the lab state directory',
              'group="root"': 'for QEMU to read the lab state directory',
              'seccomp_sandbox=0': 'for QEMU to forward node connections '
                                   'to the host through socat'}
    for setting, why in wanted.items():
        if setting not in lines:
            raise procs.LabError('%s must set %s %s; run '
                                 'tools/host-setup.sh' % (QEMU_CONF,
                                                          setting, why))


def host_settings():
    """Where the host-wide libvirtd and virtlogd keep pid files and logs."""
    return lab_settings.Settings(state_dir=HOST_STATE_DIR,
                                 name='bmc-lab-host')


@contextlib.contextmanager
def _host_lock():
    host = host_settings()
    with procs.file_lock(host.path('.lock')):
        yield host


def libvirt_domains():
    """Names of every libvirt domain on the host, or None when libvirtd
    does not answer."""
    try:
        res = subprocess.run(['virsh', '-c', LIBVIRT_URI, 'list', '--all',
                              '--name'], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.split() if res.returncode == 0 else None


@contextlib.contextmanager
def libvirt_held():
    """Use a running libvirtd, or start virtlogd + libvirtd for all labs;
    no lab stops them before the block ends.

    Labs share them (see ``HOST_STATE_DIR``; their logs go to its
    ``logs/``): a lab defines its domains inside the block, so that a lab
    going down at the same time, finding no domain, does not stop
    libvirtd under it (:func:`stop_libvirt_if_unused`).
    """
    _check_qemu_conf()
    with _host_lock() as host:
        if not libvirt_reachable():
            _start_libvirt(host)
        yield


def _start_libvirt(settings):
    conf = settings.path('etc', 'libvirtd.conf')
    inifile.write_file(conf, 'log_outputs = "3:file:%s"\n'
                       % settings.log('libvirtd-debug.log'))
    if not procs.running(settings, 'virtlogd'):
        # virtlogd writes the nodes' serial consoles and rotates them at
        # 2 MiB by default, after a few deploys; keep more for debugging
        # (readers follow rotation anyway: bmc_lab.logcursor).
        logd_conf = settings.path('etc', 'virtlogd.conf')
        inifile.write_file(logd_conf, 'max_size = %d\nmax_backups = 3\n'
                           % (64 * 1024 * 1024))
        procs.spawn(settings, 'virtlogd',
                    [programs.system_bin('virtlogd', 'libvirt-daemon'),
                     '--config', logd_conf])
    proc = procs.spawn(settings, 'libvirtd',
                       [programs.system_bin('libvirtd', 'libvirt-daemon'),
                        '--config', conf])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise procs.LabError(
                'libvirtd exited with code %s while starting; see %s'
                % (proc.returncode, settings.log('libvirtd.log')))
        if libvirt_reachable():
            return
        time.sleep(0.5)
    raise procs.LabError('libvirtd did not answer on %s within 30s; see %s'
                         % (LIBVIRT_URI, settings.log('libvirtd.log')))


def stop_libvirt_if_unused():
    """Stop the host's libvirtd and virtlogd when no domain is left.

    Returns the names stopped.  Another lab's nodes keep them running.
    """
    if not any(procs.running(host_settings(), n) for n in HOST_PROCESSES):
        return []
    with _host_lock() as host:
        if libvirt_reachable() and libvirt_domains() != []:
            return []
        return [n for n in reversed(HOST_PROCESSES)
                if procs.stop(host, n)]
