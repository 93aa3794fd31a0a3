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

import pytest

from ipa_hardware_manager import noise
from ipa_hardware_manager import steps_tunables


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
    result = noise.probe([cpu], 0.2, 50)
    (report,) = result['cpus']
    assert 'error' not in report, report
    assert report['cpu'] == cpu
    assert report['samples'] > 1000
    assert 0.15 <= report['duration_s'] < 1
    assert result['overall']['cpus'] == 1
    assert result['threshold_us'] == 50.0


def test_step_noise_probe_bad_args():
    from ironic_python_agent import errors
    with pytest.raises(errors.DeploymentError,
                       match='bmc_noise_probe: duration must be'):
        steps_tunables.bmc_noise_probe({}, [], duration=100)
