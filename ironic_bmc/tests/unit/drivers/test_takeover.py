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

"""A node moving between conductors: take-over and the old side's sweep."""

import os
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager
from ironic.conf import CONF
from ironic.tests.unit.db import utils as db_utils
from ironic.tests.unit.objects import utils as obj_utils
from oslo_utils import uuidutils

from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import energy
from ironic_bmc.drivers import local_state
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import run_close
from ironic_bmc import deploy_info
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

ME, OTHER = 1, 2


class TakeOverTestCase(base.ContainerDeployTestCase):

    def _running(self, state='running'):
        report = run_report.new(self.node, deploy_info.parse(self.node))
        report.update(state=state, stages=[
            {'name': 'power-on', 'start': 1.0, 'end': 2.0},
            {'name': 'workload-started', 'start': 5.0, 'end': 6.0}])
        self.node.provision_state = states.ACTIVE
        self.node.target_provision_state = states.NOSTATE
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.set_driver_internal_info('bmc_deploy', {
            'deploy_id': report['deploy_id'], 'stage_args': {},
            'kernel_args': ['transparent_hugepage=never']})
        self.node.save()

    @mock.patch.object(energy, 'start', autospec=True, return_value=None)
    @mock.patch.object(boot_files, 'prepare', autospec=True)
    def test_running_node_moves_its_boot_files_and_sampling(
            self, mock_boot, mock_energy):
        self._running()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.take_over(task)
            mock_boot.assert_called_once_with(
                task, mock.ANY,
                extra_kernel_args=['transparent_hugepage=never'])
            mock_energy.assert_called_once_with(task.node)
            report = run_report.get(task.node)
        self.assertEqual([CONF.host],
                         [t['conductor'] for t in report['takeovers']])
        # On this conductor's disk too: the report survives the move.
        on_disk = run_report.load(self.node.uuid, report['deploy_id'])
        self.assertEqual(report['takeovers'], on_disk['takeovers'])

    @mock.patch.object(energy, 'start', autospec=True)
    @mock.patch.object(boot_files, 'prepare', autospec=True)
    def test_ended_run_left_alone(self, mock_boot, mock_energy):
        self._running(state='finished')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.take_over(task)
        mock_boot.assert_not_called()
        mock_energy.assert_not_called()

    @mock.patch.object(energy, 'finish', autospec=True)
    def test_energy_after_takeover_says_it_is_partial(self, mock_finish):
        mock_finish.return_value = {'available': True, 'joules': 10.0}
        self._running()
        report = run_report.get(self.node)
        report['takeovers'] = [{'conductor': 'c2', 'time': 3.0}]
        run_close.finish_energy(self.node, report)
        section = run_report.get(self.node)['energy']
        self.assertIs(False, section['complete'])
        self.assertIn('c2', section['note'])


class SweepTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        db_utils.create_test_conductor(id=ME, hostname='this-conductor')
        db_utils.create_test_conductor(id=OTHER, hostname='other-conductor')
        self.cache = rootfs.get_cache()
        self.key = self.cache.make_key('sha256:' + 'c' * 64, 'erofs')
        self.cache.get_or_build(self.key, self._build)

    @staticmethod
    def _build(stage):
        with open(os.path.join(stage, 'artifact'), 'wb') as f:
            f.write(b'x')
        return {}

    def _node(self, affinity, state, referenced=False):
        node = obj_utils.create_test_node(
            self.context, uuid=uuidutils.generate_uuid(),
            driver='fake-hardware', deploy_interface='container',
            boot_interface='ipxe', network_interface='noop',
            provision_state=state, conductor_affinity=affinity)
        self.cache.pin(self.key, node.uuid)
        with task_manager.acquire(self.context, node.uuid) as task:
            boot_files.publish_artifact(task, self.artifact.path, 'erofs')
            if not referenced:
                # What the node's last clean-up (on the conductor that ran
                # it, another HTTP root) left of the reference.
                task.node.del_driver_internal_info(
                    boot_files.ARTIFACT_DIR_KEY)
            task.node.save()
        return node

    def _published(self, node):
        return local_state._published(node.uuid)

    def test_releases_nodes_that_left_this_conductor(self):
        mine = self._node(ME, states.ACTIVE)
        taken = self._node(OTHER, states.ACTIVE)
        undeployed = self._node(ME, states.AVAILABLE)
        deleted = self._node(ME, states.ACTIVE)
        with task_manager.acquire(self.context, deleted.uuid) as task:
            task.node.destroy()

        released = local_state.sweep(self.context, ME)

        self.assertEqual(sorted([taken.uuid, undeployed.uuid,
                                 deleted.uuid]), sorted(released))
        self.assertEqual([mine.uuid], self.cache.pins(self.key))
        self.assertTrue(self._published(mine))
        for node in (taken, undeployed, deleted):
            self.assertEqual([], self._published(node))

    def test_artifact_the_node_references_is_kept(self):
        # Conductors sharing one HTTP root: the other one published it.
        taken = self._node(OTHER, states.ACTIVE, referenced=True)
        self.assertEqual([taken.uuid], local_state.sweep(self.context, ME))
        self.assertEqual([], self.cache.pins(self.key))
        self.assertTrue(self._published(taken))

    def test_another_conductors_node_is_only_read(self):
        # Its current artifact in a shared HTTP root, nothing pinned here:
        # nothing to release, and its deploy keeps its lock.
        taken = self._node(OTHER, states.DEPLOYWAIT, referenced=True)
        self.cache.unpin_all(taken.uuid)
        with mock.patch.object(task_manager.TaskManager, 'upgrade_lock',
                               autospec=True) as upgrade:
            self.assertEqual([], local_state.sweep(self.context, ME))
        upgrade.assert_not_called()
        self.assertTrue(self._published(taken))

    def test_locked_node_is_left_for_the_next_sweep(self):
        taken = self._node(OTHER, states.ACTIVE)
        with task_manager.acquire(self.context, taken.uuid):
            self.config(node_locked_retry_attempts=0, group='conductor')
            self.assertEqual([], local_state.sweep(self.context, ME))
        self.assertEqual([taken.uuid], self.cache.pins(self.key))

    def _running(self, node, rootfs_mode):
        with task_manager.acquire(self.context, node.uuid) as task:
            report = {'deploy_id': uuidutils.generate_uuid(),
                      'node': node.uuid, 'state': 'running',
                      'rootfs': rootfs_mode, 'stages': []}
            task.node.set_driver_internal_info(run_report.INTERNAL_KEY,
                                               report)
            task.node.save()

    def test_running_nfs_root_stays_exported_after_a_take_over(self):
        """A live conductor's node taken over by another: the workload's
        root is this conductor's export, which stays until the run
        ends; the node's BMC is no longer sampled from here."""
        taken = self._node(OTHER, states.ACTIVE)
        self._running(taken, 'nfs')
        energy.sampler.REGISTRY.start(taken.uuid, lambda: 100.0,
                                      period=60)
        local_state.sweep(self.context, ME)
        self.assertEqual([taken.uuid], self.cache.pins(self.key))
        self.assertNotIn(taken.uuid, energy.sampler.REGISTRY.active())
        # The run ended (on the other conductor): released here.
        with task_manager.acquire(self.context, taken.uuid) as task:
            report = run_report.get(task.node)
            report['state'] = 'finished'
            task.node.set_driver_internal_info(run_report.INTERNAL_KEY,
                                               report)
            task.node.save()
        self.assertEqual([taken.uuid], local_state.sweep(self.context, ME))
        self.assertEqual([], self.cache.pins(self.key))

    def test_running_ramfs_root_is_released_after_a_take_over(self):
        taken = self._node(OTHER, states.ACTIVE)
        self._running(taken, 'ramfs')
        self.assertEqual([taken.uuid], local_state.sweep(self.context, ME))
        self.assertEqual([], self.cache.pins(self.key))
