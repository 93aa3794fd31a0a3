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

"""Processes the lab starts: spawn, track by pid file, stop, wait for."""

import contextlib
import errno
import fcntl
import os
import signal
import socket
import subprocess
import time


class LabError(Exception):
    """A lab operation failed; the message says what to look at."""


def _pidfile(settings, name):
    return settings.path('run', name + '.pid')


def spawn(settings, name, argv, env=None, cwd=None):
    """Start ``argv`` in its own session, logging to logs/<name>.log.

    The process is recorded in run/<name>.pid together with its
    executable, so a recycled pid is never mistaken for it.
    """
    os.makedirs(settings.path('run'), exist_ok=True)
    os.makedirs(settings.log_dir, exist_ok=True)
    log_path = settings.log(name + '.log')
    full_env = dict(os.environ)
    full_env.update(env or {})
    with open(log_path, 'ab') as log:
        log.write(('\n==== %s starting: %s\n' % (
            time.strftime('%Y-%m-%d %H:%M:%S'), ' '.join(argv))).encode())
        log.flush()
        try:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                env=full_env, cwd=cwd or settings.state_dir)
        except OSError as exc:
            raise LabError('cannot start %s (%s): %s' % (name, argv[0], exc))
    with open(_pidfile(settings, name), 'w') as f:
        f.write('%d %s\n' % (proc.pid, os.path.basename(argv[0])))
    return proc


def recorded(settings, name):
    """(pid, executable) the pid file of ``name`` holds, else None; the
    process may be gone (see :func:`pid_of`)."""
    try:
        with open(_pidfile(settings, name)) as f:
            pid_s, _, exe = f.read().strip().partition(' ')
        return int(pid_s), exe
    except (FileNotFoundError, ValueError):
        return None


def pid_of(settings, name):
    """The pid of a running lab process called ``name``, else None."""
    found = recorded(settings, name)
    if found is None or not _alive(*found):
        return None
    return found[0]


@contextlib.contextmanager
def file_lock(path, out=None, waiting=None):
    """Hold an exclusive flock on ``path`` (created if need be); when
    another process holds it, say ``waiting`` through ``out`` first."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'a') as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if out is not None and waiting:
                out(waiting)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _alive(pid, exe=None):
    try:
        with open('/proc/%d/stat' % pid) as f:
            state = f.read().rsplit(')', 1)[1].split()[0]
        if state == 'Z':
            return False
        if exe:
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                argv0 = f.read().split(b'\0')[0].decode(errors='replace')
            # Interpreted programs show as "python3 /path/to/prog".
            if exe not in argv0 and exe not in _cmdline(pid):
                return False
        return True
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().replace(b'\0', b' ').decode(errors='replace')
    except FileNotFoundError:
        return ''


def running(settings, name):
    return pid_of(settings, name) is not None


def stop(settings, name, timeout=15):
    """Stop a lab process and its session; True if one was running.

    The pid file goes first: the lab's supervisor restarts a process that
    died with its pid file in place (a crash), never one being stopped.
    """
    pid = pid_of(settings, name)
    path = _pidfile(settings, name)
    if os.path.exists(path):
        os.unlink(path)
    if pid is None:
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap(pid)
            if not _alive(pid):
                break
            time.sleep(0.1)
        else:
            continue
        break
    return True


def crash(settings, name):
    """SIGKILL a lab process and its session, as a crash would: no
    graceful shutdown, and no restart by the lab's supervisor (the
    caller restarts it).  True if one was running."""
    pid = pid_of(settings, name)
    if pid is None:
        return False
    os.unlink(_pidfile(settings, name))
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        _reap(pid)
        time.sleep(0.1)
    return True


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def port_in_use(port, host='127.0.0.1'):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def udp_port_in_use(port, host='127.0.0.1'):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def check_ports_free(named_ports, udp=()):
    """Raise LabError naming every port that is taken and who wanted it."""
    taken = []
    for what, port in sorted(named_ports.items(), key=lambda kv: kv[1]):
        check = udp_port_in_use if what in udp else port_in_use
        if check(port):
            taken.append('port %d (wanted by %s) is already in use'
                         % (port, what))
    if taken:
        raise LabError('; '.join(taken) + '. Stop whatever holds it or '
                       'choose other ports (see "bmc-lab up --help").')


def wait_for_port(port, name, log_path, proc=None, timeout=60,
                  host='127.0.0.1'):
    """Wait until something listens on ``port``; fail with the log path."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise LabError('%s exited with code %s while starting; see %s'
                           % (name, proc.returncode, log_path))
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise LabError('%s did not listen on %s:%d within %ds; see %s'
                   % (name, host, port, timeout, log_path))


def run(argv, what, log_path=None, env=None, check=True, timeout=300):
    """Run a short command; on failure raise LabError with its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        res = subprocess.run(argv, capture_output=True, text=True,
                             env=full_env, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LabError('%s failed: %s' % (what, exc))
    if log_path:
        with open(log_path, 'a') as f:
            f.write('$ %s\n%s%s' % (' '.join(argv), res.stdout, res.stderr))
    if check and res.returncode != 0:
        raise LabError('%s failed (exit %d): %s%s' % (
            what, res.returncode, (res.stderr or res.stdout).strip()[-800:],
            '; see %s' % log_path if log_path else ''))
    return res


def _last_line(path):
    try:
        with open(path, 'rb') as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            lines = f.read().decode(errors='replace').splitlines()
    except OSError:
        return ''
    lines = [ln.strip() for ln in lines if ln.strip()]
    return lines[-1][:160] if lines else ''


def run_long(argv, what, log_path, out=print, timeout=1800, every=30):
    """Run a long command, its output going to ``log_path`` as it comes,
    and say every ``every`` seconds that it still runs (with its last log
    line): a build of minutes is never silent, on a terminal or not."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, 'ab') as log:
        log.write(('$ %s\n' % ' '.join(argv)).encode())
        log.flush()
        try:
            proc = subprocess.Popen(argv, stdout=log,
                                    stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise LabError('%s failed: %s' % (what, exc))
    start = time.monotonic()
    next_note = start + every
    try:
        while proc.poll() is None:
            now = time.monotonic()
            if now - start > timeout:
                raise LabError('%s did not finish within %ds; see %s'
                               % (what, timeout, log_path))
            if now >= next_note:
                out('  ... %s: %ds so far; %s' % (what, now - start,
                                                  _last_line(log_path)))
                next_note = now + every
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise LabError('%s failed (exit %d): %s; see %s' % (
            what, proc.returncode, _last_line(log_path), log_path))
