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

"""Boot another kernel from the running agent, without firmware: kexec.

Two protocol steps, so that the conductor sees every failure before the
node leaves:

* ``bmc_kexec_load``: download the kernel and the initrds the conductor
  names (each checked against its sha256), join the initrds into one (the
  kernel unpacks concatenated cpio archives, as it does iPXE's several
  initrds) and load them with ``kexec_file_load`` (``kexec -s``: the
  kernel checks the image's signature where lockdown or
  ``CONFIG_KEXEC_SIG_FORCE`` require one).  Nothing runs yet.
* ``bmc_kexec_exec``: answer, then jump into the loaded kernel
  ``EXEC_DELAY`` seconds later (``kexec -e``): the agent's reply reaches
  the conductor first.  The agent's RAM disk holds nothing to save.
"""

import os
import shutil
import subprocess
import threading
import time

from oslo_log import log

from ipa_hardware_manager import rootfs_download

LOG = log.getLogger(__name__)

KEXEC = '/sbin/kexec'
#: On the ramdisk's root (RAM, not bounded as /run's tmpfs is to a tenth
#: of it): the agent ramdisk alone is a few hundred MB unpacked.
WORK_DIR = '/var/lib/bmc-kexec'
#: Seconds between the exec step's reply and the jump.
EXEC_DELAY = 2.0
#: What a load may take (a large initrd is read and copied by the kernel).
LOAD_TIMEOUT = 120


class KexecError(Exception):
    """The kernel could not be loaded for kexec."""


def _check_file(name, spec):
    if (not isinstance(spec, dict) or not isinstance(spec.get('url'), str)
            or not spec['url'].startswith(('http://', 'https://'))
            or not isinstance(spec.get('sha256'), str)
            or len(spec['sha256']) != 64):
        raise KexecError('%s must be {"url": "http(s)://...", "sha256": '
                         '"<64 hex>"}, got %r' % (name, spec))


def validate(kernel, initrds, cmdline):
    _check_file('kernel', kernel)
    if not isinstance(initrds, list) or not initrds:
        raise KexecError('initrds must be a non-empty list, got %r'
                         % (initrds,))
    for i, spec in enumerate(initrds):
        _check_file('initrds[%d]' % i, spec)
    if not isinstance(cmdline, str) or '\n' in cmdline or not cmdline:
        raise KexecError('cmdline must be one line of text, got %r'
                         % (cmdline,))


def _fetch(spec, dest):
    try:
        return rootfs_download.download(spec['url'], dest, spec['sha256'],
                                        size=spec.get('size'))
    except rootfs_download.DownloadError as exc:
        raise KexecError(str(exc)) from exc


def load(kernel, initrds, cmdline, work_dir=WORK_DIR, kexec=KEXEC):
    """Download, check and load; return what was loaded, with timings."""
    validate(kernel, initrds, cmdline)
    if not os.path.exists(kexec):
        raise KexecError('%s is missing from the agent ramdisk (package '
                         'kexec-tools)' % kexec)
    started = time.monotonic()
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir, mode=0o700)
    kernel_path = os.path.join(work_dir, 'kernel')
    initrd_path = os.path.join(work_dir, 'initrd')
    _fetch(kernel, kernel_path)
    # The first (the agent ramdisk, the largest) is the joined file; the
    # others are appended: at most one extra part in RAM at a time.
    _fetch(initrds[0], initrd_path)
    with open(initrd_path, 'ab') as joined:
        for i, spec in enumerate(initrds[1:], 1):
            # Each archive starts 4-byte aligned, as iPXE lays them out.
            joined.write(b'\0' * (-joined.tell() % 4))
            part = os.path.join(work_dir, 'initrd.%d' % i)
            _fetch(spec, part)
            with open(part, 'rb') as f:
                shutil.copyfileobj(f, joined, 1 << 20)
            os.unlink(part)
    fetched = time.monotonic()
    argv = [kexec, '--load', '--kexec-file-syscall',
            '--initrd=%s' % initrd_path, '--command-line=%s' % cmdline,
            kernel_path]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True,  # noqa: S603
                              timeout=LOAD_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KexecError('kexec --load failed: %s' % exc) from exc
    if proc.returncode != 0:
        raise KexecError('kexec --load exited %d: %s' % (
            proc.returncode, (proc.stderr or proc.stdout).strip()[-2000:]))
    # The kernel holds its own copy now.
    shutil.rmtree(work_dir, ignore_errors=True)
    return {'method': 'kexec_file_load',
            'initrd_bytes': _size_of(initrds),
            'download_s': round(fetched - started, 3),
            'load_s': round(time.monotonic() - fetched, 3)}


def _size_of(initrds):
    return sum(spec.get('size') or 0 for spec in initrds) or None


def loaded():
    """Whether a kernel is loaded for kexec (sysfs)."""
    try:
        with open('/sys/kernel/kexec_loaded') as f:
            return f.read().strip() == '1'
    except OSError:
        return False


def _jump(kexec, delay):
    time.sleep(delay)
    LOG.info('kexec: jumping into the loaded kernel')
    try:
        os.sync()
        subprocess.run([kexec, '--exec'], check=False,  # noqa: S603
                       timeout=60)
    except Exception:  # noqa: BLE001 - the agent goes on; logged
        LOG.exception('kexec --exec failed')
    # Still here: the jump failed; the conductor's callback timeout ends
    # the deploy (the agent's token is gone from the conductor).
    LOG.error('kexec --exec returned: the node stays in the old kernel')


def exec_soon(kexec=KEXEC, delay=EXEC_DELAY):
    """Jump into the loaded kernel ``delay`` seconds from now."""
    if not loaded():
        raise KexecError('no kernel is loaded for kexec (run the load step '
                         'first)')
    threading.Thread(target=_jump, args=(kexec, delay), name='bmc-kexec',
                     daemon=True).start()
    return {'exec_in_s': delay}
