

import types
from unittest import mock

import pytest

from ironic_bmc.power import readers


def _run(stdout='', stderr='', returncode=0):
    return mock.Mock(stdout=stdout, stderr=stderr, returncode=returncode)


@pytest.fixture
def run():
    with mock.patch.object(readers.subprocess, 'run', autospec=True) as m:
        yield m


def _reader(port=6230, **kw):
    return readers.IPMIDCMIReader('127.0.0.1', port, 'admin', 'password',
                                  **kw)


READING = """
    Instantaneous power reading:                   170 Watts
    Minimum during sampling period:                 90 Watts
    Maximum during sampling period:                250 Watts
    Average power reading over sample period:      130 Watts
    IPMI timestamp:                           Sun Nov 22 12:00:00 2026
    Sampling period:                          00000060 Seconds.
    Power reading state is:                   activated
"""


def test_ipmi_reading(run):
    run.return_value = _run(READING)
    r = _reader()
    assert r.read() == 170.0
    argv = run.call_args[0][0]
    assert argv[:3] == ['ipmitool', '-I', 'lanplus']
    assert argv[-3:] == ['dcmi', 'power', 'reading']
    assert ['-H', '127.0.0.1'] == argv[3:5] and '6230' in argv
    # The password goes through the environment, not the command line.
    assert 'password' not in argv and '-E' in argv
    assert run.call_args[1]['env']['IPMI_PASSWORD'] == 'password'
    assert r.method == 'ipmi-dcmi'


def test_no_dcmi_is_permanent_with_a_readable_reason(run):
    run.return_value = _run(
        stderr='DCMI request failed because: Invalid command (c1)',
        returncode=1)
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert ctx.value.permanent
    assert ctx.value.reason.startswith(
        'BMC at 127.0.0.1:6230 does not implement DCMI Get Power Reading')
    assert 'Invalid command (c1)' in ctx.value.reason


def test_session_failure_is_transient(run):
    run.return_value = _run(
        stderr='Error: Unable to establish IPMI v2 / RMCP+ session',
        returncode=1)
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert not ctx.value.permanent
    assert 'RMCP+ session' in ctx.value.reason


def test_timeout_is_transient(run):
    run.side_effect = readers.subprocess.TimeoutExpired('ipmitool', 10)
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert not ctx.value.permanent
    assert 'within 10s' in ctx.value.reason


def test_missing_ipmitool_is_permanent(run):
    run.side_effect = FileNotFoundError('ipmitool')
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert ctx.value.permanent


def test_unsupported_cipher_suite():
    with pytest.raises(ValueError):
        _reader(cipher_suite=1)


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

