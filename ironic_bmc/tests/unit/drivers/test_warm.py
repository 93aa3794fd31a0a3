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

"""Warm deploys: the agent cleaning left up, reused only when safe."""

import datetime
from unittest import mock

import fixtures

from ironic.common import exception
from ironic.common import faults
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conf import CONF
from oslo_utils import timeutils

from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import cleaning
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import kexec_boot
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import warm
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

DEFAULT_BOOT = {'kernel': 'http://h/k', 'ramdisk': 'http://h/r',
                'modules': None, 'kernel_args': []}


def _now():
    return timeutils.utcnow().strftime('%Y-%m-%dT%H:%M:%S.%f')


class WarmBase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.config(fast_track=True, group='deploy')
        self.power = self.useFixture(fixtures.MockPatchObject(
            container_deploy.manager_utils, 'node_power_action',
            autospec=True)).mock
        self.useFixture(fixtures.MockPatchObject(
            boot_files, 'prepare', autospec=True,
            return_value=({'deploy_kernel': ('http://h/k', '/k')},
                          {'pxe_append_params': 'ipa-api-url=x'})))
        # The fake power interface answers what the node records.
        self.node.power_state = states.POWER_ON
        self._agent_up('token-1')

    def _agent_up(self, token, heartbeat=None):
        self.node.set_driver_internal_info('agent_url',
                                           'http://10.0.2.15:9999')
        self.node.set_driver_internal_info('agent_secret_token', token)
        self.node.set_driver_internal_info('agent_last_heartbeat',
                                           heartbeat or _now())
        self.node.save()

    def _cleaned(self, boot=None):
        """Cleaning booted the agent and left it up (fast track)."""
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.node.set_driver_internal_info(warm.KEY, {
                'boot': boot or DEFAULT_BOOT, 'booted_at': 1.0})
            warm.bind(task)
            task.node.save()
        self.node.refresh()

    def _claim(self, wanted=None):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            result = warm.claim(task, wanted or DEFAULT_BOOT)
            task.node.save()
        self.node.refresh()
        return result


class WarmTestCase(WarmBase):

    def test_the_agent_cleaning_left_up_is_claimed_once(self):
        self._cleaned()
        got = self._claim()
        self.assertEqual(warm.WARM, got.mode)
        self.assertIsNone(got.reason)
        self.assertGreater(got.agent_up_for_s, 0)
        # Consumed: the run that follows makes the node cold.
        self.assertEqual(
            warm.Claim(warm.COLD, reason='no agent booted by cleaning'),
            self._claim())

    def test_an_agent_booted_since_is_not_warm(self):
        self._cleaned()
        # A power action and a new lookup: a new token.
        self._agent_up('token-2')
        self.assertEqual(
            warm.Claim(warm.COLD,
                       reason='the agent was booted again since cleaning'),
            self._claim())

    def test_without_fast_track_nothing_is_warm(self):
        self._cleaned()
        self.config(fast_track=False, group='deploy')
        self.assertEqual(warm.Claim(warm.COLD, reason='fast track is off'),
                         self._claim())

    def test_an_agent_silent_too_long_is_not_warm(self):
        self._cleaned()
        old = timeutils.utcnow() - datetime.timedelta(
            seconds=CONF.deploy.fast_track_timeout + 60)
        self._agent_up('token-1', old.strftime('%Y-%m-%dT%H:%M:%S.%f'))
        got = self._claim()
        self.assertEqual(warm.COLD, got.mode)
        self.assertIn('not up', got.reason)

    def test_another_kernel_or_kernel_args_is_a_kexec(self):
        self._cleaned()
        wanted = dict(DEFAULT_BOOT, kernel='http://h/other',
                      kernel_args=['isolcpus=1'])
        got = self._claim(wanted)
        self.assertEqual(warm.KEXEC, got.mode)
        self.assertEqual('the run boots another kernel, kernel_args than '
                         'the agent up', got.reason)
        self.assertGreater(got.agent_up_for_s, 0)

    def test_without_kexec_another_boot_is_cold(self):
        self.config(warm_kexec=False, group='container')
        self._cleaned()
        got = self._claim(dict(DEFAULT_BOOT, kernel_args=['isolcpus=1']))
        self.assertEqual(warm.Claim(
            warm.COLD,
            reason='the run boots another kernel_args than the agent up'),
            got)

    def test_a_pregenerated_token_is_never_bound(self):
        self.node.set_driver_internal_info(
            'agent_secret_token_pregenerated', True)
        self.node.save()
        self._cleaned()
        self.assertNotIn(warm.KEY, self.node.driver_internal_info)

    def test_prepare_leaves_a_warm_node_on(self):
        self._cleaned()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.prepare(task)
        self.power.assert_not_called()

    def test_prepare_powers_off_a_node_that_ran_a_workload(self):
        # No mark: whatever runs there is not the conductor's agent.
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.prepare(task)
        self.power.assert_called_once_with(mock.ANY, states.POWER_OFF)


