

"""The lab BMC's watts model and DCMI encoding (no sockets, no libvirt)."""

import struct

import pytest

from bmc_lab import dcmi_bmc

S = dcmi_bmc.CpuSample
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
    m = dcmi_bmc.CpuPowerMeter(Probe(*samples), wall_clock=lambda: 1.7e9,
                               **kw)
    return m


def test_power_model():
    m = dcmi_bmc.PowerModel()
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
        dcmi_bmc.PowerModel(**kw)


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

    m = dcmi_bmc.CpuPowerMeter(broken)
    assert m.reading() is None


def test_sampler_thread_start_stop():
    m = _meter(S(0.0, 0, 1, True), sample_interval=0.01)
    m.start()
    m.stop()
    assert m.samples()


def test_encode_power_reading_layout():
    data = dcmi_bmc.encode_power_reading(dcmi_bmc.Reading(
        current=170, minimum=90, maximum=250, average=160,
        timestamp=0x01020304, period_ms=60000))
    assert data[0] == 0xDC
    assert len(data) == 18
    assert struct.unpack('<HHHHIIB', bytes(data[1:])) == (
        170, 90, 250, 160, 0x01020304, 60000, 0x40)


@pytest.mark.parametrize('byte,seconds', [(0x05, 5), (0x41, 60),
                                          (0x81, 3600), (0xC1, 86400)])
def test_decode_rolling_period(byte, seconds):
    assert dcmi_bmc.decode_rolling_period(byte) == seconds


@pytest.fixture
def bmc():
    b = object.__new__(dcmi_bmc.DCMIVirtualBMC)
    b.meter = _meter(S(0.0, 0, 2, True), S(1.0, NS, 2, True))
    b.meter.sample()
    return b


def test_handle_power_reading(bmc):
    code, data = bmc.handle_dcmi(0x02, [0xDC, 0x01, 0x00, 0x00])
    assert code == 0
    assert data[0] == 0xDC
    assert struct.unpack('<H', bytes(data[1:3]))[0] == 170


def test_handle_enhanced_power_reading(bmc):
    code, data = bmc.handle_dcmi(0x02, [0xDC, 0x02, 0x05, 0x00])
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
def test_handle_bad_requests(bmc, command, data, code):
    assert bmc.handle_dcmi(command, data)[0] == code


def test_handle_capabilities(bmc):
    code, data = bmc.handle_dcmi(0x01, [0xDC, 0x01])
    assert code == 0
    assert data[:4] == [0xDC, 0x01, 0x05, 0x02]
    assert data[5] & 0x01  # power management available
    code, data = bmc.handle_dcmi(0x01, [0xDC, 0x05])
    assert data[4] == len(dcmi_bmc.ROLLING_PERIODS)


def test_no_sample_yet_means_busy():
    b = object.__new__(dcmi_bmc.DCMIVirtualBMC)

    def broken():
        raise RuntimeError('libvirt down')

    b.meter = dcmi_bmc.CpuPowerMeter(broken)
    assert b.handle_dcmi(0x02, [0xDC, 0x01, 0, 0]) == (0xC0, [])


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
