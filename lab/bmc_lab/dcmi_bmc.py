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

"""A virtual BMC for lab nodes that also answers DCMI power readings.

virtualbmc maps IPMI chassis and boot-device commands to a libvirt domain
but answers no DCMI (netfn 0x2C gets completion code 0xC1), so a lab node
has no BMC power reading.  :class:`DCMIVirtualBMC` subclasses virtualbmc's
``VirtualBMC`` -- power on/off/status/reset and boot-device get/set stay
exactly virtualbmc's, driving libvirt -- and adds:

* **DCMI Get Power Reading** (netfn 0x2C, cmd 0x02, group extension
  0xDC), modes 01h (system power statistics) and 02h (enhanced: rolling
  average over the period in request byte 3).  Response bytes after the
  completion code: ``DCh``, current W, minimum W, maximum W, average W
  (each 16-bit LSB first), IPMI timestamp (32-bit, seconds since the
  epoch), statistics reporting period in ms (32-bit), reading state
  (``40h`` = power measurement active).
* **DCMI Get Capabilities Info** (cmd 0x01), parameters 1 (supported
  capabilities: chassis power, power management, primary LAN
  out-of-band), 2 (mandatory attributes), 3 (power management by the BMC
  at 20h), 4 (LAN channel 1) and 5 (rolling average periods), laid out
  as ``ipmitool dcmi discover`` 1.8.19 decodes them.

Watts model (documented, deterministic, driven by the VM's real CPU use)
------------------------------------------------------------------------
A background thread samples the domain every ``sample_interval`` seconds
(default 0.25 s), and every request takes one more sample.  A sample is
(monotonic time, cumulative CPU time of the domain in ns from
``virDomainGetInfo`` -- the "CPU time" of ``virsh dominfo`` --, number of
vCPUs, whether the domain is active).  Over an interval between two samples
a and b of a running domain::

    util  = (cpu_ns(b) - cpu_ns(a)) / 1e9 / (t(b) - t(a)) / vcpus
    util  = min(max(util, 0), 1)
    watts = idle_w + (max_w - idle_w) * util

and ``watts = standby_w`` while the domain is off (a powered-off server
still feeds its BMC).  An interval in which the domain was just started
(or restarted: the CPU counter went back) counts as ``idle_w``.

* *current* = the model over the last ``window`` seconds (default 1 s):
  from the newest sample at least ``window`` old (or the oldest one since
  the domain last started) to a sample taken at request time;
* *minimum / maximum / average* = over the per-interval watts of the
  last ``stats_period`` seconds (default 60 s, or the rolling period a
  mode-02h request asks for), the average weighted by time; the
  reported period is the span actually covered, in ms.

Defaults: idle 90 W, max 250 W, standby 8 W, per node (configurable).
On a QEMU TCG node one vCPU is one host thread, so util tracks how busy
the guest keeps its (emulated) CPUs.

Run one process per node, in place of ``vbmcd``::

    python -m bmc_lab.dcmi_bmc --domain NAME --port 6230 \\
        --address 127.0.0.1 --username admin --password password \\
        --libvirt-uri qemu:///system

It serves until SIGTERM (or SIGINT) and then exits 0.
"""

import argparse
import collections
import dataclasses
import logging
import signal
import struct
import sys
import threading
import time

import libvirt
from pyghmi.ipmi.private import serversession
from virtualbmc import vbmc

LOG = logging.getLogger(__name__)

NETFN_DCMI = 0x2C
DCMI_GROUP_EXTENSION = 0xDC
CMD_GET_CAPABILITIES = 0x01
CMD_GET_POWER_READING = 0x02

CC_OK = 0x00
#: DCMI: parameter not supported.
CC_PARAMETER_NOT_SUPPORTED = 0x80
CC_INVALID_COMMAND = 0xC1
CC_INVALID_DATA = 0xCC
CC_UNSPECIFIED = 0xFF

MODE_SYSTEM_POWER_STATISTICS = 0x01
MODE_ENHANCED_STATISTICS = 0x02

#: Reading state byte: bit 6 = power measurement active.
STATE_ACTIVE = 0x40

