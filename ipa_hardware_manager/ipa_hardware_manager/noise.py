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

"""OS-noise probe: how often, and how long, the OS takes a CPU away.

A fixed-work-quantum loop (FWQ, as sysjitter does it): one process per
CPU, pinned with ``sched_setaffinity``, reads the clock in a tight loop
for a fixed duration.  Consecutive readings normally differ by the cost
of one iteration (the *floor*); a larger gap means the CPU did something
else (an interrupt, a softirq, another task, a hypervisor exit).  Gaps
above the threshold count as interruptions; the time lost is the sum of
(gap - floor) over them.

Where the ramdisk has ``bmc-noise`` (:mod:`.noise_native`, x86-64), each
CPU is measured by it, in cycles of the time-stamp counter.  This module's
own loop is the fallback: its clock is ``time.perf_counter_ns()``
(``CLOCK_MONOTONIC`` through the vDSO), whose floor is roughly 0.1-1 µs
per iteration on hardware (more under emulation, e.g. QEMU TCG) instead
of tens of cycles, so events shorter than about 1 µs are invisible and
the default threshold is ``DEFAULT_THRESHOLD_US`` = 10 µs, ten times the
worst floor seen on hardware.  Each result reports its floor and warns
if the threshold is closer than 4x to it.

Each CPU runs in its own interpreter (``python -m
ipa_hardware_manager.noise --worker``), not in a thread: the agent's
threads and their GIL hand-offs would otherwise show up as noise.  The
cyclic garbage collector is off while measuring.  Standard library only.
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import time

from bmc_common.tunables import schema
from ipa_hardware_manager import noise_native

DEFAULT_DURATION = 5.0
MAX_DURATION = 30.0
DEFAULT_THRESHOLD_US = 10.0
MIN_THRESHOLD_US = 0.5
#: Interruption lengths kept per CPU for the percentiles.
MAX_KEPT = 100000
#: Time allowed for the worker interpreters to start and report.
STARTUP_SLACK = 60.0
_TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class NoiseError(ValueError):
    """Bad probe arguments; the message says which."""


def measure(duration_s, threshold_ns, clock=time.perf_counter_ns):
    """Spin for ``duration_s`` on the current CPU; return the raw counts.

    The loop body is kept minimal: the floor is derived afterwards from
    the mean quiet iteration, not tracked per iteration.
    """
    gaps = []
    samples = count = total = largest = 0
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = prev = clock()
        end = start + int(duration_s * 1e9)
        while prev < end:
            now = clock()
            if now - prev > threshold_ns:
                gap = now - prev
                count += 1
                total += gap
                if gap > largest:
                    largest = gap
                if count <= MAX_KEPT:
                    gaps.append(gap)
            prev = now
            samples += 1
    finally:
        if was_enabled:
            gc.enable()
    elapsed = prev - start
    quiet = samples - count
    floor = (elapsed - total) // quiet if quiet > 0 else 0
    return {'samples': samples, 'elapsed_ns': elapsed, 'floor_ns': floor,
            'interruptions': count, 'gaps_ns': gaps, 'largest_ns': largest,
            'lost_ns': max(0, total - floor * count)}


def _percentile(values, fraction):
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summarise(cpu, raw, threshold_ns):
    """Per-CPU report from ``measure``'s raw counts (µs, shares)."""
    gaps = raw['gaps_ns']
    elapsed = raw['elapsed_ns'] or 1
    report = {
        'cpu': cpu,
        'samples': raw['samples'],
        'duration_s': round(elapsed / 1e9, 3),
        'threshold_us': round(threshold_ns / 1e3, 3),
        'floor_ns': raw['floor_ns'],
        'interruptions': raw['interruptions'],
        'interruptions_per_s': round(raw['interruptions'] / (elapsed / 1e9),
                                     2),
        'lost_share': round(raw['lost_ns'] / elapsed, 6),
        'largest_us': round(raw['largest_ns'] / 1e3, 2),
        'median_us': round(_percentile(gaps, 0.5) / 1e3, 2),
        'p99_us': round(_percentile(gaps, 0.99) / 1e3, 2),
    }
    if raw['floor_ns'] * 4 > threshold_ns:
        report['warning'] = ('threshold %.1f µs is less than 4x the loop '
                             'floor %d ns: raise threshold_us'
                             % (threshold_ns / 1e3, raw['floor_ns']))
    return report


