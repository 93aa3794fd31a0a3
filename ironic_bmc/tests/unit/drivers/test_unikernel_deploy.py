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

"""The unikernel deploy interface, on Ironic's own DB test fixtures."""

import json
import os
import time
from unittest import mock

import fixtures

from ironic.common import exception
from ironic.common import pxe_utils
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conf import CONF
from ironic.tests.unit.db import base as db_base
from ironic.tests.unit.objects import utils as obj_utils

from bmc_common import protocol
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import energy
from ironic_bmc.drivers import unikernel_console
from ironic_bmc.drivers import unikernel_deploy
from ironic_bmc.drivers import unikernel_run
from ironic_bmc import report as run_report
from ironic_bmc import run_files
from ironic_bmc import unikernel_info

IMAGE = 'http://127.0.0.1:8080/bmc-noise-unikernel.elf'
RAW = {'cpu': 0, 'method': 'bmc-noise-unikernel rdtscp', 'clock': 'pit',
       'tsc_hz': 2e9, 'duration_s': 1.0, 'samples': 10,
       'floor_cycles': 40, 'threshold_cycles': 150, 'events': 3,
       'events_per_s': 3.0, 'lost_share': 0.001, 'largest_cycles': 20000,
       'median_cycles': 300, 'p99_cycles': 20000, 'mean_cycles': 6866.7,
       'stddev_cycles': 11373.0, 'ci90_cycles': [-3934.0, 17667.4],
       'buckets': {'150-400': 2, '400-2000': 0, '2000-6000': 0,
                   '>6000': 1}, 'histogram': [[256, 2], [16384, 1]]}
P = protocol.UNIKERNEL_PREFIX
REAL_WATCH = unikernel_run.watch
GOOD = ('SeaBIOS (version 1.16)\r\niPXE 1.21\r\n%sbooted\r\n'
        '%sresult %s\r\n%send rc=0\r\n' % (P, P, json.dumps(RAW), P))


