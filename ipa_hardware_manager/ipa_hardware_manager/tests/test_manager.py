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
import os
import shutil
import tempfile
import unittest
from unittest import mock

from ironic_python_agent import errors, hardware

from ipa_hardware_manager import manager, rootfs, steps_tunables, workload
from ipa_hardware_manager import rootfs_verity
from ipa_hardware_manager import tunables
from bmc_common import protocol

DIGEST = 'sha256:' + 'a' * 64
NODE = {'uuid': 'node-1', 'instance_info': {}}


class StepsTest(unittest.TestCase):
    def setUp(self):
        self.hwm = manager.BmcContainerHardwareManager()

    def test_support(self):
        self.assertEqual(hardware.HardwareSupport.SERVICE_PROVIDER,
                         self.hwm.evaluate_hardware_support())

    def test_name_differs_from_ipa_container_manager(self):
        # IPA 13 ships ironic_python_agent.hardware_managers.container.
        # ContainerHardwareManager; IPA keys step lists by class name.
        self.assertNotEqual('ContainerHardwareManager',
                            manager.BmcContainerHardwareManager.__name__)
        self.assertEqual('BmcContainerHardwareManager',
                         self.hwm.get_version()['name'])
        self.assertIs(manager.ContainerHardwareManager,
                      manager.BmcContainerHardwareManager)

    def test_deploy_steps(self):
        steps = self.hwm.get_deploy_steps(NODE, [])
        self.assertEqual([protocol.STEP_STAGE_ROOTFS,
                          protocol.STEP_START_WORKLOAD,
                          protocol.STEP_WORKLOAD_STATUS,
                          protocol.STEP_STOP_WORKLOAD,
                          protocol.STEP_COLLECT_OUTPUT,
                          protocol.STEP_COLLECT_KERNEL_PROFILE,
                          protocol.STEP_QUIET_AGENT,
                          protocol.STEP_KEXEC_LOAD,
                          protocol.STEP_KEXEC_EXEC,
                          protocol.STEP_APPLY_TUNABLES,
                          protocol.STEP_NOISE_PROBE],
                         [s['step'] for s in steps])
        for step in steps:
            self.assertEqual(0, step['priority'])
            self.assertEqual('deploy', step['interface'])
            self.assertTrue(callable(getattr(self.hwm, step['step'])))
        by_name = {s['step']: s for s in steps}
        required = {k for k, v in by_name[protocol.STEP_STAGE_ROOTFS][
            'argsinfo'].items() if v['required']}
        self.assertEqual({'digest', 'format'}, required)
        self.assertEqual({'command', 'env', 'workdir', 'user', 'mode',
                          'stop_signal', 'walltime', 'privileged',
                          'rlimits', 'stop_grace', 'output_max',
                          'configdrive', 'kernel_profile', 'group'},
                         set(by_name[protocol.STEP_START_WORKLOAD][
                             'argsinfo']))
        self.assertEqual({'grace', 'reason'},
                         set(by_name[protocol.STEP_STOP_WORKLOAD][
                             'argsinfo']))
        self.assertNotIn('argsinfo', by_name[protocol.STEP_WORKLOAD_STATUS])

    def test_service_steps_same(self):
        self.assertEqual(self.hwm.get_deploy_steps(NODE, []),
                         self.hwm.get_service_steps(NODE, []))

    def test_inventory_falls_through(self):
        # We implement no inventory: IPA must go on to the generic manager.
        self.assertRaises(errors.IncompatibleHardwareMethodError,
                          self.hwm.get_cpus)
        self.assertRaises(errors.IncompatibleHardwareMethodError,
                          self.hwm.list_hardware_info)