#: DCMI conformance 1.5, parameter revision 02h.
DCMI_VERSION = (0x01, 0x05)
DCMI_PARAMETER_REVISION = 0x02

#: Libvirt domain states that mean "no power to the server board".
_OFF_STATES = (libvirt.VIR_DOMAIN_NOSTATE, libvirt.VIR_DOMAIN_SHUTOFF,
               libvirt.VIR_DOMAIN_CRASHED)

_UINT16_MAX = 0xFFFF

#: Rolling average periods advertised for mode 02h (bits 7:6 unit:
#: 00 s, 01 min, 10 h): 5 s, 15 s, 30 s, 1, 5, 15, 30 min, 1 h.
ROLLING_PERIODS = (0x05, 0x0F, 0x1E, 0x41, 0x45, 0x4F, 0x5E, 0x81)


@dataclasses.dataclass(frozen=True)
class PowerModel:
    """Watts as a linear function of CPU utilisation."""

    idle_w: float = 90.0
    max_w: float = 250.0
    standby_w: float = 8.0

    def __post_init__(self):
        if not (0 <= self.standby_w and 0 <= self.idle_w <= self.max_w):
            raise ValueError('the power model needs 0 <= standby and '
                             '0 <= idle <= max watts (got standby %s, '
                             'idle %s, max %s)' % (self.standby_w,
                                                   self.idle_w, self.max_w))
        if self.max_w > _UINT16_MAX:
            raise ValueError('DCMI reports watts in 16 bits; max %s W is '
                             'too large' % self.max_w)

    def watts(self, running, util=0.0):
        if not running:
            return float(self.standby_w)
        util = min(max(util, 0.0), 1.0)
        return self.idle_w + (self.max_w - self.idle_w) * util


@dataclasses.dataclass(frozen=True)
class CpuSample:
    t: float            # time.monotonic()
    cpu_ns: int         # cumulative CPU time of the domain
    vcpus: int
    running: bool


@dataclasses.dataclass(frozen=True)
class Reading:
    current: int
    minimum: int
    maximum: int
    average: int
    timestamp: int      # seconds since the epoch
    period_ms: int
    state: int = STATE_ACTIVE


class CpuPowerMeter:
    """A ring of CPU samples of one domain and the watts they imply.

    ``probe`` returns a :class:`CpuSample` (or raises); all methods are
    thread-safe.  ``clock`` is ``time.monotonic`` except in tests.
    """

    def __init__(self, probe, model=None, window=1.0, stats_period=60.0,
                 sample_interval=0.25, clock=time.monotonic,
                 wall_clock=time.time, max_history=None):
        self.probe = probe
        self.model = model or PowerModel()
        self.window = float(window)
        self.stats_period = float(stats_period)
        self.sample_interval = float(sample_interval)
        self.clock = clock
        self.wall_clock = wall_clock
        if max_history is None:
            # Enough for the longest rolling period a request may ask for
            # (one hour), plus slack.
            max_history = int(max(self.stats_period, 3600.0)
                              / self.sample_interval) + 16
        self._ring = collections.deque(maxlen=max_history)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._last_error = None

    # --- sampling ------------------------------------------------------

    def sample(self):
        """Take one sample; False (and logged once) if the probe failed."""
        try:
            s = self.probe()
        except Exception as exc:
            msg = str(exc)
            if msg != self._last_error:
                LOG.warning('cannot sample the domain\'s CPU time: %s', msg)
                self._last_error = msg
            return False
        if self._last_error is not None:
            LOG.info('sampling the domain\'s CPU time works again')
            self._last_error = None
        with self._lock:
            if self._ring and s.t <= self._ring[-1].t:
                return True
            self._ring.append(s)
        return True

    def start(self):
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='dcmi-cpu-sampler')
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.sample_interval)

    def samples(self):
        with self._lock:
            return list(self._ring)

    # --- the model -------------------------------------------------------

    def interval_watts(self, a, b):
        """Watts over the interval from sample ``a`` to sample ``b``."""
        if not b.running:
            return self.model.watts(False)
        if (not a.running or b.cpu_ns < a.cpu_ns or b.t <= a.t
                or b.vcpus <= 0):
            # Just powered on (or restarted): nothing to divide by yet.
            return self.model.watts(True, 0.0)
        util = (b.cpu_ns - a.cpu_ns) / 1e9 / (b.t - a.t) / b.vcpus
        return self.model.watts(True, util)

    def current_watts(self, samples=None):
        samples = self.samples() if samples is None else samples
        if not samples:
            return None
        last = samples[-1]
        if not last.running:
            return self.model.watts(False)
        # Walk back over the run the newest sample belongs to.
        start = len(samples) - 1
        while start > 0:
            prev, cur = samples[start - 1], samples[start]
            if not prev.running or prev.cpu_ns > cur.cpu_ns:
                break
            start -= 1
            if last.t - prev.t >= self.window:
                break
        return self.interval_watts(samples[start], last)

    def reading(self, period=None):
        """A :class:`Reading` (takes a fresh sample first), or None."""
        self.sample()
        samples = self.samples()
        if not samples:
            return None
        period = self.stats_period if period is None else float(period)
        current = self.current_watts(samples)
        last = samples[-1]
        first_t = last.t - period
        values = []
        weighted = 0.0
        span = 0.0
        covered_from = last.t
        for a, b in zip(samples, samples[1:], strict=False):
            if b.t <= first_t:
                continue
            w = self.interval_watts(a, b)
            dt = b.t - max(a.t, first_t)
            values.append(w)
            weighted += w * dt
            span += dt
            covered_from = min(covered_from, max(a.t, first_t))
        average = weighted / span if span > 0 else current
        values.append(current)
        return Reading(
            current=_watts16(current), minimum=_watts16(min(values)),
            maximum=_watts16(max(values)), average=_watts16(average),
            timestamp=int(self.wall_clock()) & 0xFFFFFFFF,
            period_ms=int(round((last.t - covered_from) * 1000)))


