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


"""dm-verity on the conductor side: the tree published beside the
artifact, the root hash in the staging step's arguments, and a run whose
root had a corrupted block ending failed."""

import dataclasses
import os
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager
from ironic.conf import CONF
from ironic.drivers.modules import agent_base
from ironic import objects

from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import rootfs_build
from ironic_bmc.drivers import run_close
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

ROOT_HASH = 'e' * 64


def add_verity(test):
    """Give ``test.artifact`` a hash tree."""
    tree = test.artifact.path + '.verity'
    with open(tree, 'wb') as f:
        f.write(b'hash tree')
    test.artifact = dataclasses.replace(
        test.artifact, verity={'root_hash': ROOT_HASH, 'size': 9},
        verity_path=tree)


def record_build(test, rootfs_mode='ramfs', **info):
    """The node waits for its build, which then ends with
    ``test.artifact``; return the node as the build left it."""
    node = test.node
    node.provision_state = states.DEPLOYWAIT
    node.set_driver_internal_info('bmc_deploy', dict(
        info, deploy_id='d1', stage_args={'rootfs': rootfs_mode},
        build={'state': rootfs_build.BUILDING}))
    node.set_driver_internal_info(
        run_report.INTERNAL_KEY, {'stages': [], 'node': node.uuid,
                                  'deploy_id': 'd1'})
    node.save()
    rootfs_build.record(test.context, node.uuid, 'd1', 1.0, test.artifact,
                        {'command': ['/x']}, None)
    return objects.Node.get_by_uuid(test.context, node.uuid)


class VerityTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        add_verity(self)

    def test_only_block_formats_get_a_tree(self):
        self.assertTrue(rootfs.with_verity('erofs'))
        self.assertTrue(rootfs.with_verity('squashfs'))
        self.assertFalse(rootfs.with_verity('tar'))
        self.assertFalse(rootfs.with_verity('tree'))
        self.config(rootfs_verity=False, group='container')
        self.assertFalse(rootfs.with_verity('erofs'))

    def _record_build(self):
        return record_build(self)

    def test_tree_published_beside_the_artifact(self):
        node = self._record_build()
        info = node.driver_internal_info['bmc_deploy']
        self.assertEqual({'root_hash': ROOT_HASH, 'size': 9},
                         info['stage_args']['verity'])
        url = info['artifact_token_url']
        rel = url[len(CONF.deploy.http_url) + 1:]
        published = os.path.join(CONF.deploy.http_root, rel)
        with open(published + boot_files.VERITY_SUFFIX, 'rb') as f:
            self.assertEqual(b'hash tree', f.read())
        # Hard links: the cache keeps both while they are published.
        self.assertEqual(os.stat(self.artifact.verity_path).st_ino,
                         os.stat(published + '.verity').st_ino)

    @mock.patch.object(agent_base, 'execute_step', autospec=True)
    def test_stage_step_gets_the_tree_url_and_root_hash(self, mock_execute):
        mock_execute.return_value = states.DEPLOYWAIT
        node = self._record_build()
        node.deploy_step = {'interface': 'deploy', 'priority': 80,
                            'step': 'bmc_stage_rootfs', 'args': {}}
        info = node.driver_internal_info['bmc_deploy']
        info['powered_on'] = 1.0
        node.set_driver_internal_info('bmc_deploy', info)
        node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.bmc_stage_rootfs(task)
        args = mock_execute.call_args[0][1]['args']
        self.assertEqual(args['url'] + '.verity', args['verity']['url'])
        self.assertEqual(ROOT_HASH, args['verity']['root_hash'])
        # The URL is given to the agent, never stored with the step args.
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertNotIn('url', node.driver_internal_info['bmc_deploy'][
            'stage_args']['verity'])

    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_corrupted_block_fails_the_run(self, mock_power):
        self.node.provision_state = states.ACTIVE
        self.node.target_provision_state = None
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, {
            'stages': [], 'node': self.node.uuid, 'deploy_id': 'x',
            'mode': 'job', 'state': 'running'})
        self.node.save()
        why = ('integrity: dm-verity found a corrupted block of the rootfs '
               'artifact')

        def power_off(task, state):
            # As Ironic's power action: a success clears last_error.
            task.node.power_state = state
            task.node.last_error = None
        mock_power.side_effect = power_off
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, {'state': 'exited', 'exit_code': 1,
                                         'output_tail': 'I/O error\n',
                                         'integrity': why})
            mock_power.assert_called_once_with(task, states.POWER_OFF)
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        report = run_report.load(node.uuid)
        self.assertEqual('failed', report['state'])
        self.assertIn(why, report['error'])
        self.assertIn(why, node.last_error)
        self.assertEqual(1, report['workload_exit_code'])