def join_cgroup(path):
    """Move this process into the cgroup v2 directory ``path``."""
    with open(os.path.join(path, 'cgroup.procs'), 'w') as f:
        f.write('%d\n' % os.getpid())


def worker(cpu, duration_s, threshold_us, cgroup=None):
    """Pin to ``cpu`` (from ``cgroup`` when given), measure, return the
    per-CPU report."""
    if cgroup:
        join_cgroup(cgroup)
    os.sched_setaffinity(0, {cpu})
    if os.sched_getaffinity(0) != {cpu}:
        raise OSError('could not pin to CPU %d' % cpu)
    threshold_ns = int(threshold_us * 1000)
    return summarise(cpu, measure(duration_s, threshold_ns), threshold_ns)


def _online_cpus(root='/'):
    try:
        with open(os.path.join(root, 'sys/devices/system/cpu/online')) as f:
            return schema.expand_cpulist(f.read().strip(), 0)
    except (OSError, schema.TunableError):
        return set(range(os.cpu_count() or 1))


def check_args(cpus, duration, threshold_us, online=None):
    """Validate the probe arguments; return (cpus, duration, threshold)."""
    online = online if online is not None else _online_cpus()
    try:
        duration = float(DEFAULT_DURATION if duration is None else duration)
    except (TypeError, ValueError):
        raise NoiseError('duration must be a number of seconds, got %r'
                         % (duration,)) from None
    if not 0 < duration <= MAX_DURATION:
        raise NoiseError('duration must be in (0, %g] seconds, got %g'
                         % (MAX_DURATION, duration))
    try:
        threshold_us = float(DEFAULT_THRESHOLD_US if threshold_us is None
                             else threshold_us)
    except (TypeError, ValueError):
        raise NoiseError('threshold_us must be a number, got %r'
                         % (threshold_us,)) from None
    if threshold_us < MIN_THRESHOLD_US:
        raise NoiseError('threshold_us must be at least %g (the loop floor '
                         'of a Python probe), got %g'
                         % (MIN_THRESHOLD_US, threshold_us))
    if cpus is None or cpus == '':
        wanted = set(online)
    else:
        try:
            wanted = schema.expand_cpulist(schema.parse_cpulist(
                cpus, 'cpus'), max(online))
        except schema.TunableError as exc:
            raise NoiseError(str(exc)) from None
    offline = wanted - set(online)
    if offline:
        raise NoiseError('CPUs %s are not online (online: %s)' % (
            schema.format_cpulist(offline), schema.format_cpulist(online)))
    return sorted(wanted), duration, threshold_us


def probe(cpus=None, duration=DEFAULT_DURATION, threshold_us=None,
          threshold_cycles=None, native=None, cgroups=None):
    """Measure OS noise on ``cpus`` (default: all online) in parallel.

    With ``bmc-noise`` in the ramdisk (:mod:`.noise_native`; ``native``
    overrides where it is looked for, ``False`` forces the Python probe)
    each CPU is measured in cycles, events from ``threshold_cycles`` up;
    the Python probe (events from ``threshold_us`` up) measures where it
    cannot run, and CPUs it finds unusable.  ``cgroups`` maps a CPU to the
    cgroup its worker runs in: the workload's partition owns CPUs that the
    agent's own cgroup may not use.

    Returns ``{"cpus": [per-CPU reports], "overall": {...}, "method":
    ...}``; a CPU whose worker failed has an ``error`` instead.
    """
    cpus, duration, threshold_us = check_args(cpus, duration, threshold_us)
    threshold_cycles = _check_cycles(threshold_cycles)
    path = noise_native.binary() if native is None else native
    deadline = time.monotonic() + duration + STARTUP_SLACK
    cgroups = cgroups or {}
    procs = {cpu: _spawn(cpu, duration, threshold_us, threshold_cycles,
                         path, cgroups.get(cpu)) for cpu in cpus}
    reports, unusable = _collect(procs, deadline)
    if unusable:
        # No TSC, or not pinnable by bmc-noise: the Python probe.
        again = {cpu: _spawn(cpu, duration, threshold_us, threshold_cycles,
                             None, cgroups.get(cpu)) for cpu in unusable}
        more, _none = _collect(again, time.monotonic() + duration
                               + STARTUP_SLACK)
        reports = sorted(reports + more, key=lambda r: r['cpu'])
    methods = sorted({r.get('probe', PYTHON_PROBE) for r in reports
                      if 'error' not in r})
    return {'method': ', '.join(methods) or PYTHON_PROBE,
            'threshold_us': threshold_us, 'duration_s': duration,
            'threshold_cycles': threshold_cycles if path else None,
            'cpus': reports, 'overall': overall(reports)}


