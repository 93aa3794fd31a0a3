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

"""Who owns a run, and where the container runs API finds it."""

import os
import time
import types
from unittest import mock

from ironic.tests import base
from oslo_utils import uuidutils

from ironic_bmc.conf import CONF
from ironic_bmc.drivers import energy as drivers_energy
from ironic_bmc.power import energy
from ironic_bmc.power import sampler
from ironic_bmc import report as run_report
from ironic_bmc import run_files
from ironic_bmc import run_store

NODE = '2b2b2b2b-0000-4000-8000-000000000001'


INSTANCE = '3c3c3c3c-0000-4000-8000-000000000001'


def _node(instance_info=None, lessee=None, owner=None, instance=INSTANCE):
    return types.SimpleNamespace(
        uuid=NODE, name='n1', instance_info=instance_info or {},
        lessee=lessee, owner=owner, instance_uuid=instance)


_CONTAINER = types.SimpleNamespace(image='r/i:1', rootfs='ramfs', mode='job')


class RunStoreTestCase(base.TestCase):

    def _clear_attrs(self):
        pass

    def setUp(self):
        super().setUp()
        self.config_temp_dir('report_dir', group='container')

    def test_the_run_is_for_the_project_ownership_names(self):
        # Nova's project on a node an instance holds (no lessee).
        report = run_report.new(_node({'project_id': 'p1'}, owner='o'),
                                _CONTAINER)
        self.assertEqual('p1', report['project_id'])
        self.assertEqual('o', report['node_owner'])
        self.assertEqual(INSTANCE, report['instance_uuid'])
        # The lessee's, whatever instance_info/project_id says (a lessee
        # admin may write it: finding 9, a run filed into a victim's
        # list).
        self.assertEqual('p2', run_report.new(
            _node({'project_id': 'victim'}, lessee='p2'),
            _CONTAINER)['project_id'])
        # No instance: instance_info/project_id decides nothing.
        self.assertEqual('o', run_report.new(
            _node({'project_id': 'victim'}, owner='o', instance=None),
            _CONTAINER)['project_id'])
        # Without any, nobody: the operator's.
        self.assertIsNone(run_report.new(
            _node({'project_id': 'victim'}, instance=None),
            _CONTAINER)['project_id'])
        self.assertIsNone(run_report.new(_node(), _CONTAINER)['project_id'])

    def test_the_owner_lists_its_lessees_runs(self):
        leased = run_report.new(_node(lessee='p1', owner='o'), _CONTAINER)
        run_report._write(leased)
        own = run_report.new(_node(owner='o', instance=None), _CONTAINER)
        run_report._write(own)
        self.assertEqual([leased['deploy_id']],
                         [r['deploy_id'] for r in run_store.runs('p1')])
        self.assertEqual({leased['deploy_id'], own['deploy_id']},
                         {r['deploy_id'] for r in run_store.runs('o')})

    def test_written_reports_are_found_by_project_and_id(self):
        mine = run_report.new(_node({'project_id': 'p1'}), _CONTAINER)
        run_report._write(mine)
        theirs = run_report.new(_node({'project_id': 'p2'}), _CONTAINER)
        run_report._write(theirs)
        operators = run_report.new(_node(), _CONTAINER)
        run_report._write(operators)
        self.assertEqual([mine['deploy_id']],
                         [r['deploy_id'] for r in run_store.runs('p1')])
        self.assertEqual([], run_store.runs('p3'))
        self.assertEqual(3, len(run_store.runs()))
        self.assertEqual(theirs, run_store.find(theirs['deploy_id']))
        self.assertIsNone(run_store.find(uuidutils.generate_uuid()))
        self.assertIsNone(run_store.find('../../etc/passwd'))

    def test_project_ids_unfit_for_a_file_name_are_not_indexed(self):
        report = run_report.new(_node({'project_id': '../x'}), _CONTAINER)
        run_report._write(report)
        self.assertFalse(os.path.exists(os.path.join(
            CONF.container.report_dir, '.projects', '..', 'x')))
        self.assertEqual([], run_store.runs('../x'))

    def test_instance_and_limit(self):
        ids = []
        for _ in range(3):
            report = run_report.new(_node({'project_id': 'p1'}), _CONTAINER)
            run_report._write(report)
            ids.append(report['deploy_id'])
        self.assertEqual(2, len(run_store.runs('p1', limit=2)))
        self.assertEqual(3, len(run_store.runs(
            'p1', instance_uuid='3c3c3c3c-0000-4000-8000-000000000001')))
        self.assertEqual([], run_store.runs('p1', instance_uuid='other'))

    def test_prune_removes_index_and_power_series(self):
        now = time.time()
        old = run_report.new(_node({'project_id': 'p1'}), _CONTAINER)
        run_report._write(old)
        run_store.save_power_series(NODE, old['deploy_id'], {'points': []})
        newest = run_report.new(_node({'project_id': 'p1'}), _CONTAINER)
        run_report._write(newest)
        base_path = os.path.join(CONF.container.report_dir, NODE,
                                 old['deploy_id'])
        os.utime(base_path + '.json', (now - 40 * 86400,) * 2)
        self.assertEqual(1, run_files.prune(30, now=now))
        self.assertEqual([newest['deploy_id']],
                         [r['deploy_id'] for r in run_store.runs('p1')])
        self.assertFalse(os.path.exists(base_path + run_store.POWER_SUFFIX))
        self.assertIsNone(run_store.power_series(NODE, old['deploy_id']))


class PowerSeriesTestCase(base.TestCase):

    def _clear_attrs(self):
        pass

    def _samples(self, count):
        return sampler.Samples(
            period_s=1.0, samples=[(1000.0 + i, 100.0 + i % 2 * 10)
                                   for i in range(count)],
            marks={'workload_start': 1002.0})

    def test_kept_as_is_below_the_bound(self):
        curve = energy.series(self._samples(5), max_points=10)
        self.assertEqual(1000.0, curve['t0'])
        self.assertEqual([[0.0, 100.0], [1.0, 110.0], [2.0, 100.0],
                          [3.0, 110.0], [4.0, 100.0]], curve['points'])
        self.assertEqual([2.0, None], curve['workload'])
        self.assertEqual(1, curve['averaged'])

    def test_averaged_down_to_the_bound_keeping_the_area(self):
        samples = self._samples(1000)
        curve = energy.series(samples, 1100.0, 1900.0, max_points=100)
        self.assertEqual(100, len(curve['points']))
        self.assertEqual(10, curve['averaged'])
        self.assertEqual([100.0, 900.0], curve['workload'])
        mean = sum(p[1] for p in curve['points']) / 100
        self.assertAlmostEqual(105.0, mean, places=3)

    def test_no_samples_no_curve(self):
        self.assertIsNone(energy.series(sampler.Samples()))

    @mock.patch.object(sampler, 'stop', autospec=True)
    def test_finish_keeps_the_curve_beside_the_report(self, mock_stop):
        self.config_temp_dir('report_dir', group='container')
        self.config(power_series_points=10, group='container')
        mock_stop.return_value = self._samples(40)
        node = _node()
        section = drivers_energy.finish(node, 1002.0, 1030.0,
                                        deploy_id='d-1')
        self.assertEqual(10, section['power_series_points'])
        curve = run_store.power_series(NODE, 'd-1')
        self.assertEqual(10, len(curve['points']))
        self.assertEqual([2.0, 30.0], curve['workload'])
