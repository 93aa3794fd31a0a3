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

"""Poll a node's BMC power reading in the background.

One :class:`Sampler` per node polls a reader (see :mod:`.readers`) every
``period`` seconds in a daemon thread and keeps ``(timestamp, watts)``
samples in memory -- at most ``max_samples`` (the oldest are dropped
first and counted).  Timestamps are ``time.time()`` (seconds since the
epoch) taken half-way through each read, so they line up with the other
stage timestamps of a run report.  A failed read is counted and the first
reason kept; a *permanent* failure (the BMC implements no reading) ends
the polling.

The module-level registry keys samplers by node UUID::

    sampler.start(node.uuid, readers.reader_for_node(node), period=1.0)
    sampler.mark(node.uuid, 'workload_start')
    ...
    sampler.mark(node.uuid, 'workload_end')
    samples = sampler.stop(node.uuid)
    report['energy'] = energy.summarize(samples)
"""

import collections
import copy
import dataclasses
import threading
import time

from oslo_log import log

from ironic_bmc.power import readers as power_readers

LOG = log.getLogger(__name__)

DEFAULT_PERIOD = 1.0
DEFAULT_MAX_SAMPLES = 100000


@dataclasses.dataclass
class Samples:
    """What a sampler collected (a snapshot when returned to callers)."""

    method: str = None
    target: str = None
    period_s: float = DEFAULT_PERIOD
    #: (timestamp, watts) in time order.
    samples: list = dataclasses.field(default_factory=list)
    #: name -> timestamp
    marks: dict = dataclasses.field(default_factory=dict)
    errors: int = 0
    first_error: str = None
    #: Samples dropped because ``max_samples`` was reached.
    dropped: int = 0
    started_at: float = None
    stopped_at: float = None
    #: Set when polling ended by itself on a permanent failure.
    gave_up: bool = False

    def to_dict(self):
        return dataclasses.asdict(self)


class Sampler:
    """Polls one reader in a daemon thread."""

    def __init__(self, reader, period=DEFAULT_PERIOD,
                 max_samples=DEFAULT_MAX_SAMPLES, clock=time.time,
                 name=None):
        if period <= 0:
            raise ValueError('the sampling period must be positive, not %r'
                             % period)
        self.reader = reader
        self.period = float(period)
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._samples = collections.deque(maxlen=int(max_samples))
        self._meta = Samples(method=getattr(reader, 'method', None),
                             target=getattr(reader, 'target', None),
                             period_s=self.period)
        self._thread = threading.Thread(
            target=self._run, daemon=True,
            name='bmc-power-%s' % (name or getattr(reader, 'target', '')))

    def start(self):
        with self._lock:
            self._meta.started_at = self.clock()
        self._thread.start()
        return self

    @property
    def running(self):
        return self._thread.is_alive() and not self._stop.is_set()

    def _run(self):
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.poll_once()
            if self._meta.gave_up:
                break
            next_at += self.period
            delay = next_at - time.monotonic()
            if delay < 0:
                # A slow read: skip the ticks it overran, keep the phase.
                next_at += (-delay // self.period + 1) * self.period
                delay = next_at - time.monotonic()
            self._stop.wait(delay)

    def poll_once(self):
        """One read, recorded; returns the watts or None."""
        t0 = self.clock()
        try:
            watts = self.reader.read()
        except Exception as exc:
            permanent = getattr(exc, 'permanent', False)
            reason = (exc.reason if isinstance(
                exc, power_readers.PowerReadingUnavailable)
                else '%s: %s' % (type(exc).__name__, exc))
            with self._lock:
                self._meta.errors += 1
                if self._meta.first_error is None:
                    self._meta.first_error = reason
                    LOG.warning('BMC power reading from %s failed: %s',
                                self._meta.target, reason)
                if permanent:
                    self._meta.gave_up = True
            if permanent:
                LOG.warning('Giving up BMC power sampling of %s: %s',
                            self._meta.target, reason)
            return None
        t1 = self.clock()
        with self._lock:
            if len(self._samples) == self._samples.maxlen:
                self._meta.dropped += 1
            self._samples.append(((t0 + t1) / 2.0, float(watts)))
        return watts

    def mark(self, name, timestamp=None):
        with self._lock:
            self._meta.marks[name] = (self.clock() if timestamp is None
                                      else float(timestamp))

    def snapshot(self):
        with self._lock:
            snap = copy.deepcopy(self._meta)
            snap.samples = list(self._samples)
        return snap

    def stop(self, timeout=None):
        """Stop polling (waits for a read in flight); returns Samples."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout if timeout is not None
                              else self.period + 30)
        with self._lock:
            if self._meta.stopped_at is None:
                self._meta.stopped_at = self.clock()
        try:
            self.reader.close()
        except Exception:
            LOG.debug('closing %s failed', self.reader, exc_info=True)
        return self.snapshot()


class Registry:
    """Samplers by node UUID; thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._samplers = {}

    def start(self, node_uuid, reader, period=DEFAULT_PERIOD,
              max_samples=DEFAULT_MAX_SAMPLES):
        """Start sampling a node; an earlier sampler of it is stopped."""
        new = Sampler(reader, period=period, max_samples=max_samples,
                      name=node_uuid)
        with self._lock:
            old = self._samplers.pop(node_uuid, None)
            self._samplers[node_uuid] = new
        if old is not None:
            LOG.info('Restarting BMC power sampling of node %s', node_uuid)
            old.stop()
        return new.start()

    def mark(self, node_uuid, name, timestamp=None):
        """Record a named timestamp; False if the node is not sampled."""
        with self._lock:
            s = self._samplers.get(node_uuid)
        if s is None:
            return False
        s.mark(name, timestamp)
        return True

    def get(self, node_uuid):
        """A snapshot of the node's Samples so far, or None."""
        with self._lock:
            s = self._samplers.get(node_uuid)
        return s.snapshot() if s is not None else None

    def stop(self, node_uuid):
        """Stop sampling; the node's Samples, or None if not sampled."""
        with self._lock:
            s = self._samplers.pop(node_uuid, None)
        return s.stop() if s is not None else None

    def active(self):
        with self._lock:
            return sorted(self._samplers)

    def stop_all(self):
        return {u: self.stop(u) for u in self.active()}


#: The conductor's registry.
REGISTRY = Registry()
start = REGISTRY.start
mark = REGISTRY.mark
get = REGISTRY.get
stop = REGISTRY.stop
stop_all = REGISTRY.stop_all
