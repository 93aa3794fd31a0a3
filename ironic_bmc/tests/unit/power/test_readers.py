

import struct
import types
from unittest import mock

from pyghmi import exceptions as pyghmi_exc
from pyghmi.ipmi.private import session as ipmi_session
import pytest

from ironic_bmc.power import readers


@pytest.fixture
def command_cls():
    with mock.patch.object(readers.ipmi_command, 'Command',
                           autospec=True) as cls:
        yield cls


def _reader(port=6230, **kw):
    return readers.IPMIDCMIReader('127.0.0.1', port, 'admin', 'password',
                                  **kw)


def test_ipmi_reading(command_cls):
    command_cls.return_value.get_system_power_watts.return_value = 170
    r = _reader()
    assert r.read() == 170.0
    assert r.read() == 170.0
    # One session per reader.
    command_cls.assert_called_once_with(bmc='127.0.0.1', userid='admin',
                                        password='password', port=6230)
    assert r.method == 'ipmi-dcmi'


def test_no_dcmi_is_permanent_with_a_readable_reason(command_cls):
    command_cls.return_value.get_system_power_watts.side_effect = (
        pyghmi_exc.IpmiException('Invalid command', 0xC1))
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert ctx.value.reason == (
        'BMC at 127.0.0.1:6230 does not implement DCMI Get Power Reading '
        '(IPMI completion code 0xc1)')
    assert ctx.value.permanent
    assert str(ctx.value) == ctx.value.reason


def test_other_completion_code_is_transient_and_keeps_the_session(
        command_cls):
    cmd = command_cls.return_value
    cmd.ipmi_session = mock.Mock()
    cmd.get_system_power_watts.side_effect = [
        pyghmi_exc.IpmiException('Node busy', 0xC0), 99]
    r = _reader()
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        r.read()
    assert ctx.value.reason == (
        'BMC at 127.0.0.1:6230 refused DCMI Get Power Reading (IPMI '
        'completion code 0xc0: node busy)')
    assert not ctx.value.permanent
    assert r.read() == 99.0
    assert command_cls.call_count == 1


def test_session_failure_reconnects(command_cls):
    broken, fresh = mock.Mock(), mock.Mock()
    broken.get_system_power_watts.side_effect = pyghmi_exc.IpmiException(
        'Session no longer connected')
    fresh.get_system_power_watts.return_value = 120
    command_cls.side_effect = [broken, fresh]
    r = _reader()
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        r.read()
    assert 'Session no longer connected' in ctx.value.reason
    broken.ipmi_session.logout.assert_called_once_with()
    assert r.read() == 120.0
    assert command_cls.call_count == 2


def test_connect_timeout_reason(command_cls):
    command_cls.side_effect = pyghmi_exc.IpmiException(None)
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert ctx.value.reason == (
        'cannot open an IPMI session with the BMC at 127.0.0.1:6230: no '
        'answer (IPMI session timed out)')
    assert not ctx.value.permanent


def test_rakp_mismatch_reason(command_cls):
    command_cls.side_effect = struct.error('pack expected 32 items')
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader(port=6231, cipher_suite=17).read()
    assert 'may not support IPMI cipher suite 17' in ctx.value.reason


def test_malformed_reply(command_cls):
    command_cls.return_value.get_system_power_watts.side_effect = (
        struct.error('unpack requires a buffer of 2 bytes'))
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert 'malformed DCMI power reading' in ctx.value.reason


def test_unsupported_cipher_suite():
    with pytest.raises(ValueError, match='cipher suite 1 '):
        readers.IPMIDCMIReader('127.0.0.1', cipher_suite=1)


def test_sha1_workaround_applies_only_to_registered_targets(monkeypatch):
    opened = []
    monkeypatch.setattr(readers, '_original_open_rmcpplus_request',
                        lambda s: opened.append(s.attemptedhash))
    readers.IPMIDCMIReader('192.0.2.10', 7001, cipher_suite=3)
    readers.IPMIDCMIReader('192.0.2.10', 7002, cipher_suite=17)
    assert (ipmi_session.Session._open_rmcpplus_request
            is readers._open_rmcpplus_request)
    for port in (7001, 7002, 7003):
        fake = types.SimpleNamespace(bmc='192.0.2.10', port=port,
                                     attemptedhash=256)
        ipmi_session.Session._open_rmcpplus_request(fake)
    assert opened == [1, 256, 256]