def _watts16(w):
    return max(0, min(_UINT16_MAX, int(round(w))))


def decode_rolling_period(byte):
    """Seconds of a DCMI rolling-average period byte (bits 7:6 = unit)."""
    unit = (byte >> 6) & 0x3
    value = byte & 0x3F
    return value * (1, 60, 3600, 86400)[unit]


def encode_power_reading(reading):
    """Response data (after the completion code) of Get Power Reading."""
    return ([DCMI_GROUP_EXTENSION]
            + list(struct.pack('<HHHHIIB', reading.current, reading.minimum,
                               reading.maximum, reading.average,
                               reading.timestamp, reading.period_ms,
                               reading.state)))


def libvirt_probe(uri, domain_name, clock=time.monotonic):
    """A probe for :class:`CpuPowerMeter` over a read-only connection.

    The connection is kept and reopened after an error; a domain that does
    not exist (e.g. while the lab redefines it) reads as powered off.
    """
    state = {'conn': None}

    def probe():
        conn = state['conn']
        if conn is None:
            conn = state['conn'] = libvirt.openReadOnly(uri)
        try:
            try:
                dom = conn.lookupByName(domain_name)
            except libvirt.libvirtError as exc:
                if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                    return CpuSample(clock(), 0, 0, False)
                raise
            t0 = clock()
            info = dom.info()
            t = (t0 + clock()) / 2.0
            return CpuSample(t=t, cpu_ns=int(info[4]),
                             vcpus=int(info[3]),
                             running=info[0] not in _OFF_STATES)
        except libvirt.libvirtError:
            state['conn'] = None
            try:
                conn.close()
            except libvirt.libvirtError:
                pass
            raise

    return probe


def _drop_stray_session_packet(session, data, sockaddr):
    """Stands in for the ``sessionless_data`` pyghmi's ServerSession lacks.

    pyghmi (1.6.19) never expires a ServerSession, so every earlier
    client's session stays registered under its (address, UDP port), and
    each ipmitool run is a new client.  A new ipmitool that gets a used
    source port opens with a sessionless IPMI 1.5 request (Get Channel
    Authentication Capabilities, sequence number and session id 0); the
    io thread queues it to the stale session.  If a second packet from
    that port (the client's retransmission, when a slow libvirt call held
    the main loop) is queued there too before the loop runs,
    ``Session.process_pktqueue`` (session.py:1351-1363) hands the first
    to the IpmiServer, unregistering the stale session
    (``_handle_ipmi_packet``, session.py:1377-1386), then finds the sender
    unregistered and calls ``self.sessionless_data`` on the ServerSession:
    AttributeError, which ends ``listen`` and with it the BMC.

    Drop that packet: the first copy was answered, and whatever the client
    sends next reaches the IpmiServer, the sender being unregistered now.
    """
    LOG.warning('dropped a packet from %s queued to a stale IPMI session '
                '(the client retries)', sockaddr)


