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

"""A profiling run through the deploy interface (the start step's
argument, the profile brought back before power-off) and the kernel build
vendor methods, on Ironic's DB fixtures."""

import hashlib
import os
from unittest import mock

from ironic.common import exception
from ironic.common import states
from ironic.conductor import task_manager
from ironic.drivers.modules import agent_base

from bmc_common import protocol
from ironic_bmc import deploy_info
from ironic_bmc import deploy_record
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import run_close
from ironic_bmc.kernel import builds
from ironic_bmc.kernel import run_profile
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base
from ironic_bmc.tests.unit.kernel import test_profile


def _profile_reply(data):
    return {'data': protocol.pack(data),
            'sha256': hashlib.sha256(data).hexdigest(), 'files': 1,
            'bytes': 6, 'uname_v': '#gcov-abababababab SMP',
            'machine': {'emulated': True, 'cpu_model': 'QEMU'}}


class ProfilingRunTestCase(base.ContainerDeployTestCase):

    _running = base.WatchTestCase._running

    def test_the_key_is_parsed_for_the_operator_only(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       container_kernel_profile='gcov')
        self.assertEqual('gcov', deploy_info.parse(self.node).kernel_profile)
        self.node.lessee = 'tenant-project'
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'kernel profiling is the operator',
                               deploy_info.parse, self.node)

    @mock.patch.object(agent_base, 'execute_step', autospec=True)
    def test_start_step_asks_the_agent_to_reset_the_counters(self,
                                                             mock_execute):
        mock_execute.return_value = states.DEPLOYWAIT
        self.node.deploy_step = {'interface': 'deploy',
                                 'step': 'bmc_start_workload',
                                 'priority': 70, 'args': {}}
        self.node.set_driver_internal_info(deploy_record.KEY, {
            'stage_args': {'rootfs': 'nfs'}, 'kernel_profile': 'gcov',
            'workload_args': {'command': ['/x']}})
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.bmc_start_workload(task)
        self.assertEqual({'command': ['/x'], 'kernel_profile': 'gcov'},
                         mock_execute.call_args[0][1]['args'])

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_the_profile_is_kept_before_power_off(self, mock_power,
                                                  mock_call):
        self._running('job')
        self.node.set_driver_internal_info(deploy_record.KEY, {
            'kernel_profile': 'gcov'})
        self.node.save()
        data = test_profile.make_tar([(test_profile.PREFIX
                                       + 'kernel/fork.gcda', b'counts')])
        order = []
        mock_power.side_effect = lambda *a: order.append('power')

        def agent(task, step, args=None, timeout=None):
            order.append(step)
            if step == protocol.STEP_COLLECT_OUTPUT:
                return {'output': base._packed(b'ok\n'), 'results': {}}
            self.assertEqual({'max_bytes': 256 * 1024 * 1024}, args)
            return _profile_reply(data)
        mock_call.side_effect = agent
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, {'state': 'exited', 'exit_code': 0,
                                         'output_tail': 'ok\n'})
            report = run_report.get(task.node)
        self.assertEqual(['bmc_collect_output', 'bmc_collect_kernel_profile',
                          'power'], order)
        section = report['kernel_profile']
        self.assertEqual((test_profile.BUILD, 1, True),
                         (section['kernel_build'], section['files'],
                          section['machine']['emulated']))
        self.assertEqual('finished', report['state'])
        with open(run_profile.path(self.node.uuid, 'x'), 'rb') as f:
            self.assertEqual(data, f.read())

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_a_forged_profile_fails_the_run_and_keeps_nothing(
            self, mock_power, mock_call):
        self._running('job')
        self.node.set_driver_internal_info(deploy_record.KEY, {
            'kernel_profile': 'gcov'})
        self.node.save()
        data = test_profile.make_tar([('etc/shadow.gcda', b'x')])

        def agent(task, step, args=None, timeout=None):
            if step == protocol.STEP_COLLECT_OUTPUT:
                return {'output': base._packed(b'ok\n'), 'results': {}}
            return _profile_reply(data)
        mock_call.side_effect = agent
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, {'state': 'exited', 'exit_code': 0,
                                         'output_tail': 'ok\n'})
            report = run_report.get(task.node)
        mock_power.assert_called_once_with(mock.ANY, states.POWER_OFF)
        self.assertEqual('failed', report['state'])
        self.assertIn('The kernel profile of the run on node',
                      report['error'])
        self.assertIn('kernel this service built',
                      report['kernel_profile']['error'])
        self.assertFalse(os.path.exists(run_profile.path(self.node.uuid,
                                                         'x')))

    @mock.patch.object(container_deploy.agent_calls, 'call', autospec=True)
    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_no_profile_leaves_the_run_as_it_is(self, mock_power,
                                                mock_call):
        self._running('job')
        self.node.set_driver_internal_info(deploy_record.KEY, {
            'kernel_profile': 'gcov'})
        self.node.save()

        def agent(task, step, args=None, timeout=None):
            if step == protocol.STEP_COLLECT_OUTPUT:
                return {'output': base._packed(b'ok\n'), 'results': {}}
            raise exception.IronicException(
                'bmc_collect_kernel_profile: /sys/kernel/debug/gcov is '
                'missing')
        mock_call.side_effect = agent
        with task_manager.acquire(self.context, self.node.uuid) as task:
            run_close.record_exit(task, {'state': 'exited', 'exit_code': 0,
                                         'output_tail': 'ok\n'})
            report = run_report.get(task.node)
        self.assertEqual('finished', report['state'])
        self.assertIn('not collected: bmc_collect_kernel_profile',
                      report['kernel_profile']['error'])