def test_workaround_is_installed_once():
    readers.IPMIDCMIReader('192.0.2.11', 7001)
    original = readers._original_open_rmcpplus_request
    readers._install_sha1_rakp_workaround()
    assert readers._original_open_rmcpplus_request is original
    assert original is not readers._open_rmcpplus_request


# --- Redfish -------------------------------------------------------------

class FakeResponse:
    def __init__(self, doc):
        self.doc = doc

    def json(self):
        return self.doc


class FakeConnector:
    def __init__(self, docs):
        self.docs = docs
        self.gets = []

    def get(self, path='', **kw):
        self.gets.append(path)
        if path not in self.docs:
            raise readers.sushy_exc.ResourceNotFoundError(
                method='GET', url=path, response=mock.Mock(
                    status_code=404, json=mock.Mock(return_value={})))
        return FakeResponse(self.docs[path])


@pytest.fixture
def redfish(monkeypatch):
    state = {'docs': {}}

    def connector(url, verify=True, **kw):
        state['url'], state['verify'] = url, verify
        state['conn'] = FakeConnector(state['docs'])
        return state['conn']

    def make_root(url, username=None, password=None, root_prefix=None,
                  verify=True, connector=None):
        state['auth'] = (username, password)
        root = mock.Mock()
        root.get_system.return_value = types.SimpleNamespace(json={
            'Links': {'Chassis': [{'@odata.id': '/redfish/v1/Chassis/1'}]}})
        return root

    monkeypatch.setattr(readers.sushy_connector, 'Connector', connector)
    monkeypatch.setattr(readers.sushy, 'Sushy', make_root)
    return state


CHASSIS = '/redfish/v1/Chassis/1'


def test_redfish_environment_metrics(redfish):
    redfish['docs'].update({
        CHASSIS: {'EnvironmentMetrics': {'@odata.id': CHASSIS + '/EM'},
                  'Power': {'@odata.id': CHASSIS + '/Power'}},
        CHASSIS + '/EM': {'PowerWatts': {'Reading': 312.5}},
    })
    r = readers.RedfishPowerReader('bmc.example:8443', 'sys1', 'u', 'p',
                                   verify_ca=False)
    assert r.read() == 312.5
    assert redfish['url'] == 'https://bmc.example:8443'
    assert redfish['verify'] is False
    assert redfish['auth'] == ('u', 'p')
    n = len(redfish['conn'].gets)
    assert r.read() == 312.5
    assert redfish['conn'].gets[n:] == [CHASSIS + '/EM']
    assert r.method == 'redfish'


def test_redfish_legacy_power_control(redfish):
    redfish['docs'].update({
        CHASSIS: {'Power': {'@odata.id': CHASSIS + '/Power'}},
        CHASSIS + '/Power': {'PowerControl': [
            {'PowerConsumedWatts': None}, {'PowerConsumedWatts': 244}]},
    })
    r = readers.RedfishPowerReader('https://bmc', 'sys1')
    assert r.read() == 244.0


def test_redfish_power_subsystem_sums_supplies(redfish):
    ps = CHASSIS + '/PowerSubsystem'
    redfish['docs'].update({
        CHASSIS: {'PowerSubsystem': {'@odata.id': ps}},
        ps: {'PowerSupplies': {'@odata.id': ps + '/PowerSupplies'}},
        ps + '/PowerSupplies': {'Members': [
            {'@odata.id': ps + '/PowerSupplies/0'},
            {'@odata.id': ps + '/PowerSupplies/1'}]},
        ps + '/PowerSupplies/0': {'Metrics': {'@odata.id': ps + '/m0'}},
        ps + '/PowerSupplies/1': {'Metrics': {'@odata.id': ps + '/m1'}},
        ps + '/m0': {'InputPowerWatts': {'Reading': 100}},
        ps + '/m1': {'InputPowerWatts': {'Reading': 110.5}},
    })
    assert readers.RedfishPowerReader('https://bmc').read() == 210.5


