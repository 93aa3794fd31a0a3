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

"""The lab's supervisor, on real processes standing in for the parts."""

import functools
import os
import signal
import time

import pytest

from bmc_lab import procs
from bmc_lab import settings as lab_settings
from bmc_lab import supervisor


@pytest.fixture
def settings(tmp_path, monkeypatch):
    s = lab_settings.Settings(state_dir=str(tmp_path / 'lab'), nodes=2)
    s.save()

    def start(name):
        if not procs.running(s, name):
            procs.spawn(s, name, ['sleep', '60'])
            _wait_running(s, name)
    monkeypatch.setattr(supervisor, 'parts', lambda settings: [
        (n, functools.partial(start, n)) for n in ('bmc-0', 'nginx')])
    start('bmc-0')
    start('nginx')
    yield s
    for name in ('bmc-0', 'nginx'):
        procs.stop(s, name)


def _wait_running(settings, name, timeout=5):
    # Until the child has exec'd, its command line is still Python's.
    deadline = time.monotonic() + timeout
    while not procs.running(settings, name):
        assert time.monotonic() < deadline, name
        time.sleep(0.05)
    return procs.pid_of(settings, name)


def _kill(settings, name):
    """SIGKILL, as a crash: the pid file stays."""
    pid = procs.pid_of(settings, name)
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while procs.running(settings, name):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return pid


def test_a_dead_part_is_started_again_with_a_line_in_its_log(settings):
    sup = supervisor.Supervisor(settings)
    assert sup.check() == []
    nginx = procs.pid_of(settings, 'nginx')
    dead = _kill(settings, 'bmc-0')
    assert sup.check() == ['bmc-0']
    new = _wait_running(settings, 'bmc-0')
    assert new != dead
    assert procs.pid_of(settings, 'nginx') == nginx  # others untouched
    with open(settings.log('bmc-0.log')) as f:
        assert ('bmc-lab supervisor: bmc-0 (pid %d) died; starting it '
                'again' % dead) in f.read()
    assert sup.check() == []


def test_a_part_stopped_on_purpose_stays_stopped(settings):
    sup = supervisor.Supervisor(settings)
    assert procs.stop(settings, 'nginx') is True
    assert sup.check() == []
    assert not procs.running(settings, 'nginx')
    # A crash modelled by procs.crash is the caller's to restart, too.
    assert procs.crash(settings, 'bmc-0') is True
    assert sup.check() == []
    assert not procs.running(settings, 'bmc-0')


def test_a_part_that_keeps_dying_is_left_down(settings):
    now = [1000.0]
    sup = supervisor.Supervisor(settings, clock=lambda: now[0])
    for _ in range(supervisor.MAX_RESTARTS):
        _kill(settings, 'bmc-0')
        assert sup.check() == ['bmc-0']
        _wait_running(settings, 'bmc-0')
        now[0] += 1
    dead = _kill(settings, 'bmc-0')
    assert sup.check() == []
    assert not procs.running(settings, 'bmc-0')
    with open(settings.log('bmc-0.log')) as f:
        assert 'bmc-0 (pid %d) died again after %d restarts' % (
            dead, supervisor.MAX_RESTARTS) in f.read()
    # Restarts long ago do not count.
    sup = supervisor.Supervisor(settings, clock=lambda: now[0])
    sup.restarts['bmc-0'] = [now[0] - supervisor.WINDOW - 1] * 10
    assert sup.check() == ['bmc-0']
