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

import json
import platform
import shutil

BINARY = 'bmc-noise'
#: The thesis's lowest bucket edge: a delta of at least this many cycles
#: is an event.
DEFAULT_THRESHOLD_CYCLES = 150
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


def _us(cycles, hz):
    return round(cycles / hz * 1e6, 3) if hz else None


def convert(raw):
    """bmc-noise's JSON -> the per-CPU report of :mod:`.noise`."""
    hz = float(raw.get('tsc_hz') or 0)
    floor_ns = int(round(raw['floor_cycles'] / hz * 1e9)) if hz else 0
    report = _fields(raw, hz, floor_ns)
    if raw['floor_cycles'] * 2 > raw['threshold_cycles']:
        # Emulation (QEMU TCG traps every counter read) makes one loop
        # iteration cost hundreds of cycles.
        report['warning'] = (
            'the loop floor (%d cycles) is not below half the threshold '
            '(%d cycles): most readings count as events and the buckets '
            'say little; this is what an emulated counter (QEMU TCG) '
            'does; on hardware the floor is tens of cycles'
            % (raw['floor_cycles'], raw['threshold_cycles']))
    return report


def _fields(raw, hz, floor_ns):
    return {
        'cpu': raw['cpu'],
        'samples': raw['samples'],
        'duration_s': raw['duration_s'],
        'threshold_us': _us(raw['threshold_cycles'], hz),
        'floor_ns': floor_ns,
        'interruptions': raw['events'],
        'interruptions_per_s': raw['events_per_s'],
        'lost_share': raw['lost_share'],
        'largest_us': round(raw['largest_cycles'] / hz * 1e6, 2)
        if hz else None,
        'median_us': round(raw['median_cycles'] / hz * 1e6, 3)
        if hz else None,
        'p99_us': round(raw['p99_cycles'] / hz * 1e6, 3) if hz else None,
        'cycles': {
            'counter': raw['method'],
            'tsc_hz': raw['tsc_hz'],
            'floor': raw['floor_cycles'],
            'threshold': raw['threshold_cycles'],
            'buckets': raw['buckets'],
            'histogram': raw['histogram'],
            'mean': raw['mean_cycles'],
            'stddev': raw['stddev_cycles'],
            'ci90': raw['ci90_cycles'],
            'median': raw['median_cycles'],
            'p99': raw['p99_cycles'],
            'largest': raw['largest_cycles'],
        },
    }


def parse(output):
    """The converted report of one run's stdout.

    :raises ValueError: not bmc-noise's JSON.
    """
    raw = json.loads(output)
    if not isinstance(raw, dict) or 'tsc_hz' not in raw:
        raise ValueError('not the output of %s: %r' % (BINARY, output[:200]))
    return convert(raw)