class StageRootfsStepTest(unittest.TestCase):
    def setUp(self):
        self.hwm = manager.BmcContainerHardwareManager()
        self.hwm._supervisor = mock.create_autospec(
            workload.Supervisor, instance=True)
        self.hwm._supervisor.status.return_value = {'state': 'absent'}

    @mock.patch.object(rootfs, 'load', autospec=True, return_value=None)
    @mock.patch.object(rootfs.Staging, 'stage', autospec=True)
    def test_args_map_to_staging(self, mock_stage, mock_load):
        mock_stage.return_value = {'root': '/var/lib/bmc/root',
                                   'stages': []}
        # As IPA calls it: node, ports, then the step args as kwargs.
        result = self.hwm.bmc_stage_rootfs(
            NODE, [], url='http://h/a.erofs', digest=DIGEST,
            format='erofs', size=123, rootfs='ramfs')
        self.assertEqual('/var/lib/bmc/root', result['root'])
        mock_stage.assert_called_once_with(
            mock.ANY, 'http://h/a.erofs', DIGEST, 'erofs', 123, 'ramfs',
            None, None, None)

    @mock.patch.object(rootfs, 'teardown', autospec=True)
    @mock.patch.object(rootfs, 'load', autospec=True)
    @mock.patch.object(rootfs.Staging, 'stage', autospec=True)
    def test_replaces_previous(self, mock_stage, mock_load, mock_teardown):
        mock_load.return_value = {'digest': 'sha256:' + 'b' * 64}
        self.hwm.bmc_stage_rootfs(NODE, [], url='http://h/a', digest=DIGEST,
                                  format='tar')
        mock_teardown.assert_called_once_with()
        mock_stage.assert_called_once_with(mock.ANY, 'http://h/a', DIGEST,
                                           'tar', None, 'ramfs', None,
                                           None, None)

    @mock.patch.object(rootfs.Staging, 'stage', autospec=True)
    def test_bad_format_is_deployment_error(self, mock_stage):
        with self.assertRaisesRegex(errors.DeploymentError,
                                    'bmc_stage_rootfs: unknown artifact '
                                    'format .ext4'):
            self.hwm.bmc_stage_rootfs(NODE, [], url='http://h/a',
                                      digest=DIGEST, format='ext4')
        mock_stage.assert_not_called()

    def test_missing_args(self):
        self.assertRaises(errors.DeploymentError, self.hwm.bmc_stage_rootfs,
                          NODE, [])

    @mock.patch.object(rootfs.Staging, 'stage', autospec=True)
    def test_refused_while_running(self, mock_stage):
        self.hwm._supervisor.status.return_value = {'state': 'running'}
        self.assertRaisesRegex(errors.DeploymentError, 'workload is running',
                               self.hwm.bmc_stage_rootfs, NODE, [],
                               url='http://h/a', digest=DIGEST,
                               format='erofs')
        mock_stage.assert_not_called()

    @mock.patch.object(rootfs, 'load', autospec=True, return_value=None)
    @mock.patch.object(rootfs.Staging, 'stage', autospec=True)
    def test_staging_error_is_deployment_error(self, mock_stage, mock_load):
        mock_stage.side_effect = rootfs.StagingError('download failed')
        self.assertRaisesRegex(errors.DeploymentError,
                               'bmc_stage_rootfs: download failed',
                               self.hwm.bmc_stage_rootfs, NODE, [],
                               url='http://h/a', digest=DIGEST,
                               format='erofs')