class KernelBuildVendorTestCase(base.ContainerDeployTestCase):

    def _call(self, method, **kwargs):
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            task.driver.vendor.validate(task, method=method, **kwargs)
            return getattr(task.driver.vendor, method)(task, **kwargs)

    @mock.patch.object(builds, 'start', autospec=True)
    @mock.patch.object(builds, 'plan', autospec=True)
    def test_kernel_build_plans_and_starts(self, mock_plan, mock_start):
        mock_plan.return_value = {'build_id': 'b'}
        mock_start.return_value = {'build_id': 'b', 'state': 'queued'}
        self.assertEqual({'build_id': 'b', 'state': 'queued'},
                         self._call('kernel_build', variant='gcov',
                                    http_method='POST'))
        mock_plan.assert_called_once_with('gcov', source=None,
                                          config='bmc-node', profile=None)

    @mock.patch.object(builds, 'start', autospec=True)
    @mock.patch.object(builds, 'plan', autospec=True)
    @mock.patch.object(run_profile, 'for_build', autospec=True)
    def test_pgo_takes_the_profile_of_this_nodes_run(self, mock_for,
                                                     mock_plan, mock_start):
        run = '5d6b0a52-8a8e-4c4b-9a44-1cf1a2c1f0a1'
        mock_for.return_value = {'path': 'p', 'build': 'g'}
        self._call('kernel_build', variant='pgo', profile_run=run)
        mock_for.assert_called_once_with(self.node.uuid, run)
        mock_plan.assert_called_once_with('pgo', source=None,
                                          config='bmc-node',
                                          profile={'path': 'p',
                                                   'build': 'g'})
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'a pgo build uses the source and config of '
                               'the gcov build', self._call, 'kernel_build',
                               variant='pgo', profile_run=run,
                               config='mine')

    def test_refusals_name_the_argument(self):
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'profile_run must be the UUID of a deploy',
                               self._call, 'kernel_build', variant='pgo',
                               profile_run='../../etc')
        self.assertRaisesRegex(exception.MissingParameterValue,
                               'kernel_build_status needs build_id',
                               self._call, 'kernel_build_status')
        self.assertRaisesRegex(exception.NotFound,
                               'Kernel build 0123 is not on the conductor',
                               self._call, 'kernel_build_status',
                               build_id='0123')
