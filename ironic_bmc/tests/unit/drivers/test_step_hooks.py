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


"""The NodeOS partitions read back at the start reach the report."""

import fixtures
from ironic.common import states
from ironic.conductor import task_manager
from ironic import objects

from ironic_bmc import deploy_info
from ironic_bmc.drivers import boot_report
from ironic_bmc.drivers import step_hooks
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

TUNABLES = {
    'housekeeping_cpus': {'requested': '0', 'ok': True,
                          'actual': {'cpus': '0'}},
    'workload_cpus': {'requested': '1-N', 'ok': True,
                      'actual': {'cpus': '1', 'cpus_effective': '1'}},
    'thp_defrag': {'requested': 'never', 'ok': True, 'actual': 'never'},
}
SERVICES = {'cpus_effective': {'init.scope': '0', 'system.slice': '0',
                               'user.slice': '0'}, 'ok': True}
WORKLOAD = {'cgroup': '/bmc-workload', 'cpus_effective': '1',
            'mems_effective': '0', 'partition': 'root', 'affinity': '1',
            'ok': True}


class WithPartitionsTestCase(base.ContainerDeployTestCase):

    def test_held_at_the_start(self):
        out = step_hooks.with_partitions(TUNABLES, {
            'housekeeping_cpus': SERVICES, 'workload_cpus': WORKLOAD})
        self.assertEqual(WORKLOAD, out['workload_cpus']['at_start'])
        self.assertTrue(out['workload_cpus']['ok'])
        self.assertTrue(out['housekeeping_cpus']['ok'])
        self.assertEqual(TUNABLES['thp_defrag'], out['thp_defrag'])
        self.assertNotIn('at_start', TUNABLES['workload_cpus'])

    def test_lost_by_the_start_is_not_ok(self):
        moved = dict(WORKLOAD, affinity='0-1', ok=False,
                     error='the workload should own CPUs 1: its init runs '
                           'on CPUs 0-1')
        out = step_hooks.with_partitions(TUNABLES, {
            'housekeeping_cpus': SERVICES, 'workload_cpus': moved})
        self.assertFalse(out['workload_cpus']['ok'])
        self.assertEqual('at the start: the workload should own CPUs 1: '
                         'its init runs on CPUs 0-1',
                         out['workload_cpus']['error'])
        self.assertTrue(out['housekeeping_cpus']['ok'])

    def test_unreadable_is_said(self):
        error = {'error': 'cannot read the partitions back: boom'}
        out = step_hooks.with_partitions(TUNABLES, error)
        self.assertEqual(error, out['workload_cpus']['at_start'])
        self.assertEqual(error, out['housekeeping_cpus']['at_start'])

    def test_a_job_that_ended_first_keeps_what_was_applied(self):
        ended = {'ended': 'the workload ended before its partitions could '
                          'be read back; "actual" is as they were applied'}
        out = step_hooks.with_partitions(TUNABLES, ended)
        for name in ('workload_cpus', 'housekeeping_cpus'):
            self.assertEqual(ended, out[name]['at_start'])
            self.assertTrue(out[name]['ok'])
            self.assertNotIn('error', out[name])

    def test_the_hook_updates_the_report(self):
        report = run_report.new(self.node, deploy_info.parse(self.node))
        report['tunables'] = TUNABLES
        report['stages'] = [{'name': 'rootfs-staged', 'start': 90.0,
                             'end': 99.0}]
        self.node.provision_state = states.DEPLOYWAIT
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            step_hooks.after_start_workload(task, {'command_result': {
                'deploy_result': {'pid': 7, 'container_pid': 8,
                                  'started': 100.0, 'partitions': {
                                      'housekeeping_cpus': SERVICES,
                                      'workload_cpus': WORKLOAD}}}})
            task.node.save()    # as Ironic does when the deploy resumes
        report = run_report.get(objects.Node.get_by_uuid(self.context,
                                                         self.node.uuid))
        self.assertEqual(WORKLOAD, report['tunables']['workload_cpus'][
            'at_start'])
        self.assertEqual(SERVICES, report['tunables']['housekeeping_cpus'][
            'at_start'])
        self.assertEqual('workload-started', report['stages'][-1]['name'])


BOOT_TIMES = {'uptime': 40.0, 'agent_start': 20.5, 'initrd_kib': 116580,
              'kernel': {'unpack_start': 0.4, 'unpack_end': 6.9,
                         'init_start': 7.2}}