#: How each kind of worker says it measured.
PYTHON_PROBE = ('python fixed-work loop, time.perf_counter_ns, one pinned '
                'process per CPU')
NATIVE_PROBE = ('bmc-noise: time-stamp counter loop (%s), one pinned '
                'process per CPU')


def _check_cycles(value):
    try:
        value = int(noise_native.DEFAULT_THRESHOLD_CYCLES if value is None
                    else value)
    except (TypeError, ValueError):
        raise NoiseError('threshold_cycles must be a whole number of '
                         'cycles, got %r' % (value,)) from None
    if value < noise_native.MIN_THRESHOLD_CYCLES:
        raise NoiseError('threshold_cycles must be at least %d, got %d'
                         % (noise_native.MIN_THRESHOLD_CYCLES, value))
    return value


def _spawn(cpu, duration, threshold_us, threshold_cycles, path,
           cgroup=None):
    if path:
        cmd = noise_native.command(path, cpu, duration, threshold_cycles)
        env = None
    else:
        cmd = [sys.executable, '-m', 'ipa_hardware_manager.noise',
               '--worker', '--cpu', str(cpu), '--duration', str(duration),
               '--threshold-us', str(threshold_us)]
        # The workers import this package: make sure they find this copy.
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(
            p for p in (_TOP, env.get('PYTHONPATH')) if p)
    if cgroup:
        cmd += ['--cgroup', cgroup]
    # argv list, no shell: this agent's own noise worker.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,  # noqa: S603
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    return proc, bool(path)


def _collect(procs, deadline):
    """(reports, CPUs that bmc-noise found unusable)."""
    reports, unusable = [], []
    for cpu, (proc, native) in procs.items():
        try:
            out, err = proc.communicate(
                timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            reports.append({'cpu': cpu, 'error': 'worker timed out'})
            continue
        if native and proc.returncode == noise_native.EXIT_UNUSABLE:
            unusable.append(cpu)
            continue
        try:
            if proc.returncode != 0:
                raise ValueError(err.strip()[-300:])
            if native:
                report = noise_native.parse(out)
                report['probe'] = NATIVE_PROBE % report['cycles']['counter']
            else:
                report = json.loads(out)
            reports.append(report)
        except (ValueError, KeyError, TypeError) as exc:
            reports.append({'cpu': cpu, 'error': 'worker failed (exit %s): '
                            '%s' % (proc.returncode, exc)})
    return reports, unusable


def overall(reports):
    good = [r for r in reports if 'error' not in r]
    elapsed = sum(r['duration_s'] for r in good)
    lost = sum(r['lost_share'] * r['duration_s'] for r in good)
    return {
        'cpus': len(good),
        'failed_cpus': [r['cpu'] for r in reports if 'error' in r],
        'samples': sum(r['samples'] for r in good),
        'interruptions': sum(r['interruptions'] for r in good),
        'lost_share': round(lost / elapsed, 6) if elapsed else 0.0,
        'largest_us': max((r['largest_us'] for r in good), default=0.0),
        'noisiest_cpu': max(good, key=lambda r: r['lost_share'])['cpu']
        if good else None,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--worker', action='store_true')
    parser.add_argument('--cpu', type=int)
    parser.add_argument('--cpus')
    parser.add_argument('--duration', type=float, default=DEFAULT_DURATION)
    parser.add_argument('--cgroup')
    parser.add_argument('--threshold-us', type=float,
                        default=DEFAULT_THRESHOLD_US)
    args = parser.parse_args(argv)
    if args.worker:
        report = worker(args.cpu, min(args.duration, MAX_DURATION),
                        args.threshold_us, args.cgroup)
    else:
        report = probe(args.cpus, args.duration, args.threshold_us)
    json.dump(report, sys.stdout)
    sys.stdout.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
