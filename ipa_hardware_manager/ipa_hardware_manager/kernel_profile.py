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

"""The gcov profile of the running kernel: reset it, read it.

A kernel built with ``CONFIG_GCOV_KERNEL`` and ``CONFIG_GCOV_PROFILE_ALL``
counts every arc of its code and shows the counts as one ``.gcda`` file
per object under ``/sys/kernel/debug/gcov/<object tree>/``.  Writing to
``reset`` there zeroes them (just before the workload starts); after it
each file is read until EOF, as ``cat`` does (the files say size 0, so
``cp`` and ``tar`` copy nothing: the kernel's gcov.rst, appendix B), into
an uncompressed tar the conductor checks before it keeps it.
"""

import hashlib
import io
import os
import subprocess
import tarfile
import time

from bmc_common import protocol

DEBUGFS = '/sys/kernel/debug'
GCOV_ROOT = os.path.join(DEBUGFS, 'gcov')


class KernelProfileError(Exception):
    """No profile can be taken or read; the message says why."""


def _gcov_root(root):
    if os.path.isdir(root):
        return root
    if root == GCOV_ROOT and not os.path.ismount(DEBUGFS):
        # argv list, no shell: mount debugfs where it always is.
        subprocess.run(['/bin/mount', '-t', 'debugfs', 'debugfs',  # noqa: S603
                        DEBUGFS], capture_output=True, check=False)
    if not os.path.isdir(root):
        raise KernelProfileError(
            '%s=gcov: the booted kernel (%s) has no gcov profile (%s is '
            'missing): boot a kernel of the gcov variant (kernel_build '
            'variant=gcov)' % (protocol.II_KERNEL_PROFILE,
                               os.uname().version, root))
    return root


def reset(root=GCOV_ROOT):
    """Zero every counter of the kernel; returns when it was done."""
    root = _gcov_root(root)
    try:
        with open(os.path.join(root, 'reset'), 'w') as f:
            f.write('1')
    except OSError as exc:
        raise KernelProfileError('cannot reset the gcov counters: %s'
                                 % exc) from exc
    return time.time()


def collect(max_bytes, root=GCOV_ROOT):
    """The counters as a tar of ``.gcda`` files named by their paths under
    ``root``: ``{"data", "sha256", "files", "bytes", "uname_v"}``
    (``data`` packed as the collect step's).

    :raises: KernelProfileError when there is none, or it is bigger than
        ``max_bytes``.
    """
    root = _gcov_root(root)
    buf = io.BytesIO()
    files = total = 0
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                # The .gcno entries are symlinks into the build tree.
                if not name.endswith('.gcda') or os.path.islink(path):
                    continue
                with open(path, 'rb') as f:
                    data = f.read()     # until EOF: the size says 0
                total += len(data)
                if total > max_bytes:
                    raise KernelProfileError(
                        'the gcov profile is more than %d bytes (the '
                        'conductor\'s [container]kernel_profile_max_mb)'
                        % max_bytes)
                info = tarfile.TarInfo(os.path.relpath(path, root))
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
                files += 1
    if not files:
        raise KernelProfileError('%s holds no .gcda file' % root)
    data = buf.getvalue()
    return {'data': protocol.pack(data),
            'sha256': hashlib.sha256(data).hexdigest(),
            'files': files, 'bytes': total, 'uname_v': os.uname().version,
            'machine': machine()}


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ''


def machine(cpuinfo='/proc/cpuinfo',
            clocksource='/sys/devices/system/clocksource/clocksource0/'
                        'current_clocksource'):
    """Where the profile (and the runs it is compared with) ran:
    ``{"cpu_model", "hypervisor", "clocksource", "emulated"}``.

    ``emulated``: a QEMU CPU model under a hypervisor without kvm-clock,
    i.e. QEMU TCG, which models no caches or branch predictors: a kernel
    optimised from this profile can be shown to work there, not to gain.
    """
    text = _read(cpuinfo)
    model, flags = '', set()
    for line in text.splitlines():
        key, _sep, value = line.partition(':')
        key = key.strip()
        if key == 'model name' and not model:
            model = value.strip()
        elif key == 'flags' and not flags:
            flags = set(value.split())
    source = _read(clocksource).strip()
    hypervisor = 'hypervisor' in flags
    return {'cpu_model': model, 'hypervisor': hypervisor,
            'clocksource': source,
            'emulated': hypervisor and 'QEMU' in model
            and source != 'kvm-clock'}
