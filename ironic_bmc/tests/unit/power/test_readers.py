

import types
from unittest import mock

from ironic.conf import CONF
from ironic.drivers.modules import ipmitool
from oslo_concurrency import processutils
import pytest

from ironic_bmc.power import readers


def _node(driver='ipmi', uuid='1be26c0b-6a0e-4bd8-9b5e-3f3a3c0c0001',
          **info):
    return types.SimpleNamespace(uuid=uuid, driver=driver, driver_info=info,
                                 driver_internal_info={})


IPMI_INFO = dict(ipmi_address='127.0.0.1', ipmi_port='6230',
                 ipmi_username='admin', ipmi_password='password')


@pytest.fixture
def execute():
    """Ironic's command runner, as ipmitool._exec_ipmitool calls it."""
    CONF.set_override('min_command_interval', 1, group='ipmi')
    CONF.set_override('command_retry_timeout', 1, group='ipmi')
    ipmitool.LAST_CMD_TIME.clear()
    with mock.patch.object(ipmitool.utils, 'execute', autospec=True) as m:
        yield m
    CONF.clear_override('min_command_interval', group='ipmi')
    CONF.clear_override('command_retry_timeout', group='ipmi')


def _reader(**info):
    return readers.reader_for_node(_node(**dict(IPMI_INFO, **info)))


READING = """
    Instantaneous power reading:                   170 Watts
    Minimum during sampling period:                 90 Watts
    Maximum during sampling period:                250 Watts
    Average power reading over sample period:      130 Watts
    IPMI timestamp:                           Sun Nov 22 12:00:00 2026
    Sampling period:                          00000060 Seconds.
    Power reading state is:                   activated
"""


def test_ipmi_reading_through_ironics_ipmitool(execute):
    execute.return_value = (READING, '')
    r = _reader()
    assert r.read() == 170.0
    argv = execute.call_args[0]
    assert argv[:3] == ('ipmitool', '-I', 'lanplus')
    assert argv[-3:] == ('dcmi', 'power', 'reading')
    assert ('-H', '127.0.0.1') == argv[3:5] and '6230' in argv
    # Ironic's default privilege level, its password file.
    assert argv[argv.index('-L') + 1] == 'ADMINISTRATOR'
    assert 'password' not in argv and '-f' in argv
    assert execute.call_args[1]['timeout'] == 1
    assert r.method == 'ipmi-dcmi'
    assert r.target == '127.0.0.1:6230'


def test_ipmi_reading_honours_the_nodes_ipmi_settings(execute,
                                                      monkeypatch):
    """What the node's power interface uses, the reading uses too."""
    monkeypatch.setattr(ipmitool, 'SINGLE_BRIDGE_SUPPORT', True)
    execute.return_value = (READING, '')
    _reader(ipmi_priv_level='OPERATOR', ipmi_protocol_version='1.5',
            ipmi_bridging='single', ipmi_target_channel='7',
            ipmi_target_address='0x72', ipmi_hex_kg_key='00112233').read()
    argv = execute.call_args[0]
    assert argv[1:3] == ('-I', 'lan')
    assert argv[argv.index('-L') + 1] == 'OPERATOR'
    assert argv[argv.index('-y') + 1] == '00112233'
    assert argv[argv.index('-b') + 1] == '7'
    assert argv[argv.index('-t') + 1] == '0x72'
    _reader(ipmi_cipher_suite='17').read()
    argv = execute.call_args[0]
    assert argv[argv.index('-C') + 1] == '17'


def test_ipmi_readings_keep_min_command_interval(execute):
    """Ironic's per-BMC spacing applies across its calls and ours."""
    execute.return_value = (READING, '')
    r = _reader()
    with mock.patch.object(ipmitool.time, 'sleep') as sleep:
        r.read()
        r.read()
    assert sleep.call_count == 1
    assert 0 < sleep.call_args[0][0] <= 1


def test_no_dcmi_is_permanent_with_a_readable_reason(execute):
    execute.side_effect = processutils.ProcessExecutionError(
        stderr='DCMI request failed because: Invalid command (c1)',
        exit_code=1)
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert ctx.value.permanent
    assert ctx.value.reason == (
        'BMC at 127.0.0.1:6230 does not implement DCMI Get Power Reading '
        '(DCMI request failed because: Invalid command (c1))')


def test_session_failure_is_transient(execute):
    execute.side_effect = processutils.ProcessExecutionError(
        stderr='Error: Unable to establish IPMI v2 / RMCP+ session',
        exit_code=1)
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert not ctx.value.permanent
    assert ctx.value.reason == (
        'DCMI power reading from the BMC at 127.0.0.1:6230 failed: Error: '
        'Unable to establish IPMI v2 / RMCP+ session')


def test_timeout_is_transient(execute):
    execute.side_effect = readers.subprocess.TimeoutExpired('ipmitool', 1)
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert not ctx.value.permanent
    assert 'within 1s' in ctx.value.reason


def test_missing_ipmitool_is_permanent(execute):
    execute.side_effect = FileNotFoundError('ipmitool')
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert ctx.value.permanent


def test_answer_without_a_reading(execute):
    execute.return_value = ('Power reading state is: deactivated\n', '')
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader().read()
    assert not ctx.value.permanent
    assert 'without a reading (Power reading state is: deactivated)' in (
        ctx.value.reason)


