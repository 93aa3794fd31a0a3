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

"""The ``wol`` power interface and the ``container-wol`` hardware type,
on Ironic's DB fixtures; the socket and the agent are mocked."""

import socket
from unittest import mock

import fixtures
from oslo_utils import timeutils

from ironic.common import exception
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conductor import utils as cond_utils
from ironic.drivers.modules import agent_power
from ironic.drivers.modules import ipxe
from ironic.drivers.modules import noop_mgmt
from ironic.tests.unit.db import base as db_base
from ironic.tests.unit.objects import utils as obj_utils

from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import vendor
from ironic_bmc.drivers import wol_power
from ironic_bmc import report as run_report

MAC = '52:54:00:bc:00:00'
MAC2 = '52:54:00:bc:00:07'
PACKET = b'\xff' * 6 + b'\x52\x54\x00\xbc\x00\x00' * 16


def _now():
    return timeutils.utcnow().strftime('%Y-%m-%dT%H:%M:%S.%f')


class WolTestCase(db_base.DbTestCase):

    def _clear_attrs(self):
        # (See test_container_deploy: pytest's unittest runner.)
        pass

    def setUp(self):
        super().setUp()
        self.node = obj_utils.create_test_node(
            self.context, driver='fake-hardware',
            provision_state=states.AVAILABLE, power_state=states.POWER_OFF,
            driver_info={'wol_host': '127.0.0.1', 'wol_port': 26229})
        obj_utils.create_test_port(self.context, node_id=self.node.id,
                                   address=MAC)
        self.power = wol_power.WakeOnLanPower()
        # The socket module as wol_power sees it: only its constants are
        # real; nothing is ever sent.
        self.sock = mock.MagicMock(spec=socket.socket)
        fake_socket = mock.MagicMock(
            AF_INET=socket.AF_INET, SOCK_DGRAM=socket.SOCK_DGRAM,
            SOL_SOCKET=socket.SOL_SOCKET, SO_BROADCAST=socket.SO_BROADCAST)
        self.useFixture(fixtures.MockPatchObject(wol_power, 'socket',
                                                 fake_socket))
        self.socket_cls = fake_socket.socket
        self.socket_cls.return_value.__enter__.return_value = self.sock
        self.client = mock.Mock(spec=self.power._client)
        self.power._client = self.client
        self.useFixture(fixtures.MockPatchObject(wol_power.time, 'sleep'))

    def _update(self, **fields):
        for key, value in fields.items():
            setattr(self.node, key, value)
        self.node.save()

    def _agent_up(self):
        self.node.set_driver_internal_info('agent_url', 'http://n:9999')
        self.node.set_driver_internal_info('agent_secret_token', 'tok')
        self.node.set_driver_internal_info('agent_last_heartbeat', _now())
        self.node.save()

    def _task(self):
        return task_manager.acquire(self.context, self.node.uuid)


class ValidateTestCase(WolTestCase):

    def test_valid(self):
        with self._task() as task:
            self.power.validate(task)

    def test_defaults_are_broadcast_and_port_9(self):
        self._update(driver_info={})
        self.assertEqual(('255.255.255.255', 9),
                         wol_power.parse_driver_info(self.node))

    def test_port_as_string_from_the_api(self):
        self._update(driver_info={'wol_port': '7'})
        self.assertEqual(7, wol_power.parse_driver_info(self.node)[1])

    def _refused(self, exc_class=exception.InvalidParameterValue):
        with self._task() as task:
            return str(self.assertRaises(exc_class, self.power.validate,
                                         task))

    def test_bad_ports_refused_naming_the_field(self):
        for bad in (0, 65536, -1, 'nine', '9.5', 9.5, True, None, [9]):
            self._update(driver_info={'wol_port': bad})
            msg = self._refused()
            self.assertIn('driver_info/wol_port', msg)
            self.assertIn('1 to 65535', msg)

    def test_bad_hosts_refused_naming_the_field(self):
        for bad in ('', 'not a host', '::1', 'fe80::1', 42,
                    '10.0.0.1;reboot'):
            self._update(driver_info={'wol_host': bad})
            msg = self._refused()
            self.assertIn('driver_info/wol_host', msg)

    def test_host_names_and_broadcasts_accepted(self):
        for good in ('192.0.2.255', 'wol-relay.example', '10.1.2.3'):
            self._update(driver_info={'wol_host': good})
            with self._task() as task:
                self.power.validate(task)

    def test_a_node_without_ports_is_refused(self):
        node = obj_utils.create_test_node(
            self.context, driver='fake-hardware',
            uuid='5e0d7c52-8a4f-4a3e-9f0b-2b1f6c7d8e90', name='portless')
        with task_manager.acquire(self.context, node.uuid) as task:
            msg = str(self.assertRaises(exception.MissingParameterValue,
                                        self.power.validate, task))
        self.assertIn('has no port', msg)

    def test_properties_name_both_fields(self):
        self.assertEqual({'wol_host', 'wol_port'},
                         set(self.power.get_properties()))


