

import threading
import time

import pytest

from ironic_bmc.power import readers
from ironic_bmc.power import sampler


class FakeReader:
    method = 'ipmi-dcmi'
    target = '127.0.0.1:9'

    def __init__(self, values):
        self.values = list(values)
        self.calls = 0
        self.closed = False
        self.lock = threading.Lock()

    def read(self):
        with self.lock:
            self.calls += 1
            v = self.values.pop(0) if len(self.values) > 1 else self.values[0]
        if isinstance(v, Exception):
            raise v
        return v

    def close(self):
        self.closed = True


class FakeClock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        self.t += 0.5
        return self.t


def test_poll_once_records_midpoint_timestamps():
    s = sampler.Sampler(FakeReader([100]), clock=FakeClock())
    assert s.poll_once() == 100
    snap = s.snapshot()
    assert snap.samples == [(1000.75, 100.0)]
    assert snap.method == 'ipmi-dcmi'
    assert snap.target == '127.0.0.1:9'


def test_errors_are_counted_and_the_first_reason_kept():
    reader = FakeReader([readers.PowerReadingUnavailable('first'),
                         RuntimeError('boom'), 120])
    s = sampler.Sampler(reader, clock=FakeClock())
    assert s.poll_once() is None
    assert s.poll_once() is None
    assert s.poll_once() == 120
    snap = s.snapshot()
    assert snap.errors == 2
    assert snap.first_error == 'first'
    assert len(snap.samples) == 1
    assert not snap.gave_up


def test_unexpected_exception_reason_names_its_type():
    s = sampler.Sampler(FakeReader([RuntimeError('boom')]))
    s.poll_once()
    assert s.snapshot().first_error == 'RuntimeError: boom'


def test_samples_are_bounded():
    s = sampler.Sampler(FakeReader([1.0]), max_samples=3)
    for _ in range(5):
        s.poll_once()
    snap = s.snapshot()
    assert len(snap.samples) == 3
    assert snap.dropped == 2


def test_invalid_period():
    with pytest.raises(ValueError):
        sampler.Sampler(FakeReader([1]), period=0)


def test_thread_polls_until_stopped():
    reader = FakeReader([100.0])
    s = sampler.Sampler(reader, period=0.01).start()
    deadline = time.monotonic() + 5
    while len(s.snapshot().samples) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.mark('workload_start')
    result = s.stop()
    assert len(result.samples) >= 5
    assert 'workload_start' in result.marks
    assert result.started_at <= result.stopped_at
    assert reader.closed
    calls = reader.calls
    time.sleep(0.05)
    assert reader.calls == calls


def test_permanent_failure_stops_polling():
    reader = FakeReader([readers.PowerReadingUnavailable(
        'no DCMI', permanent=True)])
    s = sampler.Sampler(reader, period=0.01).start()
    s._thread.join(5)
    assert not s._thread.is_alive()
    assert reader.calls == 1
    result = s.stop()
    assert result.gave_up
    assert result.first_error == 'no DCMI'
    assert result.samples == []


def test_registry_start_mark_get_stop():
    reg = sampler.Registry()
    reg.start('node-1', FakeReader([50.0]), period=0.01)
    assert reg.active() == ['node-1']
    assert reg.mark('node-1', 'workload_start', timestamp=12.5)
    assert not reg.mark('node-2', 'workload_start')
    deadline = time.monotonic() + 5
    while not reg.get('node-1').samples and time.monotonic() < deadline:
        time.sleep(0.01)
    snap = reg.get('node-1')
    assert snap.marks == {'workload_start': 12.5}
    assert snap.samples
    # A snapshot is a copy.
    snap.marks['x'] = 1
    assert 'x' not in reg.get('node-1').marks
    result = reg.stop('node-1')
    assert result.samples and result.stopped_at
    assert reg.get('node-1') is None
    assert reg.stop('node-1') is None
    assert reg.active() == []


def test_registry_restart_replaces_the_sampler():
    reg = sampler.Registry()
    first = FakeReader([1.0])
    reg.start('n', first, period=0.01)
    second = FakeReader([2.0])
    reg.start('n', second, period=0.01)
    assert first.closed
    assert reg.active() == ['n']
    reg.stop_all()
    assert second.closed
    assert reg.active() == []


def test_concurrent_marks_and_snapshots():
    reg = sampler.Registry()
    reg.start('n', FakeReader([1.0]), period=0.001)

    def marker(i):
        for j in range(50):
            reg.mark('n', 'm%d-%d' % (i, j))
            reg.get('n')

    threads = [threading.Thread(target=marker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result = reg.stop('n')
    assert len(result.marks) == 200