class WorkloadStepsTest(unittest.TestCase):
    def setUp(self):
        self.hwm = manager.BmcContainerHardwareManager()
        self.sup = self.hwm._supervisor = mock.create_autospec(
            workload.Supervisor, instance=True)

    @mock.patch.object(rootfs, 'load', autospec=True)
    def test_start(self, mock_load):
        mock_load.return_value = {'root': '/var/lib/bmc/root'}
        self.sup.start.return_value = {'pid': 42, 'started': 1.0}
        result = self.hwm.bmc_start_workload(
            NODE, [], command=['redis-server'], env={'A': 'b'},
            workdir='/data', user='redis', mode='service',
            stop_signal='SIGINT', walltime=60, privileged=False,
            rlimits={'nofile': 10}, stop_grace=3, output_max=140000)
        self.assertEqual({'pid': 42, 'started': 1.0}, result)
        self.sup.start.assert_called_once_with(
            '/var/lib/bmc/root', ['redis-server'], env={'A': 'b'},
            workdir='/data', user='redis', mode='service',
            stop_signal='SIGINT', walltime=60, privileged=False,
            rlimits={'nofile': 10}, stop_grace=3, output_max=140000,
            mounts=[])

    @mock.patch.object(workload, 'pid_alive', autospec=True,
                       return_value=True)
    @mock.patch.object(steps_tunables.nodeos, 'read_back', autospec=True)
    @mock.patch.object(rootfs, 'load', autospec=True)
    def test_start_reads_the_partitions_back(self, mock_load, mock_back,
                                             mock_alive):
        mock_load.return_value = {'root': '/r'}
        self.sup.start.return_value = {'pid': 42, 'container_pid': 43,
                                       'started': 1.0}
        mock_back.return_value = {'workload_cpus': {'ok': True}}
        with tempfile.TemporaryDirectory() as state:
            with open(os.path.join(state, tunables.STATE_FILE), 'w') as f:
                json.dump({'housekeeping_cpus': [0],
                           'workload_cpus': [1, 2]}, f)
            with mock.patch.object(tunables, 'STATE_DIR', state):
                result = self.hwm.bmc_start_workload(NODE, [],
                                                     command=['true'])
        self.assertEqual({'workload_cpus': {'ok': True}},
                         result['partitions'])
        self.assertEqual(({0}, {1, 2}, 43), mock_back.call_args[0][1:])
        mock_alive.assert_called_once_with(43)

    @mock.patch.object(workload, 'pid_alive', autospec=True,
                       return_value=False)
    @mock.patch.object(steps_tunables.nodeos, 'read_back', autospec=True)
    def test_a_job_that_ended_before_the_read_back(self, mock_back,
                                                   mock_alive):
        # The runtime removed the workload's cgroup as the job ended.
        mock_back.return_value = {'workload_cpus': {
            'ok': False, 'error': 'cannot read the workload cgroup: '
                                  '[Errno 2] No such file or directory'}}
        with tempfile.TemporaryDirectory() as state:
            with open(os.path.join(state, tunables.STATE_FILE), 'w') as f:
                json.dump({'housekeeping_cpus': [0],
                           'workload_cpus': [1]}, f)
            back = steps_tunables.partitions_at_start(43, state_dir=state)
        self.assertEqual(['ended'], list(back))
        self.assertIn('ended before its partitions', back['ended'])
        mock_alive.assert_called_once_with(43)

    @mock.patch.object(workload, 'pid_alive', autospec=True,
                       return_value=True)
    @mock.patch.object(steps_tunables.nodeos, 'read_back', autospec=True,
                       side_effect=RuntimeError('boom'))
    def test_partitions_read_back_never_fails_the_start(self, mock_back,
                                                        mock_alive):
        with tempfile.TemporaryDirectory() as state:
            with open(os.path.join(state, tunables.STATE_FILE), 'w') as f:
                json.dump({'housekeeping_cpus': [0],
                           'workload_cpus': [1]}, f)
            self.assertEqual(
                {'error': 'cannot read the partitions back: boom'},
                steps_tunables.partitions_at_start(43, state_dir=state))
            self.assertIsNone(steps_tunables.partitions_at_start(
                None, state_dir=state))

    @mock.patch.object(rootfs, 'load', autospec=True, return_value=None)
    def test_start_without_rootfs(self, mock_load):
        self.assertRaisesRegex(errors.DeploymentError,
                               'no rootfs staged: run bmc_stage_rootfs',
                               self.hwm.bmc_start_workload, NODE, [],
                               command=['true'])
        self.sup.start.assert_not_called()

    @mock.patch.object(rootfs_verity, 'integrity_problem', autospec=True,
                       return_value=None)
    @mock.patch.object(rootfs, 'load', autospec=True)
    def test_start_error(self, mock_load, mock_problem):
        mock_load.return_value = {'root': '/r'}
        self.sup.start.side_effect = workload.WorkloadError('bad user')
        self.assertRaisesRegex(errors.DeploymentError,
                               'bmc_start_workload: bad user',
                               self.hwm.bmc_start_workload, NODE, [],
                               command=['true'])

    @mock.patch.object(rootfs_verity, 'integrity_problem', autospec=True,
                       return_value='integrity: corrupted block')
    def test_start_error_names_a_corrupted_root(self, mock_problem):
        with mock.patch.object(rootfs, 'load', autospec=True,
                               return_value={'root': '/r'}):
            self.sup.start.side_effect = workload.WorkloadError(
                'cannot exec /bin/sh: Input/output error')
            self.assertRaisesRegex(
                errors.DeploymentError,
                'Input/output error; integrity: corrupted block',
                self.hwm.bmc_start_workload, NODE, [], command=['true'])

    @mock.patch.object(rootfs_verity, 'integrity_problem', autospec=True,
                       return_value=None)
    def test_status(self, mock_problem):
        self.sup.status.return_value = {'state': 'absent'}
        self.assertEqual({'state': 'absent'},
                         self.hwm.bmc_workload_status(NODE, []))
        # A clean exit is not looked into.
        self.sup.status.return_value = {'state': 'exited', 'exit_code': 0}
        self.assertNotIn('integrity', self.hwm.bmc_workload_status(NODE, []))
        mock_problem.assert_not_called()

    @mock.patch.object(rootfs_verity, 'integrity_problem', autospec=True,
                       return_value='integrity: corrupted block')
    def test_status_of_a_failure_on_a_corrupted_root(self, mock_problem):
        self.sup.status.return_value = {'state': 'exited', 'exit_code': 1}
        self.assertEqual('integrity: corrupted block',
                         self.hwm.bmc_workload_status(NODE, [])['integrity'])

    def test_stop(self):
        self.sup.stop.return_value = {'state': 'exited'}
        self.assertEqual({'state': 'exited'},
                         self.hwm.bmc_stop_workload(NODE, [], grace=3))
        self.sup.stop.assert_called_once_with(3, reason='request')

    @mock.patch.object(rootfs, 'load', autospec=True)
    def test_collect_output_and_results(self, mock_load):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        os.makedirs(os.path.join(tmp, 'root', 'out'))
        with open(os.path.join(tmp, 'root', 'out', 'r.txt'), 'wb') as f:
            f.write(b'42\n')
        with open(os.path.join(tmp, 'output.log'), 'wb') as f:
            f.write(b'all of it\n')
        mock_load.return_value = {'root': os.path.join(tmp, 'root')}
        self.sup.status.return_value = {'state': 'exited'}
        self.sup.state_dir = tmp
        result = self.hwm.bmc_collect_output(
            NODE, [], results=['/out/r.txt', '/out/none'], max_bytes=100)
        self.assertEqual(b'all of it\n', protocol.unpack(
            result['output']['data']))
        self.assertEqual(b'42\n', protocol.unpack(
            result['results']['/out/r.txt']['data']))
        self.assertIn('no such file', result['results']['/out/none']['error'])

    def test_collect_refused_while_running(self):
        self.sup.status.return_value = {'state': 'running'}
        self.assertRaisesRegex(errors.DeploymentError,
                               'the workload is running',
                               self.hwm.bmc_collect_output, NODE, [])

    def test_collect_bad_results(self):
        self.sup.status.return_value = {'state': 'exited'}
        self.assertRaisesRegex(errors.DeploymentError,
                               'results must be a list of absolute paths',
                               self.hwm.bmc_collect_output, NODE, [],
                               results=['out/r.txt'])

    def test_stop_at_undeploy(self):
        self.sup.stop.return_value = {'state': 'exited'}
        self.hwm.bmc_stop_workload(NODE, [], grace=3, reason='undeploy')
        self.sup.stop.assert_called_once_with(3, reason='undeploy')

    def test_stop_unknown_reason(self):
        self.assertRaisesRegex(errors.DeploymentError,
                               "unknown reason 'bored'",
                               self.hwm.bmc_stop_workload, NODE, [],
                               reason='bored')
        self.sup.stop.assert_not_called()