class UnikernelTestCase(db_base.DbTestCase):

    def _clear_attrs(self):
        pass

    def setUp(self):
        super().setUp()
        # (Imported here, before the test base forbids subprocesses:
        # ironic.conductor.periodics' imports run one.)
        self.assertEqual('unikernel', unikernel_deploy.NAME)
        self.config(enabled_deploy_interfaces=['unikernel', 'fake'])
        self.config(enabled_boot_interfaces=['ipxe', 'fake'])
        self.config(enabled_vendor_interfaces=['container', 'fake'])
        self.config_temp_dir('http_root', group='deploy')
        self.config(dhcp_provider='none', group='dhcp')
        self.config(http_url='http://10.0.2.100:8080', group='deploy')
        self.config_temp_dir('report_dir', group='container')
        self.consoles = self.useFixture(fixtures.TempDir()).path
        self.config(console_log_template=os.path.join(
            self.consoles, '{node_name}.console.log'), group='container')
        self.config(power_sampling=False, group='container')
        self.node = obj_utils.create_test_node(
            self.context, driver='fake-hardware', name='node-0',
            deploy_interface='unikernel', boot_interface='ipxe',
            network_interface='noop', power_interface='fake',
            vendor_interface='container',
            properties={'capabilities': 'boot_mode:bios'},
            provision_state=states.DEPLOYING,
            target_provision_state=states.ACTIVE,
            instance_info={protocol.II_UNIKERNEL: IMAGE,
                           protocol.II_UNIKERNEL_ARGS: 'duration=1 repeat=2'},
            driver_info={'deploy_kernel': 'http://h/k',
                         'deploy_ramdisk': 'http://h/r'})
        self.console = os.path.join(self.consoles, 'node-0.console.log')
        # What an earlier boot of the node printed: not this run's.
        with open(self.console, 'w') as f:
            f.write('%sbooted\n%send rc=7\n' % (P, P))
        self.cache = self.useFixture(fixtures.MockPatchObject(
            boot_files, 'cache_boot_files', autospec=True)).mock
        self.watch = self.useFixture(fixtures.MockPatchObject(
            unikernel_run, 'watch', autospec=True)).mock
        self.power = self.useFixture(fixtures.MockPatchObject(
            unikernel_run.manager_utils, 'node_power_action',
            autospec=True)).mock

    def _deploy(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            result = task.driver.deploy.deploy(task)
            task.node.save()
        self.node.refresh()
        return result

    def _print(self, text):
        with open(self.console, 'a') as f:
            f.write(text)

    def _close(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            closed = unikernel_run.close_if_due(task)
        self.node.refresh()
        return closed


class InfoTestCase(UnikernelTestCase):

    def _refused(self, exc_class=exception.InvalidParameterValue, **ii):
        self.node.instance_info = dict(self.node.instance_info, **ii)
        with self.assertRaises(exc_class) as ctx:
            unikernel_info.parse(self.node)
        return str(ctx.exception)

    def test_parsed(self):
        info = unikernel_info.parse(self.node)
        self.assertEqual(IMAGE, info.image)
        self.assertEqual('duration=1 repeat=2', info.args)
        self.assertEqual(CONF.container.unikernel_timeout, info.timeout)

    def test_what_needs_the_agent_is_refused_by_name(self):
        msg = self._refused(container_tunables='low-noise')
        self.assertIn('instance_info/container_tunables', msg)
        self.assertIn('has no agent', msg)

    def test_a_tenants_deploy_is_refused(self):
        self.node.lessee = 'p1'
        msg = self._refused()
        self.assertIn('unikernel deploy interface', msg)
        self.assertIn('is the operator\'s', msg)
        self.assertIn('deployed for project p1 (the node\'s lessee)', msg)

    def test_a_node_owners_deploy_is_refused(self):
        # An owner is a project, not the operator: under Ironic's default
        # file_url_allowed_paths a file:// unikernel would read other
        # tenants' outputs from the conductor's report_dir.
        self.node.owner = 'o1'
        msg = self._refused(unikernel_image='file:///var/lib/ironic/x')
        self.assertIn('deployed for project o1 (the node\'s owner)', msg)

    def test_project_id_a_lessee_wrote_is_not_the_operators(self):
        # No instance holds the node: instance_info/project_id is anyone's
        # word and decides nothing; the lessee still makes it a project's.
        self.node.lessee = 'attacker'
        msg = self._refused(project_id='victim')
        self.assertIn('project attacker', msg)

    def test_the_image_is_required_and_a_url(self):
        self.node.instance_info = {}
        with self.assertRaises(exception.MissingParameterValue) as ctx:
            unikernel_info.parse(self.node)
        self.assertIn('instance_info/unikernel_image', str(ctx.exception))
        msg = self._refused(unikernel_image='/srv/uk.elf')
        self.assertIn('http://, https:// or file://', msg)

    def test_args_cannot_reach_the_ipxe_script(self):
        for bad in ('duration=1\nshell', 'x=${net0/ip}', 'a;b'):
            msg = self._refused(unikernel_args=bad)
            self.assertIn('instance_info/unikernel_args', msg)
        self.assertIn('at most 512',
                      self._refused(unikernel_args='a' * 513))

    def test_timeout_bounds(self):
        self.assertIn('between 30 and 86400',
                      self._refused(unikernel_timeout=5))
        self.assertIn('whole number', self._refused(unikernel_timeout='x'))

    def test_validate_wants_a_console(self):
        self.config(console_log_template='', group='container')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertRaisesRegex(
                exception.InvalidParameterValue, 'console_log_template',
                task.driver.deploy.validate, task)

    def test_uefi_nodes_are_refused(self):
        self.node.properties = {'capabilities': 'boot_mode:uefi'}
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertRaisesRegex(
                exception.InvalidParameterValue, 'UEFI mode',
                task.driver.deploy.validate, task)

    def test_a_node_name_that_is_not_a_file_name_is_refused(self):
        self.node.name = '../etc'
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               "'../etc'", unikernel_console.path,
                               self.node)


class ConsoleTestCase(UnikernelTestCase):

    def test_protocol_lines(self):
        console = unikernel_console.parse(GOOD + '%sbooted\n' % P)
        self.assertTrue(console.booted)
        self.assertEqual(0, console.exit_code)
        self.assertEqual(1, len(console.results))
        self.assertEqual(3, console.results[0]['interruptions'])
        self.assertEqual(20, console.results[0]['floor_ns'])
        self.assertEqual(0, console.bad_lines)

    def test_what_breaks_the_protocol_is_counted_not_used(self):
        console = unikernel_console.parse(
            '%sresult {"cpu": 0}\n%sresult nope\n%sfly\n%send rc=x\n'
            '%serror no TSC\n' % (P, P, P, P, P))
        self.assertEqual([], console.results)
        self.assertEqual(4, console.bad_lines)
        self.assertEqual(['no TSC'], console.errors)
        self.assertFalse(console.ended)

    def test_read_from_the_mark(self):
        offset = unikernel_console.mark(self.console)
        self._print('new\n')
        self.assertEqual(('new\n', False),
                         unikernel_console.read(self.console, offset))
        # Rotated under the run: read from its start, and say so.
        with open(self.console, 'w') as f:
            f.write('x\n')
        self.assertEqual(('x\n', True),
                         unikernel_console.read(self.console, offset))


class DeployTestCase(UnikernelTestCase):

    def test_deploy_stages_the_image_and_powers_on(self):
        self.assertIsNone(self._deploy())
        self.cache.assert_called_once_with(mock.ANY, {
            'unikernel': (IMAGE, os.path.join(CONF.deploy.http_root,
                                              self.node.uuid, 'unikernel'))})
        self.power.assert_called_once_with(mock.ANY, states.POWER_ON)
        config = open(pxe_utils.get_pxe_config_file_path(
            self.node.uuid, ipxe_enabled=True)).read()
        self.assertIn('http://10.0.2.100:8080/%s/unikernel duration=1 '
                      'repeat=2 || goto retry' % self.node.uuid, config)
        self.assertNotIn('initrd', config.split(':deploy')[1].split(
            ':retry')[0])
        run = self.node.driver_internal_info[unikernel_run.RUN_KEY]
        self.assertEqual(os.path.getsize(self.console), run['offset'])
        report = run_report.get(self.node)
        self.assertEqual('running', report['state'])
        self.assertEqual('unikernel', report['kind'])
        self.assertEqual([protocol.STAGE_POWER_ON],
                         [s['name'] for s in report['stages']])
        self.watch.assert_called_once_with(mock.ANY, self.node.uuid,
                                           report['deploy_id'])

    def test_a_run_closes_at_its_end_line(self):
        self._deploy()
        self.power.reset_mock()
        self._print('%sbooted\r\n' % P)
        self.assertFalse(self._close())
        self._print(GOOD.split('booted\r\n', 1)[1])
        self.assertTrue(self._close())
        report = run_report.get(self.node)
        self.assertEqual('finished', report['state'], report['error'])
        self.assertEqual(0, report['workload_exit_code'])
        self.assertEqual(
            [protocol.STAGE_POWER_ON, protocol.STAGE_WORKLOAD_STARTED,
             protocol.STAGE_WORKLOAD_EXITED, protocol.STAGE_POWERED_OFF],
            [s['name'] for s in report['stages']])
        noise = report['noise']['unikernel']['noise']
        self.assertEqual('bmc-noise-unikernel rdtscp', noise['method'])
        self.assertEqual(150, noise['cpus'][0]['cycles']['threshold'])
        self.assertFalse(report['energy']['rapl']['available'])
        self.assertIn('no agent', report['energy']['rapl']['reason'])
        self.power.assert_called_once_with(mock.ANY, states.POWER_OFF)
        self.assertNotIn(unikernel_run.RUN_KEY,
                         self.node.driver_internal_info)
        # This run's console only: not the earlier boot's rc=7.
        output = run_files.read_output(self.node.uuid, report['deploy_id'])
        self.assertTrue(output.startswith(b'%sbooted' % P.encode()))
        self.assertIsNone(self.node.last_error)

    def test_an_error_line_fails_the_run(self):
        self._deploy()
        self._print('%sbooted\n%serror unknown key "bogus"\n%send rc=1\n'
                    % (P, P, P))
        self.assertTrue(self._close())
        report = run_report.get(self.node)
        self.assertEqual('failed', report['state'])
        self.assertIn('rc=1: unknown key "bogus"', report['error'])
        self.assertIn('rc=1', self.node.last_error)

    def test_silence_until_the_deadline_fails_the_run(self):
        self._deploy()
        info = self.node.driver_internal_info
        info[unikernel_run.RUN_KEY]['deadline'] = time.time() - 1
        self.node.driver_internal_info = info
        self.node.save()
        self._print('iPXE 1.21 -- Connection timed out\n')
        self.assertTrue(self._close())
        report = run_report.get(self.node)
        self.assertEqual('failed', report['state'])
        self.assertIn('nothing of it appeared on the console', report['error'])
        self.assertIn(self.console, report['error'])
        self.power.assert_called_with(mock.ANY, states.POWER_OFF)

    def test_undeploy_mid_run_ends_it_undeployed(self):
        self._deploy()
        self._print('%sbooted\n' % P)
        self.node.provision_state = states.DELETING
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.tear_down(task)
            task.driver.deploy.clean_up(task)
        self.node.refresh()
        report = run_report.get(self.node)
        self.assertEqual('undeployed', report['state'])
        self.assertIsNone(report['error'])
        self.assertIsNone(self.node.last_error)
        self.assertFalse(os.path.exists(pxe_utils.get_pxe_config_file_path(
            self.node.uuid, ipxe_enabled=True)))

    def test_the_watcher_closes_the_run(self):
        self.useFixture(fixtures.MockPatchObject(unikernel_run, 'POLL',
                                                 0.01))
        self._deploy()
        deploy_id = run_report.get(self.node)['deploy_id']
        self._print(GOOD)
        thread = REAL_WATCH(self.context, self.node.uuid,
                                     deploy_id)
        thread.join(10)
        self.assertFalse(thread.is_alive())
        self.node.refresh()
        report = run_report.get(self.node)
        self.assertEqual('finished', report['state'])
        self.assertFalse(unikernel_run.watched(deploy_id))

    def test_the_watcher_waits_for_the_deploy_to_save_the_run(self):
        # Started by the deploy step, before Ironic saves the node: the
        # first looks find no run while the node is DEPLOYING.
        self.useFixture(fixtures.MockPatchObject(unikernel_run, 'POLL',
                                                 0.01))
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.deploy(task)
            deploy_id = run_report.get(task.node)['deploy_id']
            thread = REAL_WATCH(self.context, self.node.uuid, deploy_id)
            time.sleep(0.1)
            self.assertTrue(thread.is_alive())
            task.node.save()
        self._print(GOOD)
        thread.join(10)
        self.assertFalse(thread.is_alive())
        self.node.refresh()
        report = run_report.get(self.node)
        self.assertEqual('finished', report['state'])
        stages = {s['name']: s for s in report['stages']}
        self.assertIn(protocol.STAGE_WORKLOAD_EXITED, stages)

    def test_energy_is_sampled_over_the_booted_to_end_window(self):
        self.config(power_sampling=True, group='container')
        finish = self.useFixture(fixtures.MockPatchObject(
            energy, 'finish', autospec=True,
            return_value={'available': True, 'rapl': {}})).mock
        self.useFixture(fixtures.MockPatchObject(
            energy, 'start', autospec=True, return_value=None))
        self._deploy()
        self._print(GOOD)
        self._close()
        report = run_report.get(self.node)
        stages = {s['name']: s for s in report['stages']}
        (_node, start, end), kwargs = finish.call_args
        self.assertAlmostEqual(
            stages[protocol.STAGE_WORKLOAD_STARTED]['end'], start, places=2)
        self.assertAlmostEqual(
            stages[protocol.STAGE_WORKLOAD_EXITED]['end'], end, places=2)
        self.assertEqual(report['deploy_id'], kwargs['deploy_id'])
