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

import json
import subprocess

from bmc_lab import pgo_bench


def _loop(cached, deploy_id='p1'):
    return {
        'builds': {k: {'seconds': s, 'cached': cached,
                       'build': {'profile': {'objects_without_profile': 40}}
                       if k == 'pgo' else {}}
                   for k, s in (('plain', 300.0), ('gcov', 370.0),
                                ('pgo', 360.0))},
        'profile': {'deploy_id': deploy_id, 'files': 1500, 'bytes': 9e6},
        'summary': [{'kernel': 'plain', 'metric_median': 100.0,
                     'workload_s': 20.0},
                    {'kernel': 'pgo', 'metric_median': 101.0,
                     'workload_s': 19.8}],
        'table': [{'kernel': 'plain', 'change': 'baseline'},
                  {'kernel': 'pgo', 'change': '+1.0 %',
                   'break-even (runs)': '4.1e+03'}],
        'uname_v': {'plain': '#plain-x SMP', 'pgo': '#pgo-y SMP'},
        'loop_seconds': 820.0, 'where_measured': 'TCG: no gain can be '
                                                 'measured.'}


def test_summary_of_the_two_loops():
    result = pgo_bench.summarize(_loop(False), _loop(True))
    assert result['pgo_build_s'] == {'plain': 300.0, 'gcov': 370.0,
                                     'pgo': 360.0}
    assert result['pgo_metric_median'] == {'plain': 100.0, 'pgo': 101.0}
    assert result['pgo_change'] == '+1.0 %'
    assert result['pgo_second_loop_cached'] == {'plain': True, 'gcov': True,
                                                'pgo': True}
    assert result['pgo_second_loop_profile_reused'] is True
    assert result['pgo_uname_v']['pgo'] == '#pgo-y SMP'
    text = pgo_bench.format_rows(result)
    assert 'kernel builds (s): plain 300.0, gcov 370.0, pgo 360.0' in text
    assert text.rstrip().endswith('TCG: no gain can be measured.')
    assert not pgo_bench.summarize(_loop(False), _loop(True, 'p2'))[
        'pgo_second_loop_profile_reused']


def test_the_workload_prints_its_metric_as_json():
    # The same script under the host's busybox sh, with a tiny count.
    proc = subprocess.run(['busybox', 'sh', '-c', pgo_bench.WORKLOAD],
                          env={'PGO_N': '5', 'PATH': '/usr/bin:/bin'},
                          capture_output=True, text=True, check=True)
    metric = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(metric) == {'seconds', 'forks_per_s'}