class PowerOnTestCase(WolTestCase):

    def test_magic_packets_exact_bytes_to_host_and_port(self):
        with self._task() as task:
            self.power.set_power_state(task, states.POWER_ON)
        self.socket_cls.assert_called_once_with(socket.AF_INET,
                                                socket.SOCK_DGRAM)
        self.sock.setsockopt.assert_called_once_with(
            socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        self.assertEqual(
            [mock.call(PACKET, ('127.0.0.1', 26229))] * wol_power.COPIES,
            self.sock.sendto.call_args_list)

    def test_one_packet_per_port_to_the_broadcast_by_default(self):
        self._update(driver_info={})
        obj_utils.create_test_port(
            self.context, node_id=self.node.id, address=MAC2,
            uuid='e4b4f3b4-0b7e-4bb6-9a59-5d6c3f9c4a01')
        with self._task() as task:
            self.power.set_power_state(task, states.POWER_ON)
        sent = {(c.args[0][6:12], c.args[1])
                for c in self.sock.sendto.call_args_list}
        self.assertEqual({(b'\x52\x54\x00\xbc\x00\x00',
                           ('255.255.255.255', 9)),
                          (b'\x52\x54\x00\xbc\x00\x07',
                           ('255.255.255.255', 9))}, sent)

    def test_socket_error_names_the_destination(self):
        self.sock.sendto.side_effect = OSError('Network is unreachable')
        with self._task() as task:
            msg = str(self.assertRaises(
                exception.PowerStateFailure, self.power.set_power_state,
                task, states.POWER_ON))
        self.assertIn('127.0.0.1:26229', msg)
        self.assertIn('unreachable', msg)

    def test_through_node_power_action_records_power_on(self):
        with self._task() as task:
            task.driver.power = self.power
            cond_utils.node_power_action(task, states.POWER_ON)
        self.node.refresh()
        self.assertEqual(states.POWER_ON, self.node.power_state)
        self.assertEqual(wol_power.COPIES, self.sock.sendto.call_count)


class PowerStateTestCase(WolTestCase):

    def _state(self):
        with self._task() as task:
            return self.power.get_power_state(task)

    def test_recorded_off_without_agent(self):
        self.assertEqual(states.POWER_OFF, self._state())

    def test_recorded_on_without_agent(self):
        # (Booting, or did not wake: a record, not a reading.)
        self._update(power_state=states.POWER_ON)
        self.assertEqual(states.POWER_ON, self._state())

    def test_never_recorded_is_off(self):
        self._update(power_state=None)
        self.assertEqual(states.POWER_OFF, self._state())

    def test_on_while_the_agent_heartbeats(self):
        self._agent_up()
        self.assertEqual(states.POWER_ON, self._state())

    def test_stale_heartbeat_is_not_an_agent(self):
        self._agent_up()
        self.node.set_driver_internal_info('agent_last_heartbeat',
                                           '2000-01-01T00:00:00.000000')
        self.node.save()
        self.assertEqual(states.POWER_OFF, self._state())

    def test_on_while_a_container_run_watches_its_agent(self):
        self.node.set_driver_internal_info(agent_calls.AGENT_KEY, {
            'agent_url': 'http://n:9999', 'agent_secret_token': 'tok'})
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY,
                                           {'state': 'running'})
        self.node.save()
        self.assertEqual(states.POWER_ON, self._state())
        # A finished run's agent is gone with its node's power.
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY,
                                           {'state': 'finished'})
        self.node.save()
        self.assertEqual(states.POWER_OFF, self._state())

    def test_never_forced_by_the_sync(self):
        with self._task() as task:
            self.assertFalse(self.power.supports_power_sync(task))