@mock.patch.object(rootfs, 'resolve', autospec=True)
class WarmDeployTestCase(WarmBase):

    def setUp(self):
        super().setUp()
        self.executor = base.CapturingExecutor.install(self)
        self.refresh = self.useFixture(fixtures.MockPatchObject(
            container_deploy.ContainerDeploy, 'refresh_steps',
            autospec=True)).mock
        self.validate_steps = self.useFixture(fixtures.MockPatchObject(
            container_deploy.deployments, 'validate_deploy_steps',
            autospec=True)).mock

    def _deploy(self, mock_resolve):
        mock_resolve.return_value = base.resolved()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            result = task.driver.deploy.deploy(task)
            # Ironic saves the node as the step returns (waiting, or
            # after the next step).
            task.node.save()
        self.node.refresh()
        return result

    def test_warm_deploy_goes_on_without_a_power_action(self, mock_resolve):
        self._cleaned()
        # None: Ironic runs the next step (the tunables) in this call.
        self.assertIsNone(self._deploy(mock_resolve))
        self.power.assert_not_called()
        boot_files.prepare.assert_not_called()
        self.refresh.assert_called_once_with(mock.ANY, mock.ANY, 'deploy')
        self.validate_steps.assert_called_once_with(mock.ANY)
        report = run_report.get(self.node)
        self.assertTrue(report['warm'])
        self.assertIn('agent_up_for_s', report)
        self.assertNotIn('power-on', [s['name'] for s in report['stages']])
        info = self.node.driver_internal_info['bmc_deploy']
        self.assertEqual('warm', info['boot_kind'])
        self.assertEqual(1, len(self.executor.submitted))

    def test_a_warm_node_whose_boot_differs_is_rebooted(self, mock_resolve):
        self.config(warm_kexec=False, group='container')
        self._cleaned(dict(DEFAULT_BOOT, kernel='http://h/old'))
        self.assertEqual(states.DEPLOYWAIT, self._deploy(mock_resolve))
        self.power.assert_called_once_with(mock.ANY, states.REBOOT)
        boot_files.prepare.assert_called_once()
        report = run_report.get(self.node)
        self.assertFalse(report['warm'])
        self.assertEqual('the run boots another kernel than the agent up',
                         report['cold_reason'])
        self.assertNotIn(warm.KEY, self.node.driver_internal_info)

    @mock.patch.object(boot_files, 'set_pxe_boot', autospec=True)
    @mock.patch.object(kexec_boot, 'kexec', autospec=True)
    def test_another_boot_kexecs_the_warm_agent(self, mock_kexec,
                                                mock_pxe, mock_resolve):
        mock_kexec.return_value = {'method': 'kexec_file_load',
                                   'download_s': 1.0, 'load_s': 0.5}
        self._cleaned(dict(DEFAULT_BOOT, kernel_args=['isolcpus=1']))
        self.assertEqual(states.DEPLOYWAIT, self._deploy(mock_resolve))
        # No power action: the agent jumps into the run's kernel.  The
        # boot files are staged (the fallback), the boot device untouched.
        self.power.assert_not_called()
        boot_files.prepare.assert_called_once()
        self.assertIs(False, boot_files.prepare.call_args[1]['pxe_boot'])
        mock_pxe.assert_not_called()
        mock_kexec.assert_called_once_with(
            mock.ANY, {'deploy_kernel': ('http://h/k', '/k')},
            {'pxe_append_params': 'ipa-api-url=x'})
        report = run_report.get(self.node)
        self.assertFalse(report['warm'])
        self.assertEqual('kexec_file_load', report['kexec']['method'])
        self.assertEqual(['kexec'], [s['name'] for s in report['stages']])
        info = self.node.driver_internal_info['bmc_deploy']
        self.assertEqual('kexec', info['boot_kind'])
        self.refresh.assert_not_called()

    @mock.patch.object(boot_files, 'set_pxe_boot', autospec=True)
    @mock.patch.object(kexec_boot, 'kexec', autospec=True)
    def test_a_failed_kexec_boots_the_node_cold(self, mock_kexec,
                                                mock_pxe, mock_resolve):
        mock_kexec.side_effect = exception.IronicException(
            'bmc_kexec_load: kexec --load exited 1: Permission denied')
        self._cleaned(dict(DEFAULT_BOOT, kernel_args=['isolcpus=1']))
        self.assertEqual(states.DEPLOYWAIT, self._deploy(mock_resolve))
        # The firmware boots the iPXE script: PXE first, then the reboot.
        mock_pxe.assert_called_once_with(mock.ANY)
        self.power.assert_called_once_with(mock.ANY, states.REBOOT)
        report = run_report.get(self.node)
        self.assertIn('kexec failed: bmc_kexec_load: kexec --load exited 1',
                      report['cold_reason'])
        self.assertNotIn('kexec', report)
        self.assertEqual('cold',
                         self.node.driver_internal_info['bmc_deploy'][
                             'boot_kind'])

    def test_a_second_deploy_is_cold(self, mock_resolve):
        self._cleaned()
        self._deploy(mock_resolve)
        self.power.reset_mock()
        # A job ended; the node is deployed again without cleaning.
        self.node.provision_state = states.DEPLOYING
        self.node.del_driver_internal_info('bmc_deploy')
        self.node.save()
        self.assertEqual(states.DEPLOYWAIT, self._deploy(mock_resolve))
        # (The first run is closed with a power-off; the agent, still
        # heartbeating here, is booted over.)
        self.assertEqual(states.REBOOT, self.power.call_args[0][1])
        self.assertEqual('no agent booted by cleaning',
                         run_report.get(self.node)['cold_reason'])


