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

"""``openstack baremetal container noise``: Linux and unikernel noise."""

from osc_lib import exceptions
import pytest

from ironic_bmc_client import noise_table
from ironic_bmc_client.osc import commands
from ironic_bmc_client.tests import fakes
from ironic_bmc_client.tests import fixtures

UK_ID = '7e57c0de-0000-4000-8000-00000000000a'


def _cpu(cpu, events, floor=40, counter='rdtscp'):
    return {'cpu': cpu, 'interruptions': events, 'interruptions_per_s':
            events / 5.0, 'lost_share': 0.0012,
            'cycles': {'counter': counter, 'floor': floor, 'tsc_hz': 2e9,
                       'mean': 950.5, 'stddev': 20.25, 'ci90': [900.1,
                                                                1000.9],
                       'buckets': {'150-400': events - 1, '400-2000': 1,
                                   '2000-6000': 0, '>6000': 0},
                       'histogram': [[128, events - 1], [512, 1]]}}


def _linux():
    return fixtures.report(noise={
        'before-tunables': {'noise': {'method': 'bmc-noise rdtscp',
                                      'cpus': [_cpu(0, 30), _cpu(1, 20)]}},
        'after-tunables': {'noise': {'method': 'bmc-noise rdtscp',
                                     'cpus': [_cpu(0, 25), _cpu(1, 4)]}}})


def _unikernel():
    return fixtures.report(
        deploy_id=UK_ID, kind='unikernel', kernel_args=['duration=5'],
        tunables={}, noise={'unikernel': {'noise': {
            'method': 'bmc-noise-unikernel rdtscp',
            'cpus': [_cpu(0, 2, counter='bmc-noise-unikernel rdtscp')]}}})


def test_rows_of_linux_before_and_after_and_the_unikernel():
    columns, rows = noise_table.table([_linux(), _unikernel()])
    table = [dict(zip(columns, row, strict=True)) for row in rows]
    assert [(r['probe'], r['cpu']) for r in table] == [
        ('after-tunables', 0), ('after-tunables', 1),
        ('before-tunables', 0), ('before-tunables', 1), ('unikernel', 0)]
    assert table[0]['system'].startswith('Linux (')
    assert 'tunables hugepages,swappiness,thp' in table[0]['system']
    last = table[-1]
    assert last['system'] == 'unikernel duration=5'
    assert last['run'] == UK_ID[:8]
    assert last['counter'] == 'bmc-noise-unikernel rdtscp'
    assert (last['floor (cycles)'], last['events/s'], last['time lost %'],
            last['90% CI'], last['150-400'], last['400-2000']) == (
        '40', '0.4', '0.120', '900..1001', '1', '1')


def test_the_command_prints_the_table_and_one_chart(tmp_path):
    fake = fakes.FakeRuns(_linux(), _unikernel())
    chart = tmp_path / 'noise.svg'
    columns, rows = fakes.run(commands.CompareNoise, fakes.app(fake), [
        fixtures.DEPLOY_ID, UK_ID, '--chart', str(chart)])
    assert columns == noise_table.COLUMNS
    assert len(list(rows)) == 5
    svg = chart.read_bytes()
    assert b'<svg' in svg and b'unikernel' in svg


def test_runs_without_a_probe_are_refused_with_the_way_to_get_one():
    fake = fakes.FakeRuns(fixtures.report())
    with pytest.raises(exceptions.CommandError,
                       match='container_noise_probe'):
        fakes.run(commands.CompareNoise, fakes.app(fake),
                  [fixtures.DEPLOY_ID])


def test_an_unknown_chart_format_is_refused_first():
    fake = fakes.FakeRuns(_linux())
    with pytest.raises(exceptions.CommandError, match='png'):
        fakes.run(commands.CompareNoise, fakes.app(fake),
                  [fixtures.DEPLOY_ID, '--chart', 'x.jpg'])
    assert fake.calls == []