class DispatchTest(unittest.TestCase):
    """The steps as IPA's deploy extension dispatches them."""

    def test_dispatch_to_managers(self):
        hwm = manager.BmcContainerHardwareManager()
        hwm._supervisor = mock.create_autospec(
            workload.Supervisor, instance=True)
        hwm._supervisor.status.return_value = {'state': 'absent',
                                               'exit_code': None}
        generic = hardware.GenericHardwareManager()
        with mock.patch.object(hardware, 'get_managers', autospec=True,
                               return_value=[hwm, generic]):
            self.assertEqual({'state': 'absent', 'exit_code': None},
                             hardware.dispatch_to_managers(
                                 protocol.STEP_WORKLOAD_STATUS, NODE, []))


class TunablesStepsTest(unittest.TestCase):
    def setUp(self):
        self.hwm = manager.BmcContainerHardwareManager()

    @mock.patch.object(steps_tunables, 'bmc_apply_tunables', autospec=True)
    def test_apply_tunables(self, mock_apply):
        result = self.hwm.bmc_apply_tunables(NODE, [], tunables={'thp': 'x'},
                                             strict=True)
        mock_apply.assert_called_once_with(NODE, [], {'thp': 'x'},
                                           strict=True)
        self.assertIs(mock_apply.return_value, result)

    @mock.patch.object(steps_tunables, 'bmc_noise_probe', autospec=True)
    def test_noise_probe(self, mock_probe):
        with mock.patch.object(workload.Supervisor, 'status', autospec=True,
                               return_value={'state': 'exited'}) as status:
            self.hwm.bmc_noise_probe(NODE, [], cpus='1', duration=2)
        status.assert_called_once_with(self.hwm.supervisor)
        mock_probe.assert_called_once_with(NODE, [], cpus='1', duration=2,
                                           threshold_us=None)

    @mock.patch.object(steps_tunables, 'bmc_noise_probe', autospec=True)
    def test_noise_probe_refused_while_running(self, mock_probe):
        with mock.patch.object(workload.Supervisor, 'status', autospec=True,
                               return_value={'state': 'running'}) as status:
            self.assertRaisesRegex(errors.DeploymentError,
                                   'bmc_noise_probe: a workload is running',
                                   self.hwm.bmc_noise_probe, NODE, [])
        status.assert_called_once_with(self.hwm.supervisor)
        mock_probe.assert_not_called()