class CleaningTestCase(WarmBase):

    def setUp(self):
        super().setUp()
        self.node.provision_state = states.CLEANING
        self.node.target_provision_state = states.AVAILABLE
        self.node.instance_info = {}
        self.node.save()

    @mock.patch.object(cleaning.deploy_utils,
                       'prepare_inband_cleaning', autospec=True,
                       return_value=states.CLEANWAIT)
    def test_a_cold_cleaning_boots_our_files_and_marks_the_boot(
            self, mock_inband):
        self.node.del_driver_internal_info('agent_url')
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertEqual(states.CLEANWAIT,
                             task.driver.deploy.prepare_cleaning(task))
            mark = task.node.driver_internal_info[warm.KEY]
        boot_files.prepare.assert_called_once()
        mock_inband.assert_called_once_with(mock.ANY, manage_boot=False)
        self.assertEqual(DEFAULT_BOOT, mark['boot'])
        self.assertNotIn('token_sha256', mark)

    @mock.patch.object(cleaning.deploy_utils,
                       'tear_down_inband_cleaning', autospec=True)
    @mock.patch.object(boot_files, 'clean_up', autospec=True)
    def _tear_down(self, mock_clean, mock_inband, fault=None):
        """Cleaning that booted (and marked) the agent ends; the mark."""
        self.node.set_driver_internal_info(
            warm.KEY, {'boot': DEFAULT_BOOT, 'booted_at': 1.0})
        self.node.fault = fault
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.tear_down_cleaning(task)
            task.node.save()
        mock_clean.assert_called_once()
        self.node.refresh()
        return self.node.driver_internal_info.get(warm.KEY)

    def test_tear_down_binds_the_mark_to_the_agent_up(self):
        self.assertIn('token_sha256', self._tear_down())

    def test_a_failed_cleaning_leaves_the_node_cold(self):
        self.assertIsNone(self._tear_down(fault=faults.CLEAN_FAILURE))

    @mock.patch('ironic.drivers.modules.agent_base.get_steps', autospec=True)
    def test_disk_erasure_only_when_asked(self, mock_steps):
        def steps():
            return [{'step': 'erase_devices_metadata', 'priority': 99,
                     'interface': 'deploy'},
                    {'step': 'erase_devices', 'priority': 10,
                     'interface': 'deploy'},
                    {'step': 'burn_in_cpu', 'priority': 0,
                     'interface': 'deploy'}]
        mock_steps.side_effect = lambda *a, **kw: steps()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            got = task.driver.deploy.get_clean_steps(task)
            self.assertEqual([0, 0, 0], [s['priority'] for s in got])
            self.config(erase_devices_metadata_priority=5, group='deploy')
            got = task.driver.deploy.get_clean_steps(task)
            self.assertEqual([99, 0, 0], [s['priority'] for s in got])
            self.config(erase_disks_on_cleaning=True, group='container')
            got = task.driver.deploy.get_clean_steps(task)
            self.assertEqual([99, 10, 0], [s['priority'] for s in got])


class ReportTestCase(WarmBase):

    def test_report_fields_are_documented(self):
        from bmc_common import reference
        names = {f.name for f in reference.REPORT_FIELDS}
        for field in ('warm', 'agent_up_for_s', 'cold_reason'):
            self.assertIn(field, names)
