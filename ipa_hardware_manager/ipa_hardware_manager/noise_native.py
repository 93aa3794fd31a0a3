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

"""The cycle-level OS-noise probe, ``bmc-noise`` (``native/bmc-noise.c``,
built into the agent ramdisk by the ``bmc-agent`` element).  Its bare-metal
twin, ``bmc-noise-unikernel`` (``unikernel/`` at the top of the
repository), shares its measurement core (``native/noise-core.c``) and
prints the same JSON, which :func:`convert` reads too.

An ``rdtscp``-timed loop per CPU, as the IncludeOS thesis measures: its
floor is tens of cycles, so the thesis's 150-400, 400-2000, 2000-6000 and
over-6000-cycle delays are seen, where the Python probe (a floor near a
microsecond) sees only those of some microseconds.  Its result is
converted here into the per-CPU fields of :mod:`.noise` (microseconds at
the counter's measured rate) with the cycle-level detail under
``cycles``: the buckets, the log2 histogram, the mean, standard
deviation and 90 % confidence interval of the events.
"""

import platform
import shutil

from bmc_common import noise_cycles

BINARY = noise_cycles.BINARY
DEFAULT_THRESHOLD_CYCLES = noise_cycles.DEFAULT_THRESHOLD_CYCLES
MIN_THRESHOLD_CYCLES = 1
#: Exit status of bmc-noise when the CPU cannot be measured (no TSC, not
#: pinnable): the Python probe measures it instead.
EXIT_UNUSABLE = 3


def binary():
    """The probe's path, or None where it cannot run (not x86-64, not in
    this ramdisk)."""
    if platform.machine() not in ('x86_64', 'AMD64'):
        return None
    return shutil.which(BINARY)


def command(path, cpu, duration, threshold_cycles):
    return [path, '--cpu', str(cpu), '--duration', str(duration),
            '--threshold-cycles', str(int(threshold_cycles))]


# The conversion is shared with the conductor (unikernel runs).
convert = noise_cycles.convert
parse = noise_cycles.parse