@pytest.mark.parametrize('info, words', [
    ({'ipmi_priv_level': 'ROOT'}, 'privilege level value:ROOT'),
    ({'ipmi_port': 'http'}, 'ipmi_port'),
    ({'ipmi_protocol_version': '3.0'}, 'protocol'),
    ({'ipmi_bridging': 'triple'}, 'triple'),
    ({'ipmi_protocol_version': '1.5', 'ipmi_cipher_suite': '3'},
     'Cipher suites cannot be used with IPMI 1.5'),
])
def test_bad_ipmi_driver_info_is_permanent_and_named(info, words):
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _reader(**info)
    assert ctx.value.permanent
    assert ctx.value.reason.startswith('node 1be26c0b-')
    assert words in ctx.value.reason


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
    """Ironic's Redfish connection (its session cache) to a fake BMC."""
    state = {'docs': {}, 'connects': 0}

    def get_system(node):
        readers.redfish_utils.parse_driver_info(node)
        state['connects'] += 1
        if state.get('error'):
            raise state['error']
        state['conn'] = FakeConnector(state['docs'])
        return types.SimpleNamespace(_conn=state['conn'], json={
            'Links': {'Chassis': [{'@odata.id': '/redfish/v1/Chassis/1'}]}})

    monkeypatch.setattr(readers.redfish_utils, 'get_system', get_system)
    return state


def _redfish(**info):
    info.setdefault('redfish_address', 'https://bmc')
    return readers.reader_for_node(_node('redfish', **info))


CHASSIS = '/redfish/v1/Chassis/1'


def test_redfish_environment_metrics(redfish):
    redfish['docs'].update({
        CHASSIS: {'EnvironmentMetrics': {'@odata.id': CHASSIS + '/EM'},
                  'Power': {'@odata.id': CHASSIS + '/Power'}},
        CHASSIS + '/EM': {'PowerWatts': {'Reading': 312.5}},
    })
    r = _redfish(redfish_address='bmc.example:8443',
                 redfish_system_id='/redfish/v1/Systems/1')
    assert r.read() == 312.5
    assert r.target == ('https://bmc.example:8443 system '
                        '/redfish/v1/Systems/1')
    n = len(redfish['conn'].gets)
    assert r.read() == 312.5
    assert redfish['conn'].gets[n:] == [CHASSIS + '/EM']
    assert redfish['connects'] == 1
    assert r.method == 'redfish'


def test_redfish_legacy_power_control(redfish):
    redfish['docs'].update({
        CHASSIS: {'Power': {'@odata.id': CHASSIS + '/Power'}},
        CHASSIS + '/Power': {'PowerControl': [
            {'PowerConsumedWatts': None}, {'PowerConsumedWatts': 244}]},
    })
    assert _redfish().read() == 244.0


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
    assert _redfish().read() == 210.5


def test_redfish_without_power_is_permanent(redfish):
    redfish['docs'].update({
        CHASSIS: {'Power': {'@odata.id': CHASSIS + '/Power'}},
        CHASSIS + '/Power': {'PowerSupplies': []},
    })
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _redfish(redfish_system_id='/redfish/v1/Systems/1').read()
    assert ctx.value.permanent
    assert ctx.value.reason == (
        'the Redfish service at https://bmc system /redfish/v1/Systems/1 '
        'offers no power reading for this system (looked at: '
        '/redfish/v1/Chassis/1/Power)')


def test_redfish_connection_error_is_transient(redfish):
    redfish['error'] = readers.exception.RedfishConnectionError(
        node='n', error='refused')
    r = _redfish()
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        r.read()
    assert not ctx.value.permanent
    assert ctx.value.reason.startswith(
        'cannot reach the Redfish service at https://bmc')
    # The next reading connects again.
    redfish['error'] = None
    redfish['docs'][CHASSIS] = {'Power': {'@odata.id': CHASSIS + '/P'}}
    redfish['docs'][CHASSIS + '/P'] = {'PowerControl': [
        {'PowerConsumedWatts': 90}]}
    assert r.read() == 90.0
    assert redfish['connects'] == 2


def test_bad_redfish_driver_info_is_permanent_and_named():
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        _redfish(redfish_auth_type='kerberos')
    assert ctx.value.permanent
    assert 'kerberos' in ctx.value.reason


# --- reader_for_node -----------------------------------------------------

def test_reader_for_ipmi_node():
    r = readers.reader_for_node(_node('container-ipmi', **IPMI_INFO))
    assert isinstance(r, readers.IPMIDCMIReader)
    assert r.target == '127.0.0.1:6230'


def test_reader_for_redfish_node():
    r = readers.reader_for_node(_node(
        'container-redfish', redfish_address='https://bmc:8000',
        redfish_system_id='/redfish/v1/Systems/1', redfish_username='u',
        redfish_password='p', redfish_verify_ca='False'))
    assert isinstance(r, readers.RedfishPowerReader)
    assert r.system_id == '/redfish/v1/Systems/1'
    assert r.address == 'https://bmc:8000'


def test_reader_for_node_with_both_follows_the_driver():
    info = dict(IPMI_INFO, redfish_address='https://bmc')
    assert isinstance(readers.reader_for_node(_node('redfish', **info)),
                      readers.RedfishPowerReader)
    assert isinstance(readers.reader_for_node(_node('ipmi', **info)),
                      readers.IPMIDCMIReader)


def test_reader_for_node_without_bmc():
    with pytest.raises(readers.PowerReadingUnavailable) as ctx:
        readers.reader_for_node(_node('fake-hardware', uuid='1be26c0b'))
    assert ctx.value.permanent
    assert ctx.value.reason == (
        'node 1be26c0b (driver fake-hardware) has neither ipmi_address nor '
        'redfish_address in its driver_info: BMC power readings need IPMI '
        'DCMI or Redfish')
