

"""The lab BMC's watts model and DCMI encoding (no libvirt).

Only the IPMI session test opens sockets: UDP on 127.0.0.1.
"""

import socket
import struct
import time

from pyghmi.ipmi.private import session as ipmisession
import pytest
from virtualbmc import vbmc

from bmc_lab import dcmi_bmc
from bmc_lab import dcmi_commands
from bmc_lab import dcmi_power_meter

S = dcmi_power_meter.CpuSample
NS = 10 ** 9


class Probe:
    """Returns queued samples; the last one again when the queue is empty."""

    def __init__(self, *samples):
        self.queue = list(samples)

    def __call__(self):
        if len(self.queue) > 1:
            return self.queue.pop(0)
        return self.queue[0]


def _meter(*samples, **kw):
    m = dcmi_power_meter.CpuPowerMeter(Probe(*samples),
                                       wall_clock=lambda: 1.7e9, **kw)
    return m


def test_power_model():
    m = dcmi_power_meter.PowerModel()
    assert (m.idle_w, m.max_w, m.standby_w) == (90.0, 250.0, 8.0)
    assert m.watts(False, 1.0) == 8.0
    assert m.watts(True, 0.0) == 90.0
    assert m.watts(True, 0.5) == 170.0
    assert m.watts(True, 2.0) == 250.0
    assert m.watts(True, -1.0) == 90.0


@pytest.mark.parametrize('kw', [dict(idle_w=300.0), dict(standby_w=-1.0),
                                dict(max_w=70000.0, idle_w=1.0)])
def test_power_model_refuses_nonsense(kw):
    with pytest.raises(ValueError):
        dcmi_power_meter.PowerModel(**kw)


def test_interval_watts():
    m = _meter(S(0, 0, 2, True))
    # 1 s of CPU over 1 s wall on 2 vCPUs: 50 %.
    assert m.interval_watts(S(0, 0, 2, True), S(1, NS, 2, True)) == 170.0
    assert m.interval_watts(S(0, 0, 1, True), S(1, NS, 1, True)) == 250.0
    assert m.interval_watts(S(0, 0, 1, True), S(1, 0, 1, False)) == 8.0
    # Just started, or restarted (counter went back): idle.
    assert m.interval_watts(S(0, 0, 0, False), S(1, NS, 1, True)) == 90.0
    assert m.interval_watts(S(0, 5 * NS, 1, True),
                            S(1, NS, 1, True)) == 90.0


