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

"""Where the node's own boot went, in seconds since the kernel started.

From the kernel's log (``/dev/kmsg``, whose timestamps count from the
kernel's start): when it began and finished unpacking the initramfs and
when it ran init; from ``/proc/self/stat``: when the agent's process
started; and the boot clock now, which lets the conductor place all of
these on its own clock (it knows when it sent the call that reads them).
"""

import os
import time

KMSG = '/dev/kmsg'
#: Kernel messages that mark a boot phase: (mark, message prefix).
MARKS = (
    ('unpack_start', 'Trying to unpack rootfs image as initramfs'),
    ('unpack_end', 'Freeing initrd memory'),
    ('init_start', 'Run /init as init process'),
)
#: The kernel messages read at most (the boot's are the first ones).
MAX_RECORDS = 5000


def kernel_records(path=KMSG, limit=MAX_RECORDS):
    """(seconds since the kernel started, message) of the kernel log."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        for _ in range(limit):
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                return          # the end of the log
            except BrokenPipeError:
                continue        # overwritten while read: the next one
            except OSError:
                return
            header, _, message = record.decode(
                errors='replace').partition(';')
            fields = header.split(',')
            try:
                usec = int(fields[2])
            except (IndexError, ValueError):
                continue
            yield usec / 1e6, message.split('\n', 1)[0]
    finally:
        os.close(fd)


def process_start(pid='self', proc='/proc'):
    """Seconds since the kernel started at which process ``pid`` began."""
    with open(os.path.join(proc, str(pid), 'stat')) as f:
        # The command name may hold spaces: fields after its ')'.
        fields = f.read().rsplit(')', 1)[1].split()
    return int(fields[19]) / os.sysconf('SC_CLK_TCK')


def collect(path=KMSG, proc='/proc'):
    """The node's boot marks (seconds since the kernel started) and its
    boot clock now (``uptime``)."""
    out = {'uptime': round(time.clock_gettime(time.CLOCK_BOOTTIME), 3)}
    kernel = {}
    for seconds, message in kernel_records(path):
        for mark, prefix in MARKS:
            if mark not in kernel and message.startswith(prefix):
                kernel[mark] = round(seconds, 3)
                if mark == 'unpack_end':
                    kib = message.split(':', 1)[-1].strip().rstrip('K')
                    if kib.isdigit():
                        out['initrd_kib'] = int(kib)
        if len(kernel) == len(MARKS):
            break
    out['kernel'] = kernel
    # Which kernel booted: a build's "uname -v" names it (kernel_build).
    uname = os.uname()
    out['uname'] = {'release': uname.release, 'version': uname.version}
    try:
        out['agent_start'] = round(process_start(proc=proc), 3)
    except (OSError, IndexError, ValueError):
        pass
    return out