class BootReportTestCase(base.ContainerDeployTestCase):

    def test_breakdown(self):
        # Powered on at 1000, the kernel started at 1050 (the call sent
        # at 1090 found the node 40 s up), first heartbeat 1080, first
        # step 1082.
        boot = boot_report.breakdown(1000.0, 1082.0, 1090.0, BOOT_TIMES,
                                     first_heartbeat=1080.0)
        self.assertEqual({
            'firmware_ipxe_s': 50.0, 'kernel_s': 0.4,
            'initramfs_unpack_s': 6.5, 'kernel_to_init_s': 0.3,
            'userspace_to_agent_s': 13.3, 'agent_to_heartbeat_s': 9.5,
            'heartbeat_to_step_s': 2.0}, boot['phases'])
        self.assertEqual(82.0, boot['agent_up_s'])
        self.assertEqual(82.0, round(sum(boot['phases'].values()), 2))
        self.assertEqual(116580 * 1024, boot['initramfs_bytes'])
        self.assertEqual(1050.0, boot['marks']['kernel_start'])
        self.assertNotIn('not_measured', boot)

    def test_a_kexec_boot_has_no_firmware_phase(self):
        boot = boot_report.breakdown(1000.0, 1082.0, 1090.0, BOOT_TIMES,
                                     first_heartbeat=1080.0, kexec=True)
        self.assertEqual(50.0, boot['phases']['kexec_s'])
        self.assertNotIn('firmware_ipxe_s', boot['phases'])
        self.assertEqual('kexec', boot['via'])

    def test_what_the_node_did_not_log_is_named(self):
        boot = boot_report.breakdown(1000.0, 1082.0, 1090.0, {
            'uptime': 40.0, 'kernel': {}})
        self.assertEqual(50.0, boot['phases']['firmware_ipxe_s'])
        self.assertIsNone(boot['phases']['initramfs_unpack_s'])
        self.assertEqual(['agent_to_heartbeat_s', 'heartbeat_to_step_s',
                          'initramfs_unpack_s', 'kernel_s',
                          'kernel_to_init_s', 'userspace_to_agent_s'],
                         boot['not_measured'])
        self.assertEqual({'error': 'the agent sent no boot clock'},
                         boot_report.breakdown(1.0, 2.0, 3.0, {}))

    def test_heartbeat_time(self):
        self.node.set_driver_internal_info('agent_last_heartbeat',
                                           '2026-11-24T16:00:00.500000')
        self.assertEqual(1795536000.5,
                         boot_report.heartbeat_time(self.node))
        self.node.set_driver_internal_info('agent_last_heartbeat', 'soon')
        self.assertIsNone(boot_report.heartbeat_time(self.node))

    def _agent_up(self):
        """Powered on at 1000, agent-up at 1082 (first heartbeat 1080),
        the first in-band step sent at 1090."""
        report = run_report.new(self.node, deploy_info.parse(self.node))
        report['stages'] = [{'name': 'agent-up', 'start': 1000.0,
                             'end': 1082.0}]
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.set_driver_internal_info('bmc_deploy', {
            'kernel_args': [], 'boot_times_sent': 1090.0,
            'first_heartbeat': 1080.0})
        self.node.save()

    def test_the_first_in_band_result_fills_the_section(self):
        self._agent_up()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            step_hooks.after_apply_tunables(task, {'command_result': {
                'deploy_result': {'tunables': {}, 'stages': [],
                                  'boot_times': BOOT_TIMES}}})
            # A later result does not replace it.
            step_hooks.after_stage_rootfs(task, {'command_result': {
                'deploy_result': {'boot_times': {'uptime': 1.0}}}})
            task.node.save()    # as Ironic does when the deploy resumes
        report = run_report.get(objects.Node.get_by_uuid(self.context,
                                                         self.node.uuid))
        self.assertEqual(9.5, report['boot']['phases'][
            'agent_to_heartbeat_s'])
        self.assertEqual(1050.0, report['boot']['marks']['kernel_start'])

    def test_the_http_log_splits_firmware_from_downloads(self):
        log = self.useFixture(fixtures.TempDir()).join('access.log')
        with open(log, 'w') as f:
            f.write('1040.0 2.0 200 1000 "GET /%s/deploy_ramdisk HTTP/1.1" '
                    '"iPXE"\n' % self.node.uuid)
        self.config(boot_http_log=log, group='container')
        self._agent_up()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            step_hooks.after_apply_tunables(task, {'command_result': {
                'deploy_result': {'boot_times': BOOT_TIMES}}})
            task.node.save()    # as Ironic does when the deploy resumes
        boot = run_report.get(objects.Node.get_by_uuid(
            self.context, self.node.uuid))['boot']
        self.assertEqual({'firmware_s': 38.0, 'downloads_s': 2.0,
                          'downloads_to_kernel_s': 10.0, 'requests': 1,
                          'bytes': 1000, 'resolution_s': 0.001},
                         boot['http'])
