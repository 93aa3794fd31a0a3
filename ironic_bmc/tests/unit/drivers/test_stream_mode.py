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


"""The stream rootfs mode on the conductor: validate, the step's stream
arguments, the URL kept published, and the report's stream section."""

import dataclasses
from unittest import mock

from ironic.common import exception
from ironic.common import states
from ironic.conductor import task_manager
from ironic.drivers.modules import agent_base
from ironic import objects

from ironic_bmc import deploy_info
from ironic_bmc import stream_cache
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import step_hooks
from ironic_bmc.drivers import workload_watch
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base
from ironic_bmc.tests.unit.drivers import test_verity_deploy

MiB = 1024 * 1024


class StreamTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.node.instance_info = dict(self.node.instance_info,
                                       container_rootfs='stream')
        self.node.save()
        test_verity_deploy.add_verity(self)
        self.artifact = dataclasses.replace(self.artifact, size=3000 * MiB)

    def _validate(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            # The boot interface's own checks (ports, boot files) are not
            # this mode's business.
            with mock.patch.object(task.driver.boot, 'validate',
                                   autospec=True), \
                    mock.patch.object(boot_files, 'validate', autospec=True):
                task.driver.deploy.validate(task)

    def _record_build(self, stream_cache=None):
        return test_verity_deploy.record_build(self, 'stream',
                                               stream_cache=stream_cache)


class ValidateTestCase(StreamTestCase):

    def test_accepted_with_verity(self):
        self._validate()

    def test_refused_without_verity(self):
        for opts in ({'rootfs_verity': False}, {'rootfs_format': 'tar'}):
            self.config(group='container', **opts)
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    self._validate)
            self.assertIn('instance_info/container_rootfs: "stream" checks '
                          'every block with dm-verity', str(exc))
            self.assertIn('[container]rootfs_verity', str(exc))
            self.config(rootfs_verity=True, rootfs_format='erofs',
                        group='container')

    def test_cache_larger_than_ram_refused(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       container_stream_cache='4G')
        self.node.save()
        exc = self.assertRaises(exception.InvalidParameterValue,
                                self._validate)
        self.assertIn('instance_info/container_stream_cache: 4G (4096 MiB) '
                      'is more than the RAM of node', str(exc))

    def test_cache_not_a_size_refused(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       container_stream_cache='half')
        self.node.save()
        exc = self.assertRaises(exception.InvalidParameterValue,
                                self._validate)
        self.assertIn('instance_info/container_stream_cache must be a size',
                      str(exc))

    def test_ram_does_not_bound_the_image(self):
        self.assertEqual((16384 * MiB, '[container]max_image_size_mb'),
                         rootfs.size_limit(self.node, 'stream'))
        self.assertEqual(1024 * MiB, rootfs.size_limit(self.node,
                                                       'ramfs')[0])


class StageArgsTestCase(StreamTestCase):

    def test_default_cache_is_what_ramfs_may_hold(self):
        # 3000 MiB image, 2048 MiB node, half of it for the root.
        node = self._record_build()
        self.assertEqual({'cache_max': 1024 * MiB, 'rate': 64 * MiB},
                         node.driver_internal_info['bmc_deploy'][
                             'stage_args']['stream'])

    def test_an_image_that_fits_is_cached_whole(self):
        self.artifact = dataclasses.replace(self.artifact, size=100 * MiB)
        self.config(stream_background_rate_mb=8, group='container')
        node = self._record_build()
        self.assertEqual({'cache_max': None, 'rate': 8 * MiB},
                         node.driver_internal_info['bmc_deploy'][
                             'stage_args']['stream'])

    def test_the_deploy_bound_wins(self):
        node = self._record_build(stream_cache=200 * MiB)
        self.assertEqual(200 * MiB, node.driver_internal_info['bmc_deploy'][
            'stage_args']['stream']['cache_max'])

    def test_deploy_records_the_bound(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       container_stream_cache='25%')
        container = deploy_info.parse(self.node)
        self.assertEqual(512 * MiB,
                         stream_cache.for_container(self.node, container))
        container.rootfs = 'ramfs'
        self.assertIsNone(stream_cache.for_container(self.node,
                                                         container))

    @mock.patch.object(boot_files, 'unpublish_artifact', autospec=True)
    @mock.patch.object(agent_base, 'execute_step', autospec=True)
    def test_url_stays_published_while_the_workload_runs(
            self, mock_execute, mock_unpublish):
        mock_execute.return_value = None
        node = self._record_build()
        node.deploy_step = {'interface': 'deploy', 'priority': 70,
                            'step': 'bmc_start_workload', 'args': {}}
        node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.bmc_start_workload(task)
        mock_unpublish.assert_not_called()
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertIn('artifact_token_url',
                      node.driver_internal_info['bmc_deploy'])


