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

"""The lab's Wake-on-LAN listener: magic packets in, domain starts out
(libvirt stood in for); its socket on loopback only."""

import logging
import socket
from unittest import mock

import pytest

from ironic_bmc import wol
from bmc_lab import ironic_conf
from bmc_lab import nodes
from bmc_lab import settings as lab_settings
from bmc_lab.tests import labfixture
from bmc_lab import wol_listener

SENDER = ('127.0.0.1', 40123)


@pytest.fixture
def settings(tmp_path):
    return lab_settings.Settings(state_dir=str(tmp_path), nodes=2)


class FakeLibvirt:

    def __init__(self, states):
        self.states = dict(states)
        self.started = []

    def state(self, domain):
        return self.states[domain]

    def start(self, domain):
        self.started.append(domain)
        self.states[domain] = 'running'
        return True, ''


@pytest.fixture
def libvirt(settings):
    return FakeLibvirt({settings.node_name(0): 'shut-off',
                        settings.node_name(1): 'running'})


@pytest.fixture
def listener(settings, libvirt):
    return wol_listener.Listener(wol_listener.domains_by_mac(settings),
                                 state=libvirt.state, start=libvirt.start)


def test_maps_each_lab_node_mac_to_its_domain(settings):
    assert wol_listener.domains_by_mac(settings) == {
        '52:54:00:bc:00:00': settings.node_name(0),
        '52:54:00:bc:00:01': settings.node_name(1)}


def test_packet_starts_a_shut_off_domain(settings, listener, libvirt,
                                         caplog):
    caplog.set_level(logging.INFO, logger=wol_listener.LOG.name)
    event = listener.handle(wol.magic_packet(settings.node_mac(0)), SENDER)
    assert libvirt.started == [settings.node_name(0)]
    assert event == {'sender': '127.0.0.1:40123',
                     'mac': '52:54:00:bc:00:00',
                     'domain': settings.node_name(0), 'state': 'shut-off',
                     'action': 'started'}
    # Logged, and read back as the e2e test reads the log.
    assert wol_listener.events(caplog.text) == [event]


def test_copies_after_the_start_are_ignored(settings, listener, libvirt):
    packet = wol.magic_packet(settings.node_mac(0))
    actions = [listener.handle(packet, SENDER)['action'] for _ in range(3)]
    assert actions == ['started', 'ignored', 'ignored']
    assert libvirt.started == [settings.node_name(0)]


def test_a_running_domain_ignores_it(settings, listener, libvirt):
    event = listener.handle(wol.magic_packet(settings.node_mac(1)), SENDER)
    assert (event['state'], event['action']) == ('running', 'ignored')
    assert libvirt.started == []


def test_unknown_mac_and_garbage_start_nothing(listener, libvirt, caplog):
    caplog.set_level(logging.INFO, logger=wol_listener.LOG.name)
    unknown = listener.handle(wol.magic_packet('52:54:00:aa:bb:cc'), SENDER)
    garbage = listener.handle(b'\xff' * 6 + b'hello', SENDER)
    assert (unknown['mac'], unknown['domain'], unknown['action']) == (
        '52:54:00:aa:bb:cc', '-', 'ignored')
    assert garbage['mac'] == '-'
    assert garbage['action'] == 'not-a-magic-packet(11-bytes)'
    assert libvirt.started == []
    assert len(wol_listener.events(caplog.text)) == 2


def test_failed_start_is_reported(settings, libvirt):
    libvirt.start = lambda domain: (False, 'error: Failed to start domain')
    listener = wol_listener.Listener(wol_listener.domains_by_mac(settings),
                                     state=libvirt.state,
                                     start=libvirt.start)
    event = listener.handle(wol.magic_packet(settings.node_mac(0)), SENDER)
    assert event['action'] == 'start-failed'


def test_binds_to_loopback_only():
    with mock.patch.object(wol_listener.socket, 'socket',
                           autospec=True) as sock:
        wol_listener.bind(26229)
    sock.assert_called_once_with(socket.AF_INET, socket.SOCK_DGRAM)
    sock.return_value.bind.assert_called_once_with(('127.0.0.1', 26229))


def test_a_real_datagram_over_loopback(settings, listener, libvirt):
    """The whole path on 127.0.0.1 (an ephemeral port): bind, receive."""
    server = wol_listener.bind(0)
    try:
        port = server.getsockname()[1]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.sendto(wol.magic_packet(settings.node_mac(0)),
                          ('127.0.0.1', port))
        server.settimeout(5)
        data, sender = server.recvfrom(wol_listener.MAX_DATAGRAM)
    finally:
        server.close()
    assert listener.handle(data, sender)['action'] == 'started'


def test_ports_have_a_wol_port_per_tier_and_worker():
    ports = {labfixture.ports_for(tier, worker).wol
             for tier in labfixture.PORT_SETS for worker in (0, 1)}
    assert ports == {16229, 17229, 26229, 27229}
    assert lab_settings.Ports().wol == 6229
    assert lab_settings.WOL_LISTENER in lab_settings.Ports().named(1)


def test_saved_settings_without_a_wol_port_load(tmp_path):
    settings = lab_settings.Settings(state_dir=str(tmp_path))
    settings.save()
    loaded = lab_settings.Settings.load(str(tmp_path))
    assert loaded.ports.wol == 6229


def test_enroll_as_container_wol(settings):
    cli = mock.Mock()
    cli.node.list.return_value = []
    nodes.enroll(cli, settings, 1, driver=nodes.WOL_DRIVER,
                 deploy_interface='container')
    fields = cli.node.create.call_args.kwargs
    assert fields['driver'] == 'container-wol'
    assert fields['power_interface'] == 'wol'
    assert fields['management_interface'] == 'noop'
    assert fields['driver_info']['wol_host'] == '127.0.0.1'
    assert fields['driver_info']['wol_port'] == settings.ports.wol
    assert not any(k.startswith('ipmi_') for k in fields['driver_info'])
    cli.port.create.assert_called_once_with(
        address=settings.node_mac(1), node_uuid=mock.ANY)


def test_ironic_conf_enables_container_wol(settings):
    text = ironic_conf.render(settings)
    assert 'container-wol' in text
    assert 'ipmitool,wol,fake' in text
    assert 'ipmitool,noop,fake' in text