def test_current_uses_the_last_window():
    samples = [S(0.0, 0, 1, True), S(1.0, 0, 1, True),
               S(1.5, NS // 4, 1, True), S(2.0, NS // 2, 1, True)]
    m = _meter(samples[0], window=1.0)
    # From t=1.0 (1 s before the newest): 0.5 s CPU / 1 s = 50 %.
    assert m.current_watts(samples) == 170.0


def test_current_does_not_reach_across_a_power_on():
    samples = [S(0.0, 0, 1, False), S(0.5, 0, 1, True),
               S(1.0, NS // 2, 1, True)]
    m = _meter(samples[0], window=5.0)
    assert m.current_watts(samples) == 250.0
    assert m.current_watts(samples[:2]) == 90.0
    assert m.current_watts([S(0, 0, 1, False)]) == 8.0
    assert m.current_watts([]) is None


def test_reading_statistics():
    m = _meter(S(0.0, 0, 1, True), S(1.0, 0, 1, True),
               S(2.0, NS, 1, True), S(3.0, NS, 1, False),
               stats_period=60.0)
    for _ in range(3):
        m.sample()
    r = m.reading()
    # Intervals: 0-1 idle 90, 1-2 full 250, 2-3 off 8.
    assert (r.current, r.minimum, r.maximum) == (8, 8, 250)
    assert r.average == round((90 + 250 + 8) / 3)
    assert r.period_ms == 3000
    assert r.timestamp == 1700000000
    assert r.state == 0x40


def test_reading_period_limits_the_statistics():
    m = _meter(S(0.0, 0, 1, True), S(1.0, NS, 1, True),
               S(2.0, NS, 1, True), S(3.0, NS, 1, True))
    for _ in range(3):
        m.sample()
    r = m.reading(period=1.5)
    # Half of the 250 W interval and the 90 W one.
    assert r.maximum == 90 and r.minimum == 90
    assert r.period_ms == 1500


def test_reading_without_samples():
    def broken():
        raise RuntimeError('libvirt down')

    m = dcmi_power_meter.CpuPowerMeter(broken)
    assert m.reading() is None


def test_sampler_thread_start_stop():
    m = _meter(S(0.0, 0, 1, True), sample_interval=0.01)
    m.start()
    m.stop()
    assert m.samples()


def test_encode_power_reading_layout():
    data = dcmi_commands.encode_power_reading(dcmi_commands.Reading(
        current=170, minimum=90, maximum=250, average=160,
        timestamp=0x01020304, period_ms=60000))
    assert data[0] == 0xDC
    assert len(data) == 18
    assert struct.unpack('<HHHHIIB', bytes(data[1:])) == (
        170, 90, 250, 160, 0x01020304, 60000, 0x40)


@pytest.mark.parametrize('byte,seconds', [(0x05, 5), (0x41, 60),
                                          (0x81, 3600), (0xC1, 86400)])
def test_decode_rolling_period(byte, seconds):
    assert dcmi_commands.decode_rolling_period(byte) == seconds


@pytest.fixture
def meter():
    m = _meter(S(0.0, 0, 2, True), S(1.0, NS, 2, True))
    m.sample()
    return m


def test_handle_power_reading(meter):
    code, data = dcmi_commands.handle_dcmi(0x02, [0xDC, 0x01, 0x00, 0x00],
                                           meter)
    assert code == 0
    assert data[0] == 0xDC
    assert struct.unpack('<H', bytes(data[1:3]))[0] == 170


def test_handle_enhanced_power_reading(meter):
    code, data = dcmi_commands.handle_dcmi(0x02, [0xDC, 0x02, 0x05, 0x00],
                                           meter)
    assert code == 0
    assert len(data) == 18


@pytest.mark.parametrize('command,data,code', [
    (0x02, [0xDC, 0x07, 0, 0], 0xCC),      # unknown mode
    (0x02, [0xDC, 0x01], 0xCC),            # short request
    (0x02, [0xDC, 0x02, 0x00, 0], 0xCC),   # zero rolling period
    (0x02, [0x00, 0x01, 0, 0], 0xC1),      # not the DCMI group
    (0x03, [0xDC, 0x00], 0xC1),            # power limit: not implemented
    (0x01, [0xDC, 0x09], 0x80),            # unknown capability parameter
])
def test_handle_bad_requests(meter, command, data, code):
    assert dcmi_commands.handle_dcmi(command, data, meter)[0] == code


def test_handle_capabilities(meter):
    code, data = dcmi_commands.handle_dcmi(0x01, [0xDC, 0x01], meter)
    assert code == 0
    assert data[:4] == [0xDC, 0x01, 0x05, 0x02]
    assert data[5] & 0x01  # power management available
    code, data = dcmi_commands.handle_dcmi(0x01, [0xDC, 0x05], meter)
    assert data[4] == len(dcmi_commands.ROLLING_PERIODS)


def test_no_sample_yet_means_busy():
    def broken():
        raise RuntimeError('libvirt down')

    meter = dcmi_power_meter.CpuPowerMeter(broken)
    assert dcmi_commands.handle_dcmi(0x02, [0xDC, 0x01, 0, 0],
                                     meter) == (0xC0, [])
    assert dcmi_commands.CC_NODE_BUSY == vbmc.IPMI_COMMAND_NODE_BUSY


class _Session:
    def __init__(self):
        self.sent = []

    def send_ipmi_response(self, data, code):
        self.sent.append((code, data))


def test_bmc_answers_dcmi_with_its_meter(meter):
    b = object.__new__(dcmi_bmc.DCMIVirtualBMC)
    b.meter = meter
    session = _Session()
    b.handle_raw_request({'netfn': 0x2C, 'command': 0x02,
                          'data': [0xDC, 0x01, 0x00, 0x00]}, session)
    [(code, data)] = session.sent
    assert code == 0
    assert struct.unpack('<H', bytes(data[1:3]))[0] == 170


def test_cli_arguments():
    args = dcmi_bmc._parse_args([
        '--domain', 'n0', '--port', '6230', '--idle-watts', '50',
        '--max-watts', '400', '--standby-watts', '5'])
    assert (args.domain, args.port, args.address) == ('n0', 6230,
                                                      '127.0.0.1')
    assert (args.idle_watts, args.max_watts, args.standby_watts) == (
        50.0, 400.0, 5.0)
    assert args.libvirt_uri == 'qemu:///system'


def test_cli_refuses_a_bad_model():
    with pytest.raises(SystemExit) as ctx:
        dcmi_bmc.main(['--domain', 'x', '--idle-watts', '500'])
    assert 'power model' in str(ctx.value.code)


# --- IPMI sessions: what ipmitool -I lanplus sends, by hand ---------------


def _checksum(*data):
    return -sum(data) & 0xFF


def _get_channel_auth_cap():
    """Get Channel Authentication Capabilities (channel 0Eh, IPMI v2.0
    extended data, administrator) as IPMI 1.5: no auth, sequence number 0,
    session id 0."""
    head = [0x20, 0x06 << 2]
    body = [0x81, 0x00, 0x38, 0x8E, 0x04]
    msg = head + [_checksum(*head)] + body + [_checksum(*body)]
    return bytes([0x06, 0x00, 0xFF, 0x07, 0x00] + [0] * 8 + [len(msg)]
                 + msg)


def _open_session_request():
    """RMCP+ Open Session Request (payload type 10h), cipher suite 3."""
    data = bytes([0x01, 0x04, 0x00, 0x00]) + b'\xa4\xa3\xa2\xa0' + bytes(
        [0x00, 0x00, 0x00, 0x08, 0x01, 0x00, 0x00, 0x00,
         0x01, 0x00, 0x00, 0x08, 0x01, 0x00, 0x00, 0x00,
         0x02, 0x00, 0x00, 0x08, 0x01, 0x00, 0x00, 0x00])
    return (bytes([0x06, 0x00, 0xFF, 0x07, 0x06, 0x10]) + bytes(8)
            + struct.pack('<H', len(data)) + data)


def _free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _answer(client, timeout=10):
    """The BMC's next packet to ``client``, running pyghmi's event loop
    (what ``listen`` does) until it comes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return bytearray(client.recv(3000))
        except BlockingIOError:
            ipmisession.Session.wait_for_rsp(0.05)
    pytest.fail('the BMC did not answer')


@pytest.fixture
def udp_bmc():
    """The real DCMIVirtualBMC on a free 127.0.0.1 port (a fake meter:
    libvirt is never asked) and a client socket; the test drives the
    event loop.  pyghmi's process-wide state is put back afterwards."""
    port = _free_udp_port()
    b = dcmi_bmc.DCMIVirtualBMC(
        'admin', 'password', port, '127.0.0.1', 'n0', 'test:///default',
        meter=_meter(S(0.0, 0, 1, True)))
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.bind(('127.0.0.1', 0))
    client.setblocking(False)
    addr = client.getsockname()
    yield b, client, port
    client.close()
    ipmisession.Session.bmc_handlers.pop(addr, None)
    ipmisession.Session.bmc_handlers.pop(b.serversocket, None)
    ipmisession.sessionqueue.clear()
    ipmisession.iosockets.remove(b.serversocket)
    b.serversocket.close()


def test_packet_for_a_stale_session_is_dropped(udp_bmc, caplog):
    """A new ipmitool on the source port of an old session: its first
    request and a retransmission of it are both queued to the old session
    before the loop runs.  pyghmi hands the first to the server and calls
    the missing ServerSession.sessionless_data for the second; the BMC
    drops it and keeps answering."""
    b, client, port = udp_bmc
    bmc_addr = ('127.0.0.1', port)
    # An earlier client's session on this source port (never expires).
    client.sendto(_open_session_request(), bmc_addr)
    assert _answer(client)[5] == 0x11  # Open Session Response
    stale = ipmisession.Session.bmc_handlers[client.getsockname()][port]
    client.sendto(_get_channel_auth_cap(), bmc_addr)
    client.sendto(_get_channel_auth_cap(), bmc_addr)
    deadline = time.monotonic() + 10
    while len(stale.pktqueue) < 2:
        assert time.monotonic() < deadline, 'packets not queued'
        time.sleep(0.01)
    ipmisession.Session.wait_for_rsp(0)
    assert 'queued to a stale IPMI session' in caplog.text
    answer = _answer(client)
    assert (answer[19], answer[20]) == (0x38, 0x00)  # auth caps, success
    # Still serving: the next request and a new session on that port.
    client.sendto(_get_channel_auth_cap(), bmc_addr)
    answer = _answer(client)
    assert (answer[19], answer[20]) == (0x38, 0x00)
    client.sendto(_open_session_request(), bmc_addr)
    assert _answer(client)[5] == 0x11
    assert ipmisession.Session.bmc_handlers[client.getsockname()][port] \
        is not stale