@mock.patch.object(workload_watch, '_status', autospec=True)
class ReportTestCase(StreamTestCase):

    def setUp(self):
        super().setUp()
        report = run_report.new(self.node, deploy_info.parse(self.node))
        report['state'] = 'running'
        report['stages'] = [{'name': 'workload-started', 'start': 99.0,
                             'end': 100.0}]
        self.node.provision_state = states.ACTIVE
        self.node.target_provision_state = None
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            step_hooks.after_stage_rootfs(task, {'command_result': {
                'deploy_result': {
                    'rootfs': 'stream', 'verify': 'dm-verity',
                    'bytes': 5 * MiB,
                    'stream': {'device': '/dev/nbd0', 'cache_max': None,
                               'background_rate': 64 * MiB,
                               'fully_local': False}}}})
            task.node.save()    # as Ironic does when the deploy resumes

    def _poll(self):
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            workload_watch.check(task)
        return run_report.get(objects.Node.get_by_uuid(self.context,
                                                       self.node.uuid))

    def _status(self, state='running', **progress):
        stream = {'bytes': 10 * MiB, 'size': 3000 * MiB, 'started': 101.0,
                  'fully_local_at': None, 'cached_bytes': 12 * MiB,
                  'yielded_s': 0.5, 'error': None}
        stream.update(progress)
        return {'state': state, 'exit_code': 0, 'output_tail': 'ok\n',
                'stream': stream}

    def test_staging_starts_the_section(self, mock_status):
        report = run_report.get(objects.Node.get_by_uuid(self.context,
                                                         self.node.uuid))
        self.assertEqual(5 * MiB, report['staging']['bytes_before_start'])
        self.assertEqual({'cache_max': None, 'background_rate': 64 * MiB,
                          'fully_local': False,
                          'fully_local_after_start_s': None,
                          'background_fetch_s': None,
                          'bytes_fetched': 5 * MiB}, report['stream'])

    def test_progress_alone_is_not_written(self, mock_status):
        mock_status.return_value = self._status()
        with mock.patch.object(objects.Node, 'save',
                               autospec=True) as mock_save:
            self._poll()
        mock_save.assert_not_called()

    def test_fully_local_is_recorded_while_running(self, mock_status):
        mock_status.return_value = self._status(fully_local_at=131.5,
                                                cached_bytes=3001 * MiB,
                                                bytes=3000 * MiB)
        report = self._poll()
        self.assertEqual('running', report['state'])
        stream = report['stream']
        self.assertTrue(stream['fully_local'])
        self.assertEqual(31.5, stream['fully_local_after_start_s'])
        self.assertEqual(30.5, stream['background_fetch_s'])
        self.assertEqual(3001 * MiB, stream['bytes_fetched'])
        self.assertEqual(0.5, stream['background_yielded_s'])

    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_a_short_job_ends_not_local(self, mock_power, mock_status):
        mock_status.return_value = self._status(state='exited')
        report = self._poll()
        self.assertEqual('finished', report['state'])
        self.assertFalse(report['stream']['fully_local'])
        self.assertEqual(12 * MiB, report['stream']['bytes_fetched'])
        self.assertEqual(10 * MiB, report['stream']['background_bytes'])

    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_a_bounded_cache_reports_what_it_holds(self, mock_power,
                                                   mock_status):
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        report = run_report.get(node)
        report['stream']['cache_max'] = 8 * MiB
        node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        node.save()
        mock_status.return_value = self._status(state='exited',
                                                cached_bytes=8 * MiB)
        stream = self._poll()['stream']
        self.assertIsNone(stream['bytes_fetched'])
        self.assertEqual(8 * MiB, stream['bytes_cached'])

    def test_background_error_is_recorded(self, mock_status):
        mock_status.return_value = self._status(
            error='reading /dev/mapper/bmc-rootfs at byte 4096: EIO')
        report = self._poll()
        self.assertIn('EIO', report['stream']['error'])
        self.assertEqual('running', report['state'])