class PowerOffTestCase(WolTestCase):

    def setUp(self):
        super().setUp()
        self._update(power_state=states.POWER_ON)
        self.client.get_commands_status.side_effect = (
            exception.AgentConnectionFailed(reason='refused'))

    def test_agent_down_is_refused_with_what_to_do(self):
        with self._task() as task:
            task.driver.power = self.power
            self.assertRaises(exception.PowerStateFailure,
                              cond_utils.node_power_action, task,
                              states.POWER_OFF)
        self.node.refresh()
        self.assertEqual(states.POWER_ON, self.node.power_state)
        for words in ('no BMC', 'no agent up', 'switch it off at the '
                      'machine', 'maintenance'):
            self.assertIn(words, self.node.last_error)
        self.client.power_off.assert_not_called()

    def test_agent_down_in_maintenance_is_recorded(self):
        self._update(maintenance=True)
        with self._task() as task:
            task.driver.power = self.power
            cond_utils.node_power_action(task, states.POWER_OFF)
        self.node.refresh()
        self.assertEqual(states.POWER_OFF, self.node.power_state)
        self.client.power_off.assert_not_called()

    def test_in_band_through_node_power_action(self):
        # Ironic forgets the agent's URL and token before it calls
        # set_power_state: the agent get_power_state found is used.
        self._agent_up()
        with self._task() as task:
            task.driver.power = self.power
            cond_utils.node_power_action(task, states.POWER_OFF)
        node = self.client.power_off.call_args.args[0]
        self.assertEqual('http://n:9999',
                         node.driver_internal_info['agent_url'])
        self.assertEqual('tok',
                         node.driver_internal_info['agent_secret_token'])
        self.node.refresh()
        self.assertEqual(states.POWER_OFF, self.node.power_state)
        self.assertNotIn('agent_url', self.node.driver_internal_info)
        # No heartbeat left to say an agent is up.
        self.assertNotIn('agent_last_heartbeat',
                         self.node.driver_internal_info)

    def test_in_band_for_a_running_container_job(self):
        self.node.set_driver_internal_info(agent_calls.AGENT_KEY, {
            'agent_url': 'http://n:9999', 'agent_secret_token': 'kept',
            'agent_verify_ca': None})
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY,
                                           {'state': 'exited'})
        self.node.save()
        with self._task() as task:
            self.power.set_power_state(task, states.POWER_OFF)
        node = self.client.power_off.call_args.args[0]
        self.assertEqual('kept',
                         node.driver_internal_info['agent_secret_token'])

    def test_agent_busy_is_retried(self):
        self._agent_up()
        self.client.power_off.side_effect = [
            exception.AgentInProgress(node='n', command='c', error='busy'),
            {'command_status': 'RUNNING'}]
        with self._task() as task:
            self.power.set_power_state(task, states.POWER_OFF)
        self.assertEqual(2, self.client.power_off.call_count)

    def test_agent_refusing_the_request(self):
        self._agent_up()
        self.client.power_off.side_effect = exception.AgentAPIError(
            node='n', status=500, error='boom')
        with self._task() as task:
            msg = str(self.assertRaises(
                exception.PowerStateFailure, self.power.set_power_state,
                task, states.POWER_OFF))
        self.assertIn('did not take the power-off request', msg)

    def test_agent_that_keeps_answering(self):
        self._agent_up()
        self.client.get_commands_status.side_effect = None
        self.client.get_commands_status.return_value = []
        with self._task() as task:
            msg = str(self.assertRaises(
                exception.PowerStateFailure, self.power.set_power_state,
                task, states.POWER_OFF, timeout=0.01))
        self.assertIn('still answers', msg)


class RebootTestCase(WolTestCase):

    def test_without_agent_a_magic_packet(self):
        self._update(power_state=states.POWER_ON)
        with self._task() as task:
            self.power.reboot(task)
        self.assertEqual(wol_power.COPIES, self.sock.sendto.call_count)
        self.client.reboot.assert_not_called()

    @mock.patch.object(agent_power.AgentPower, 'reboot', autospec=True)
    def test_with_agent_ironics_agent_reboot(self, mock_reboot):
        self._agent_up()
        with self._task() as task:
            self.power.reboot(task)
            mock_reboot.assert_called_once_with(self.power, task,
                                                timeout=None)
        self.sock.sendto.assert_not_called()

    @mock.patch.object(agent_power.AgentPower, 'reboot', autospec=True)
    def test_container_run_agent_through_node_power_action(self,
                                                           mock_reboot):
        # Ironic forgets the agent's URL and token before it calls
        # reboot; a container run's agent is kept by the deploy.
        self._update(power_state=states.POWER_ON)
        self.node.set_driver_internal_info(agent_calls.AGENT_KEY, {
            'agent_url': 'http://n:9999', 'agent_secret_token': 'kept'})
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY,
                                           {'state': 'running'})
        self.node.save()

        def reboot(power, task, timeout=None):
            info = task.node.driver_internal_info
            self.assertEqual('http://n:9999', info['agent_url'])
            self.assertEqual('kept', info['agent_secret_token'])

        mock_reboot.side_effect = reboot
        with self._task() as task:
            task.driver.power = self.power
            cond_utils.node_power_action(task, states.REBOOT)
        mock_reboot.assert_called_once()
        self.sock.sendto.assert_not_called()


class HardwareTypeTestCase(WolTestCase):

    def test_container_wol_loads_its_interfaces(self):
        self.config_temp_dir('http_root', group='deploy')
        self.config(enabled_hardware_types=['container-wol'],
                    enabled_power_interfaces=['wol'],
                    enabled_management_interfaces=['noop'],
                    enabled_boot_interfaces=['ipxe'],
                    enabled_deploy_interfaces=['container'],
                    enabled_vendor_interfaces=['container'])
        node = obj_utils.create_test_node(
            self.context, driver='container-wol', name='wol-node',
            uuid='7c0f2a36-5b8e-4b47-9a0e-0a4b7f0f2c11',
            power_interface='wol', management_interface='noop',
            boot_interface='ipxe', deploy_interface='container',
            vendor_interface='container')
        with task_manager.acquire(self.context, node.uuid) as task:
            self.assertIsInstance(task.driver.power,
                                  wol_power.WakeOnLanPower)
            self.assertIsInstance(task.driver.management,
                                  noop_mgmt.NoopManagement)
            self.assertIsInstance(task.driver.boot, ipxe.iPXEBoot)
            self.assertIsInstance(task.driver.deploy,
                                  container_deploy.ContainerDeploy)
            self.assertIsInstance(task.driver.vendor, vendor.ContainerVendor)
