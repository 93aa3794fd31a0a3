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

"""The scale benchmark's numbers from what a run saw."""

import collections

from bmc_common import protocol
from bmc_lab import scale_report


class _Agents:
    errors = []
    stats = collections.Counter(lookups=3)


def _report(state='finished', code=0, started=12.0):
    return {'state': state, 'workload_exit_code': code,
            'stages': [{'name': protocol.STAGE_WORKLOAD_STARTED,
                        'start': started, 'end': started}]}


def _summary(reports, done=('a', 'b', 'c'), failed=None):
    return scale_report.summarize(
        3, 2, {'a': 10.0, 'b': 10.0, 'c': 11.0}, 30.0, list(done),
        dict(failed or {}), reports,
        {'ironic-conductor': 3.0, 'ironic-conductor-2': 1.5,
         'ironic-api': 0.6},
        {'ironic-conductor': 150.0, 'ironic-conductor-2': 140.0,
         'ironic-api': 120.0},
        {'ironic-conductor': 1, 'ironic-conductor-2': 1},
        {'cpu_ms_per_deploy': 40.0}, _Agents(), 9e6, 6e6)


def test_numbers_per_deploy():
    r = _summary({'a': _report(), 'b': _report(started=14.0),
                  'c': _report(started=13.0)})
    assert r['failures'] == 0
    assert r['deploys_per_min'] == 6.0
    # Both conductors' CPU, not the API's.
    assert r['conductor_cpu_ms_per_deploy'] == 1500.0
    assert r['conductor_cpu_ms_per_deploy_over_fake'] == 1460.0
    assert r['api_cpu_ms_per_deploy'] == 200.0
    assert r['conductor_peak_rss_mb'] == 150.0
    assert (r['t_ready_p50_s'], r['t_ready_max_s']) == (2.0, 4.0)
    fields = scale_report.json_fields([r])
    assert fields['scale2c_builds_per_image'] == 1
    assert fields['scale2c_failures'] == 0
    rows = dict(scale_report.format_rows([dict(r, nodes_per_conductor={
        'bmc-scale': 2, 'bmc-scale-2': 1})]))
    assert rows['  nodes per conductor (hash ring)'] == (
        'bmc-scale 2, bmc-scale-2 1')


def test_a_job_that_failed_or_never_ended_is_a_failure():
    r = _summary({'a': _report(), 'b': _report(code=1),
                  'c': _report(state='running')}, done=('a', 'b'),
                 failed={'c': 'not done within 60 s: wait call-back'})
    assert r['failures'] == 2
    assert r['failed']['b'] == 'run report finished, exit code 1'
    assert r['deploys_per_min'] == 2.0
    assert scale_report.json_fields([dict(r, conductors=1)])[
        'scale_failures'] == 2
