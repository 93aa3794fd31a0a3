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

"""The lab BMC's power meter: a libvirt domain's watts from its CPU use.

A :class:`CpuPowerMeter` keeps a ring of CPU samples of one domain (from
a probe: :func:`bmc_lab.dcmi_bmc.libvirt_probe` in the BMC) and turns
them into the current watts and the DCMI power reading
(:class:`bmc_lab.dcmi_commands.Reading`) the BMC answers with.

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
"""

import collections
import dataclasses
import logging
import threading
import time

from bmc_lab import dcmi_commands

LOG = logging.getLogger(__name__)

_UINT16_MAX = 0xFFFF


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
        return dcmi_commands.Reading(
            current=_watts16(current), minimum=_watts16(min(values)),
            maximum=_watts16(max(values)), average=_watts16(average),
            timestamp=int(self.wall_clock()) & 0xFFFFFFFF,
            period_ms=int(round((last.t - covered_from) * 1000)))


def _watts16(w):
    return max(0, min(_UINT16_MAX, int(round(w))))
