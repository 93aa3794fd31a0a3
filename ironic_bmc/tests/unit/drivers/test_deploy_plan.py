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

"""One deploy, one resolution: Ironic validates a deploy and runs its
first step in one conductor task; the Glance image is read and the
container keys parsed once in it, and each step writes the run report's
file once."""

from unittest import mock

import fixtures
from ironic.common import states
from ironic.conductor import task_manager
from ironic.drivers.modules import deploy_utils

from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import rootfs_build
from ironic_bmc.drivers import step_hooks
from ironic_bmc import deploy_info
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

GLANCE_ID = 'f9a1c3e2-5b7d-4e8a-9c0f-1d2e3f4a5b6c'


@mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                   autospec=True)
@mock.patch.object(boot_files, 'prepare', autospec=True)
@mock.patch.object(boot_files, 'validate', autospec=True)
@mock.patch.object(rootfs, 'resolve', autospec=True)
@mock.patch.object(deploy_utils, 'get_image_properties', autospec=True)
class OnePlanTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MockPatchObject(
            rootfs_build, '_get_executor',
            return_value=base.CapturingExecutor()))
        # The boot interface's own checks (ports, ...): not ours.
        self.useFixture(fixtures.MockPatch(
            'ironic.drivers.modules.pxe_base.PXEBaseMixin.validate',
            autospec=True))
        # As Nova's ironic driver leaves a node: the image's UUID only.
        self.node.instance_info = {'image_source': GLANCE_ID}
        self.node.save()
        self.writes = []
        real_write = run_report._write
        self.useFixture(fixtures.MockPatchObject(
            run_report, '_write', autospec=True,
            side_effect=lambda r: (self.writes.append(r['deploy_id']),
                                   real_write(r))))

    def _validate_and_deploy(self, mock_props, mock_resolve):
        mock_props.return_value = {'container_image': base.IMAGE,
                                   'container_mode': 'job'}
        mock_resolve.return_value = base.resolved()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            # What Ironic's conductor does with one task: validate the
            # deploy interface, then run its first step.
            with mock.patch.object(deploy_info, 'parse', autospec=True,
                                   side_effect=deploy_info.parse) as parse:
                task.driver.deploy.validate(task)
                result = task.driver.deploy.deploy(task)
                # Ironic saves the node as the step returns (waiting, or
                # after the next step).
                task.node.save()
        return result, parse

    def test_glance_read_and_keys_parsed_once_per_task(
            self, mock_props, mock_resolve, mock_validate, mock_prepare,
            mock_power):
        result, parse = self._validate_and_deploy(mock_props, mock_resolve)
        self.assertEqual(states.DEPLOYWAIT, result)
        mock_props.assert_called_once_with(mock.ANY, GLANCE_ID)
        parse.assert_called_once_with(mock.ANY)

    def test_deploy_step_writes_the_report_once(
            self, mock_props, mock_resolve, mock_validate, mock_prepare,
            mock_power):
        self._validate_and_deploy(mock_props, mock_resolve)
        # The step set the kernel, the image digest, the power-on stage
        # and the energy section: one file write for all of them.
        self.assertEqual(1, len(self.writes))
        report = run_report.load(self.node.uuid)
        self.assertEqual('sha256:b', report['image_digest'])
        self.assertEqual(['power-on'],
                         [s['name'] for s in report['stages']])

    def test_a_new_task_reads_glance_again(
            self, mock_props, mock_resolve, mock_validate, mock_prepare,
            mock_power):
        """The memo lives as long as the task: a later request (another
        lock) sees the image as it is then."""
        mock_props.return_value = {'container_image': base.IMAGE}
        for _ in range(2):
            with task_manager.acquire(self.context, self.node.uuid) as task:
                task.driver.deploy.validate(task)
        self.assertEqual(2, mock_props.call_count)


class ReportBatchTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.report = run_report.new(self.node,
                                     deploy_info.parse(self.node))

    def test_written_once_at_the_end_even_on_failure(self):
        with mock.patch.object(run_report, '_write',
                               autospec=True) as mock_write:
            try:
                with run_report.batch(self.node):
                    run_report.update(self.node, self.report, state='x')
                    run_report.add_stage(self.node, self.report,
                                         'power-on', 1.0, 2.0)
                    with run_report.batch(self.node):   # nested
                        run_report.update(self.node, self.report, error='e')
                    mock_write.assert_not_called()
                    raise RuntimeError('the step fails')
            except RuntimeError:
                pass
        mock_write.assert_called_once_with(self.report)
        self.assertEqual(('x', 'e'), (self.report['state'],
                                      self.report['error']))

    def test_every_report_of_the_batch_is_written(self):
        """A deploy ends the previous run's report and starts its own:
        both files are written."""
        older = run_report.new(self.node, deploy_info.parse(self.node))
        with mock.patch.object(run_report, '_write',
                               autospec=True) as mock_write:
            with run_report.batch(self.node):
                run_report.update(self.node, older, state='undeployed')
                run_report.update(self.node, self.report, state='deploying')
        self.assertEqual({older['deploy_id'], self.report['deploy_id']},
                         {c.args[0]['deploy_id']
                          for c in mock_write.call_args_list})

    def test_outside_a_batch_each_change_is_written(self):
        with mock.patch.object(run_report, '_write',
                               autospec=True) as mock_write:
            run_report.update(self.node, self.report, state='x')
            run_report.update(self.node, self.report, state='y')
        self.assertEqual(2, mock_write.call_count)

    def test_each_step_result_writes_once(self):
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY,
                                           self.report)
        self.node.save()
        command = {'command_result': {'deploy_result': {
            'stages': [{'name': 'rootfs-staged', 'start': 1.0,
                        'end': 2.0}],
            'bytes': 4096, 'timings': {'download': 0.5}}}}
        with mock.patch.object(run_report, '_write',
                               autospec=True) as mock_write, \
                mock.patch.object(step_hooks.stream_report, 'start',
                                  autospec=True):
            with task_manager.acquire(self.context,
                                      self.node.uuid) as task:
                step_hooks.after_stage_rootfs(task, command)
        mock_write.assert_called_once_with(mock.ANY)