def test_redfish_without_power_is_permanent(redfish):
    redfish['docs'].update({
        CHASSIS: {'Power': {'@odata.id': CHASSIS + '/Power'}},
        CHASSIS + '/Power': {'PowerSupplies': []},
    })
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        readers.RedfishPowerReader('https://bmc', 'sys1').read()
    assert ctx.value.permanent
    assert ctx.value.reason == (
        'the Redfish service at https://bmc system sys1 offers no power '
        'reading for this system (looked at: /redfish/v1/Chassis/1/Power)')


def test_redfish_connection_error_is_transient(redfish, monkeypatch):
    def boom(*a, **kw):
        raise readers.sushy_exc.ConnectionError(url='https://bmc',
                                                error='refused')

    monkeypatch.setattr(readers.sushy, 'Sushy', boom)
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        readers.RedfishPowerReader('https://bmc').read()
    assert not ctx.value.permanent
    assert ctx.value.reason.startswith(
        'cannot reach the Redfish service at https://bmc')


# --- reader_for_node -----------------------------------------------------

def _node(driver, **info):
    return types.SimpleNamespace(uuid='1be26c0b', driver=driver,
                                 driver_info=info)


def test_reader_for_ipmi_node():
    r = readers.reader_for_node(_node(
        'container-ipmi', ipmi_address='127.0.0.1', ipmi_port='6231',
        ipmi_username='admin', ipmi_password='password'))
    assert isinstance(r, readers.IPMIDCMIReader)
    assert r.target == '127.0.0.1:6231'
    assert r.cipher_suite == 3


def test_reader_for_ipmi_node_defaults():
    r = readers.reader_for_node(_node('ipmi', ipmi_address='10.0.0.5',
                                      ipmi_cipher_suite='17'))
    assert (r.port, r.username, r.password, r.cipher_suite) == (
        623, '', '', 17)


def test_reader_for_redfish_node():
    r = readers.reader_for_node(_node(
        'container-redfish', redfish_address='https://bmc:8000',
        redfish_system_id='/redfish/v1/Systems/1', redfish_username='u',
        redfish_password='p', redfish_verify_ca='False'))
    assert isinstance(r, readers.RedfishPowerReader)
    assert r.verify_ca is False
    assert r.system_id == '/redfish/v1/Systems/1'


def test_reader_for_redfish_node_with_ca_bundle():
    r = readers.reader_for_node(_node('redfish', redfish_address='bmc',
                                      redfish_verify_ca='/etc/ca.pem'))
    assert r.verify_ca == '/etc/ca.pem'
    assert r.address == 'https://bmc'


def test_reader_for_node_with_both_follows_the_driver():
    info = dict(ipmi_address='10.0.0.5', redfish_address='https://bmc')
    assert isinstance(readers.reader_for_node(_node('redfish', **info)),
                      readers.RedfishPowerReader)
    assert isinstance(readers.reader_for_node(_node('ipmi', **info)),
                      readers.IPMIDCMIReader)


def test_reader_for_node_without_bmc():
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        readers.reader_for_node(_node('fake-hardware'))
    assert ctx.value.permanent
    assert ctx.value.reason == (
        'node 1be26c0b (driver fake-hardware) has neither ipmi_address nor '
        'redfish_address in its driver_info: BMC power readings need IPMI '
        'DCMI or Redfish')


def test_reader_for_node_bad_cipher_suite():
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        readers.reader_for_node(_node('ipmi', ipmi_address='h',
                                      ipmi_cipher_suite=1))
    assert 'cipher suite 1' in ctx.value.reason


def test_stuck_session_is_broken_and_replaced(command_cls):
    # pyghmi 1.6.19: a session stuck logging in again with no deadline.
    cmd = command_cls.return_value
    cmd.ipmi_session = mock.Mock()
    cmd.get_system_power_watts.side_effect = [
        TypeError("'<' not supported between instances of 'float' and "
                  "'NoneType'"), 120]
    r = _reader()
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        r.read()
    assert 'logging in again' in ctx.value.reason
    assert not ctx.value.permanent
    cmd.ipmi_session._mark_broken.assert_called_once_with()
    assert r.read() == 120.0
    assert command_cls.call_count == 2