# Narrow: only that call, and only while pyghmi has no such method itself.
if not hasattr(serversession.ServerSession, 'sessionless_data'):
    serversession.ServerSession.sessionless_data = _drop_stray_session_packet


class DCMIVirtualBMC(vbmc.VirtualBMC):
    """virtualbmc's VirtualBMC plus DCMI power readings.

    Takes virtualbmc's constructor arguments, plus ``power_model`` and the
    :class:`CpuPowerMeter` timing knobs.  ``meter`` replaces the libvirt
    probe (tests).
    """

    def __init__(self, username, password, port, address, domain_name,
                 libvirt_uri, libvirt_sasl_username=None,
                 libvirt_sasl_password=None, power_model=None,
                 window=1.0, stats_period=60.0, sample_interval=0.25,
                 meter=None, **kwargs):
        super().__init__(username, password, port, address, domain_name,
                         libvirt_uri,
                         libvirt_sasl_username=libvirt_sasl_username,
                         libvirt_sasl_password=libvirt_sasl_password,
                         **kwargs)
        self.meter = meter or CpuPowerMeter(
            libvirt_probe(libvirt_uri, domain_name), model=power_model,
            window=window, stats_period=stats_period,
            sample_interval=sample_interval)

    def handle_raw_request(self, request, session):
        if request['netfn'] != NETFN_DCMI:
            return super().handle_raw_request(request, session)
        try:
            code, data = self.handle_dcmi(request['command'],
                                          list(request['data']))
        except Exception:
            LOG.exception('DCMI request %s failed', request)
            code, data = CC_UNSPECIFIED, []
        session.send_ipmi_response(data=data, code=code)

    def handle_dcmi(self, command, data):
        """(completion code, response data) of one DCMI request."""
        if not data or data[0] != DCMI_GROUP_EXTENSION:
            # Another group extension (PICMG, VSO...) on netfn 0x2C.
            return CC_INVALID_COMMAND, []
        if command == CMD_GET_POWER_READING:
            return self._power_reading(data)
        if command == CMD_GET_CAPABILITIES:
            return self._capabilities(data)
        return CC_INVALID_COMMAND, []

    def _power_reading(self, data):
        if len(data) < 4:
            return CC_INVALID_DATA, []
        mode = data[1]
        if mode == MODE_SYSTEM_POWER_STATISTICS:
            period = None
        elif mode == MODE_ENHANCED_STATISTICS:
            period = decode_rolling_period(data[2])
            if period <= 0:
                return CC_INVALID_DATA, []
        else:
            return CC_INVALID_DATA, []
        reading = self.meter.reading(period)
        if reading is None:
            # Could not sample the domain at all yet: "node busy, retry".
            return vbmc.IPMI_COMMAND_NODE_BUSY, []
        return CC_OK, encode_power_reading(reading)

    def _capabilities(self, data):
        if len(data) < 2:
            return CC_INVALID_DATA, []
        header = [DCMI_GROUP_EXTENSION, DCMI_VERSION[0], DCMI_VERSION[1],
                  DCMI_PARAMETER_REVISION]
        selector = data[1]
        if selector == 1:
            # Mandatory: chassis power (bit 2); optional: power
            # management (bit 0); access: primary LAN out of band (bit 3).
            return CC_OK, header + [0b0100, 0b0001, 0b1000]
        if selector == 2:
            # Mandatory attributes: no SEL entries, identification by
            # GUID, no DCMI temperature sensors.
            return CC_OK, header + [0x00, 0x00, 0b001, 0x00]
        if selector == 3:
            # Power management by the BMC itself: slave address 20h
            # (0x40 as an 8-bit field), channel 0, device revision 0.
            return CC_OK, header + [0x40, 0x00]
        if selector == 4:
            # Primary LAN channel 1; no secondary LAN, no serial channel.
            return CC_OK, header + [0x01, 0xFF, 0xFF]
        if selector == 5:
            # Enhanced system power statistics: the rolling periods a
            # mode-02h power reading accepts.
            return CC_OK, header + [len(ROLLING_PERIODS)] + list(
                ROLLING_PERIODS)
        return CC_PARAMETER_NOT_SUPPORTED, []


