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

import os
import platform
import shutil
import subprocess
from unittest import mock

import pytest

from ipa_hardware_manager import noise
from ipa_hardware_manager import noise_native
from ipa_hardware_manager import steps_tunables

NATIVE = os.path.join(os.path.dirname(__file__), '..', '..', 'native')
#: bmc-noise and the measurement core it shares with bmc-noise-unikernel.
SOURCES = [os.path.join(NATIVE, 'bmc-noise.c'),
           os.path.join(NATIVE, 'noise-core.c')]


def _gcc():
    if platform.machine() != 'x86_64':
        pytest.skip('bmc-noise is x86-64 only')
    gcc = shutil.which('gcc')
    if gcc is None:
        pytest.skip('no gcc to build bmc-noise')
    return gcc


@pytest.fixture(scope='module')
def bmc_noise(tmp_path_factory):
    """bmc-noise built from its source, as the element builds it."""
    gcc = _gcc()
    path = str(tmp_path_factory.mktemp('native') / 'bmc-noise')
    subprocess.run([gcc, '-O2', '-Wall', '-Wextra', '-Werror', '-o', path]
                   + SOURCES, check=True)
    return path


def test_noise_core_against_libc(tmp_path):
    """The core's formatter, square root, division and sort (no libc in
    it, for the unikernel) give what printf, sqrt, / and qsort give."""
    gcc = _gcc()
    path = str(tmp_path / 'test-noise-core')
    subprocess.run([gcc, '-O2', '-Wall', '-Wextra', '-Werror', '-I', NATIVE,
                    '-o', path, os.path.join(NATIVE, 'tests',
                                             'test-noise-core.c'),
                    os.path.join(NATIVE, 'noise-core.c'), '-lm'], check=True)
    out = subprocess.run([path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].endswith(' passed, 0 failed')
    report = noise_native.parse(out.stdout.splitlines()[0])
    assert report['cycles']['counter'] == 'rdtscp'


def fake_clock(gaps, start=1000):
    """A clock whose successive readings differ by ``gaps`` (ns)."""
    now = [start]
    values = iter(gaps)

    def clock():
        value = now[0]
        now[0] += next(values, 100)
        return value
    return clock


def test_measure_counts_gaps_above_threshold():
    # 100 ns iterations with two interruptions: 50 µs and 20 µs.
    gaps = [100] * 50 + [50000] + [100] * 50 + [20000] + [100] * 1000
    raw = noise.measure(0.0001, 10000, clock=fake_clock(gaps))
    assert raw['interruptions'] == 2
    assert raw['largest_ns'] == 50000
    assert raw['floor_ns'] == 100
    assert raw['lost_ns'] == 50000 + 20000 - 2 * 100
    report = noise.summarise(3, raw, 10000)
    assert report['cpu'] == 3
    assert report['largest_us'] == 50.0
    assert report['interruptions'] == 2
    assert report['lost_share'] == pytest.approx(
        raw['lost_ns'] / raw['elapsed_ns'], abs=1e-6)
    assert 'warning' not in report


def test_threshold_close_to_floor_warns():
    raw = noise.measure(0.00005, 1000, clock=fake_clock([400] * 1000))
    report = noise.summarise(0, raw, 1000)
    assert report['interruptions'] == 0
    assert 'raise threshold_us' in report['warning']


def test_check_args():
    online = {0, 1, 2, 3}
    assert noise.check_args(None, None, None, online) == (
        [0, 1, 2, 3], noise.DEFAULT_DURATION, noise.DEFAULT_THRESHOLD_US)
    assert noise.check_args('1-N', 2, 20, online) == ([1, 2, 3], 2.0, 20.0)
    assert noise.check_args([2], '1.5', None, online)[:2] == ([2], 1.5)
    for args, message in [
            (('0', 31, None), r'duration must be in \(0, 30\]'),
            (('0', 0, None), 'duration must be in'),
            (('0', 'x', None), 'duration must be a number'),
            (('0', 1, 0.1), 'threshold_us must be at least'),
            (('5', 1, None), 'CPUs 5 are not online'),
            (('a-b', 1, None), 'not a CPU list')]:
        with pytest.raises(noise.NoiseError, match=message):
            noise.check_args(*args, online=online)


def test_overall():
    reports = [{'cpu': 0, 'duration_s': 1.0, 'lost_share': 0.01,
                'samples': 10, 'interruptions': 3, 'largest_us': 40.0},
               {'cpu': 1, 'duration_s': 1.0, 'lost_share': 0.03,
                'samples': 20, 'interruptions': 5, 'largest_us': 90.0},
               {'cpu': 2, 'error': 'worker timed out'}]
    assert noise.overall(reports) == {
        'cpus': 2, 'failed_cpus': [2], 'samples': 30, 'interruptions': 8,
        'lost_share': 0.02, 'largest_us': 90.0, 'noisiest_cpu': 1}


def test_probe_real_pinned_worker():
    cpu = min(os.sched_getaffinity(0))
    result = noise.probe([cpu], 0.2, 50, native=False)
    assert result['method'] == noise.PYTHON_PROBE
    (report,) = result['cpus']
    assert 'error' not in report, report
    assert report['cpu'] == cpu
    # Bounds of what the loop did, not of how fast the machine is: it
    # measured the 0.2 s asked and stopped at its first reading past
    # them, so it overshot by one gap at most (a quiet one, under the
    # 50 us threshold, or an interruption, no longer than the largest);
    # 1 ms for the report's rounding.
    assert report['duration_s'] >= 0.2
    assert report['duration_s'] <= 0.2 + 0.001 + max(
        report['largest_us'], 50) / 1e6, report
    # A tight loop: readings closer than the threshold, whose mean gap
    # (the floor) is under it, and which fit in the time measured.
    quiet = report['samples'] - report['interruptions']
    assert quiet > 0, report
    assert 0 < report['floor_ns'] <= 50 * 1000
    assert quiet * report['floor_ns'] <= (report['duration_s']
                                          + 0.0005) * 1e9
    assert result['overall']['cpus'] == 1
    assert result['threshold_us'] == 50.0


def test_step_noise_probe_bad_args():
    from ironic_python_agent import errors
    with pytest.raises(errors.DeploymentError,
                       match='bmc_noise_probe: duration must be'):
        steps_tunables.bmc_noise_probe({}, [], duration=100)


def test_native_probe_in_cycles(bmc_noise):
    cpu = min(os.sched_getaffinity(0))
    with mock.patch.object(noise.subprocess, 'Popen', autospec=True,
                           side_effect=subprocess.Popen) as popen:
        result = noise.probe([cpu], 0.3, threshold_cycles=150,
                             native=bmc_noise)
    # bmc-noise was asked for the duration and threshold given.
    popen.assert_called_once_with(
        [bmc_noise, '--cpu', str(cpu), '--duration', '0.3',
         '--threshold-cycles', '150'], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=None)
    (report,) = result['cpus']
    assert 'error' not in report, report
    assert result['method'].startswith('bmc-noise: time-stamp counter')
    assert result['threshold_cycles'] == 150
    cycles = report['cycles']
    assert cycles['counter'] in ('rdtscp', 'lfence-rdtsc')
    assert cycles['tsc_hz'] > 1e8
    # The floor of a counter loop: far below the thesis's first edge on
    # hardware, below a microsecond even under emulation.
    assert 0 < cycles['floor'] < cycles['tsc_hz'] / 1e6
    assert set(cycles['buckets']) == {'150-400', '400-2000', '2000-6000',
                                      '>6000'}
    assert sum(cycles['buckets'].values()) == report['interruptions']
    assert sum(n for _lo, n in cycles['histogram']) == (
        report['interruptions'])
    if report['interruptions'] > 1:
        low, high = cycles['ci90']
        assert low <= cycles['mean'] <= high
    # Bounds of what the loop did, not of how fast the machine is (its
    # stop is on a rate calibrated against the wall clock: no exact bound
    # of its duration holds under load).  Every reading is at least the
    # floor (the smallest gap) after the one before, so the readings fit
    # in the cycles the run spun (its duration at its measured rate; the
    # duration's rounding to the ms allowed for); the events are rated
    # per second of that duration.
    assert report['samples'] >= max(2, report['interruptions'])
    assert report['duration_s'] > 0
    assert report['samples'] * cycles['floor'] <= (
        cycles['tsc_hz'] * (report['duration_s'] + 0.0005) + 1)
    assert report['interruptions_per_s'] == pytest.approx(
        report['interruptions'] / report['duration_s'], rel=0.01, abs=0.01)
    assert report['floor_ns'] < 1000
    assert result['overall']['cpus'] == 1


@pytest.mark.parametrize('args', [
    [], ['--cpu'], ['--cpu', 'x'], ['--cpu', '0', '--duration', '0'],
    ['--cpu', '0', '--duration', '31'], ['--cpu', '0', '--bogus', '1'],
    ['--cpu', '0', '--threshold-cycles', '0']])
def test_native_probe_refuses_bad_arguments(bmc_noise, args):
    done = subprocess.run([bmc_noise] + args, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2 and done.stdout == ''


def test_native_unusable_cpu_falls_back_to_python(tmp_path):
    fake = tmp_path / 'bmc-noise'
    fake.write_text('#!/bin/sh\necho "this CPU has no TSC" >&2\nexit 3\n')
    fake.chmod(0o755)
    cpu = min(os.sched_getaffinity(0))
    result = noise.probe([cpu], 0.2, 50, native=str(fake))
    (report,) = result['cpus']
    assert 'error' not in report, report
    assert 'cycles' not in report
    assert result['method'] == noise.PYTHON_PROBE


def test_native_failure_is_the_cpus_error(tmp_path):
    fake = tmp_path / 'bmc-noise'
    fake.write_text('#!/bin/sh\necho "boom" >&2\nexit 1\n')
    fake.chmod(0o755)
    result = noise.probe([min(os.sched_getaffinity(0))], 0.2,
                         native=str(fake))
    assert 'worker failed (exit 1): boom' in result['cpus'][0]['error']


def test_convert_to_microseconds():
    report = noise_native.convert({
        'cpu': 1, 'method': 'rdtscp', 'tsc_hz': 2e9, 'duration_s': 1.0,
        'samples': 10, 'floor_cycles': 40, 'threshold_cycles': 150,
        'events': 3, 'events_per_s': 3.0, 'lost_share': 0.001,
        'largest_cycles': 20000, 'median_cycles': 300, 'p99_cycles': 20000,
        'mean_cycles': 6866.7, 'stddev_cycles': 11373.0,
        'ci90_cycles': [-3934.0, 17667.4],
        'buckets': {'150-400': 2, '400-2000': 0, '2000-6000': 0,
                    '>6000': 1}, 'histogram': [[256, 2], [16384, 1]]})
    assert report['floor_ns'] == 20
    assert report['threshold_us'] == 0.075
    assert report['largest_us'] == 10.0
    assert report['interruptions'] == 3
    assert report['cycles']['histogram'] == [[256, 2], [16384, 1]]
    assert 'warning' not in report


def test_convert_warns_when_the_floor_is_near_the_threshold():
    raw = {'cpu': 0, 'method': 'lfence-rdtsc', 'tsc_hz': 2.1e9,
           'duration_s': 2.0, 'samples': 10, 'floor_cycles': 248,
           'threshold_cycles': 150, 'events': 10, 'events_per_s': 5.0,
           'lost_share': 0.39, 'largest_cycles': 29834296,
           'median_cycles': 404, 'p99_cycles': 510, 'mean_cycles': 406.4,
           'stddev_cycles': 27169.3, 'ci90_cycles': [392.5, 420.4],
           'buckets': {}, 'histogram': [[256, 10]]}
    assert 'loop floor (248 cycles)' in noise_native.convert(raw)['warning']


def test_step_threshold_cycles_checked():
    from ironic_python_agent import errors
    with pytest.raises(errors.DeploymentError,
                       match='threshold_cycles must be at least 1'):
        steps_tunables.bmc_noise_probe({}, [], threshold_cycles=0)


def test_native_probe_joins_the_cgroup_given(bmc_noise, tmp_path):
    """A workload CPU is probed from the workload's cgroup: bmc-noise
    writes its pid into cgroup.procs before pinning."""
    (tmp_path / 'cgroup.procs').write_text('')
    cpu = min(os.sched_getaffinity(0))
    result = noise.probe([cpu], 0.1, native=bmc_noise,
                         cgroups={cpu: str(tmp_path)})
    assert 'error' not in result['cpus'][0], result
    assert (tmp_path / 'cgroup.procs').read_text().strip().isdigit()
    result = noise.probe([cpu], 0.1, native=bmc_noise,
                         cgroups={cpu: str(tmp_path / 'missing')})
    assert 'cannot join the cgroup' in result['cpus'][0]['error']


def test_python_worker_joins_the_cgroup_given(tmp_path):
    (tmp_path / 'cgroup.procs').write_text('')
    cpu = min(os.sched_getaffinity(0))
    result = noise.probe([cpu], 0.1, 50, native=False,
                         cgroups={cpu: str(tmp_path)})
    assert 'error' not in result['cpus'][0], result
    assert (tmp_path / 'cgroup.procs').read_text().strip().isdigit()


def test_workload_partition_cgroups(tmp_path, monkeypatch):
    group = tmp_path / 'sys/fs/cgroup/bmc-workload'
    group.mkdir(parents=True)
    own = os.sched_getaffinity(0)
    outside = max(own) + 1
    monkeypatch.setattr(steps_tunables.applier, 'workload_cpus',
                        lambda: {min(own), outside})
    assert steps_tunables.workload_partition_cgroups(str(tmp_path)) == {
        outside: str(group)}
    monkeypatch.setattr(steps_tunables.applier, 'workload_cpus',
                        lambda: None)
    assert steps_tunables.workload_partition_cgroups(str(tmp_path)) == {}