def _parse_args(argv):
    p = argparse.ArgumentParser(
        prog='python -m bmc_lab.dcmi_bmc',
        description='A virtualbmc BMC for one libvirt domain that also '
                    'answers DCMI power readings (watts modelled from '
                    'the domain\'s CPU use).')
    p.add_argument('--domain', required=True, help='libvirt domain name')
    p.add_argument('--port', type=int, default=623, help='UDP port')
    p.add_argument('--address', default='127.0.0.1',
                   help='address to bind (default 127.0.0.1)')
    p.add_argument('--username', default='admin')
    p.add_argument('--password', default='password')
    p.add_argument('--libvirt-uri', default='qemu:///system')
    p.add_argument('--libvirt-sasl-username')
    p.add_argument('--libvirt-sasl-password')
    p.add_argument('--idle-watts', type=float, default=PowerModel.idle_w)
    p.add_argument('--max-watts', type=float, default=PowerModel.max_w)
    p.add_argument('--standby-watts', type=float,
                   default=PowerModel.standby_w)
    p.add_argument('--window', type=float, default=1.0,
                   help='seconds the current reading averages over')
    p.add_argument('--stats-period', type=float, default=60.0,
                   help='seconds the min/max/average cover (mode 01h)')
    p.add_argument('--sample-interval', type=float, default=0.25,
                   help='seconds between CPU-time samples')
    p.add_argument('--session-timeout', type=float, default=1.0,
                   help='IPMI loop timeout (as vbmcd\'s session_timeout)')
    p.add_argument('--debug', action='store_true')
    return p.parse_args(argv)


def _stop_on_signal(signum, frame):
    raise SystemExit(0)


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    try:
        model = PowerModel(idle_w=args.idle_watts, max_w=args.max_watts,
                           standby_w=args.standby_watts)
    except ValueError as exc:
        sys.exit('dcmi_bmc: %s' % exc)
    # Fail early, with a clear message, when libvirt or the domain is
    # missing (vbmc add checks the same).
    try:
        conn = libvirt.openReadOnly(args.libvirt_uri)
        try:
            conn.lookupByName(args.domain)
        finally:
            conn.close()
    except libvirt.libvirtError as exc:
        sys.exit('dcmi_bmc: domain %s on %s: %s'
                 % (args.domain, args.libvirt_uri, exc))
    try:
        bmc = DCMIVirtualBMC(
            username=args.username, password=args.password, port=args.port,
            address=args.address, domain_name=args.domain,
            libvirt_uri=args.libvirt_uri,
            libvirt_sasl_username=args.libvirt_sasl_username,
            libvirt_sasl_password=args.libvirt_sasl_password,
            power_model=model, window=args.window,
            stats_period=args.stats_period,
            sample_interval=args.sample_interval)
    except OSError as exc:
        sys.exit('dcmi_bmc: cannot listen on %s:%d/udp: %s'
                 % (args.address, args.port, exc))
    signal.signal(signal.SIGTERM, _stop_on_signal)
    signal.signal(signal.SIGINT, _stop_on_signal)
    bmc.meter.start()
    LOG.info('DCMI virtual BMC for domain %s listening on %s:%d/udp '
             '(idle %s W, max %s W, standby %s W)', args.domain,
             args.address, args.port, model.idle_w, model.max_w,
             model.standby_w)
    try:
        bmc.listen(timeout=args.session_timeout)
    finally:
        bmc.meter.stop()
        LOG.info('DCMI virtual BMC for domain %s stopped', args.domain)
    return 0


if __name__ == '__main__':
    sys.exit(main())
