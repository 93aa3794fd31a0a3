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

"""Run the container's command as the machine's main workload.

The command runs with full root privileges (no namespaces besides its own
session, no capability drop: the machine is the container) chrooted into
the staged root, with the given environment, working directory and user.
Its combined stdout/stderr goes to a file in RAM.  One workload at a time.

A small JSON record next to the output lets an agent that was restarted
still report on (and stop) a workload started by its predecessor.
"""

import json
import os
import signal
import subprocess
import threading
import time

from oslo_log import log

from ipa_hardware_manager import rapl
from ipa_hardware_manager import tunables
from bmc_common import protocol

LOG = log.getLogger(__name__)

STATE_DIR = '/run/bmc-workload'
STATE_FILE = 'workload.json'
OUTPUT_FILE = 'output.log'
DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
DEFAULT_GRACE = 10


class WorkloadError(Exception):
    """The workload could not be started or stopped; says why."""


def _read_db(root, name):
    try:
        with open(os.path.join(root, 'etc', name)) as f:
            return [line.rstrip('\n').split(':') for line in f
                    if line.strip() and not line.startswith('#')]
    except OSError:
        return []


def resolve_user(root, user):
    """Return (uid, gid, home) for ``uid[:gid]`` or ``name[:group]``.

    Names are looked up in the staged root's /etc/passwd and /etc/group,
    as the container would.
    """
    if user is None or user == '':
        user = '0'
    user = str(user)
    name, _sep, group = user.partition(':')
    passwd = _read_db(root, 'passwd')
    home = '/'
    if name.isdigit():
        uid = int(name)
        gid = uid
        for entry in passwd:
            if len(entry) >= 6 and entry[2] == name:
                gid, home = int(entry[3]), entry[5] or '/'
                break
    else:
        for entry in passwd:
            if len(entry) >= 6 and entry[0] == name:
                uid, gid, home = int(entry[2]), int(entry[3]), entry[5]
                break
        else:
            raise WorkloadError('user %r not found in the image\'s '
                                '/etc/passwd' % name)
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            for entry in _read_db(root, 'group'):
                if len(entry) >= 3 and entry[0] == group:
                    gid = int(entry[2])
                    break
            else:
                raise WorkloadError('group %r not found in the image\'s '
                                    '/etc/group' % group)
    return uid, gid, home or '/'


def _validate(command, env, workdir, mode):
    if (not isinstance(command, (list, tuple)) or not command
            or not all(isinstance(c, str) for c in command)):
        raise WorkloadError('command must be a non-empty list of strings, '
                            'got %r' % (command,))
    if env is not None and (not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str)
            for k, v in env.items())):
        raise WorkloadError('env must map strings to strings, got %r'
                            % (env,))
    if workdir is not None and (not isinstance(workdir, str)
                                or not workdir.startswith('/')):
        raise WorkloadError('workdir must be an absolute path, got %r'
                            % (workdir,))
    if mode not in protocol.WORKLOAD_MODES:
        raise WorkloadError('unknown workload mode %r (known: %s)' % (
            mode, ', '.join(protocol.WORKLOAD_MODES)))


def _tail(path, limit=protocol.OUTPUT_TAIL_BYTES):
    try:
        with open(path, 'rb') as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode('utf-8', errors='replace')
    except OSError:
        return ''


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie that is not our child (agent restarted) counts as gone.
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (OSError, IndexError):
        return True


class Supervisor:
    """Starts, watches and stops the one workload of this node."""

    def __init__(self, state_dir=STATE_DIR):
        self.state_dir = state_dir
        self.lock = threading.Lock()
        self.proc = None
        self.watcher = None
        self.meter = None
        self.record = self._load()

    # -- persistence -------------------------------------------------------

    def _load(self):
        try:
            with open(os.path.join(self.state_dir, STATE_FILE)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _save(self):
        tmp = os.path.join(self.state_dir, '%s.%d.%d.tmp' % (
            STATE_FILE, os.getpid(), threading.get_ident()))
        try:
            os.makedirs(self.state_dir, exist_ok=True)
            with open(tmp, 'w') as f:
                json.dump(self.record, f)
            os.replace(tmp, os.path.join(self.state_dir, STATE_FILE))
        except OSError as exc:
            # The in-memory record still serves this agent.
            LOG.warning('Could not record the workload state in %s: %s',
                        self.state_dir, exc)

    # -- state ---------------------------------------------------------------

    def _running(self):
        if self.proc is not None:
            return self.proc.poll() is None
        if self.record and self.record.get('exit_code') is None:
            return _pid_alive(self.record['pid'])
        return False

    def start(self, root, command, env=None, workdir=None, user=None,
              mode=protocol.MODE_JOB):
        _validate(command, env, workdir, mode)
        if not root or not os.path.isdir(root):
            raise WorkloadError('no staged root at %r: stage the rootfs '
                                'first' % (root,))
        uid, gid, home = resolve_user(root, user)
        with self.lock:
            if self._running():
                raise WorkloadError('a workload is already running (pid %s)'
                                    % self.record['pid'])
            os.makedirs(self.state_dir, exist_ok=True)
            output = os.path.join(self.state_dir, OUTPUT_FILE)
            full_env = {'PATH': DEFAULT_PATH, 'HOME': home,
                        'TERM': 'linux', 'container': 'bmc'}
            full_env.update(env or {})
            cwd = workdir or '/'
            # The workload CPUs of the low-noise profile (the agent has
            # confined itself to the housekeeping ones; children inherit
            # that, so the workload must be given its own).
            cpus = tunables.workload_cpus()
            if not os.path.isdir(os.path.join(root, cwd.lstrip('/'))):
                raise WorkloadError('workdir %s does not exist in the image'
                                    % cwd)

            def enter_root():
                # Runs in the child between fork and exec: system calls
                # only.  Order matters: chroot needs root, so it comes
                # before dropping to the user.
                if cpus:
                    os.sched_setaffinity(0, cpus)
                os.chroot(root)
                os.chdir(cwd)
                if uid != 0 or gid != 0:
                    os.setgroups([gid])
                    os.setgid(gid)
                    os.setuid(uid)

            with open(output, 'wb') as out:
                try:
                    self.proc = subprocess.Popen(
                        list(command), stdin=subprocess.DEVNULL,
                        stdout=out, stderr=subprocess.STDOUT,
                        env=full_env, close_fds=True,
                        # Only system calls run in the child before exec.
                        start_new_session=True,
                        preexec_fn=enter_root)  # noqa: PLW1509
                except (OSError, subprocess.SubprocessError) as exc:
                    raise WorkloadError('cannot start %s in %s: %s' % (
                        command[0], root, exc)) from exc
            started = time.time()
            self.meter = rapl.Meter().start()
            self.record = {'pid': self.proc.pid, 'started': started,
                           'ended': None, 'exit_code': None, 'mode': mode,
                           'command': list(command), 'root': root,
                           'output': output, 'rapl': None,
                           'cpus': sorted(cpus) if cpus else None}
            self._save()
            proc = self.proc
            self.watcher = threading.Thread(
                target=self._watch, args=(proc,), name='bmc-workload-watch',
                daemon=True)
            self.watcher.start()
        LOG.info('Started %s workload %s as pid %d (uid %d, gid %d) in %s',
                 mode, command, proc.pid, uid, gid, root)
        return {'pid': proc.pid, 'started': round(started, 3)}

    def _watch(self, proc):
        code = proc.wait()
        meter = self.meter
        energy = meter.stop() if meter is not None else None
        with self.lock:
            if self.record and self.record.get('pid') == proc.pid:
                self.record['exit_code'] = code
                self.record['ended'] = time.time()
                self.record['rapl'] = energy
                self._save()
        LOG.info('Workload pid %d exited with %d', proc.pid, code)

    def status(self):
        with self.lock:
            record = self.record
            if not record:
                return {'state': 'absent', 'exit_code': None,
                        'output_tail': '', 'stages': []}
            running = self._running()
            if (not running and record.get('exit_code') is None
                    and self.proc is not None):
                # Exited, the watcher has not recorded it yet.
                record['exit_code'] = self.proc.wait()
                record['ended'] = time.time()
                self._save()
            state = 'running' if running else 'exited'
            if record.get('rapl'):
                energy = record['rapl']
            elif self.meter is not None:
                energy = self.meter.current()
            else:
                energy = rapl.absent('the agent restarted during the '
                                     'workload: its RAPL window is lost')
            stages = []
            started = record['started']
            stages.append(protocol.stage(protocol.STAGE_WORKLOAD_STARTED,
                                         started, started))
            if record.get('ended'):
                stages.append(protocol.stage(protocol.STAGE_WORKLOAD_EXITED,
                                             started, record['ended']))
            return {'state': state, 'exit_code': record.get('exit_code'),
                    'output_tail': _tail(record['output']),
                    'pid': record['pid'], 'mode': record.get('mode'),
                    'cpus': record.get('cpus'), 'rapl': energy,
                    'stages': stages}

    def stop(self, grace=DEFAULT_GRACE):
        """SIGTERM the workload's process group, SIGKILL after grace."""
        try:
            grace = float(grace)
        except (TypeError, ValueError):
            raise WorkloadError('grace must be a number of seconds, got %r'
                                % (grace,)) from None
        with self.lock:
            record = self.record
            running = record is not None and self._running()
        if not running:
            return self.status()
        pid = record['pid']
        LOG.info('Stopping workload pid %d (grace %.1fs)', pid, grace)
        self._signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self.lock:
                if not self._running():
                    break
            time.sleep(0.1)
        else:
            LOG.warning('Workload pid %d ignored SIGTERM, killing', pid)
            self._signal(pid, signal.SIGKILL)
            end = time.monotonic() + 5
            while time.monotonic() < end:
                with self.lock:
                    if not self._running():
                        break
                time.sleep(0.1)
        with self.lock:
            if (self.proc is None and not record.get('ended')
                    and not self._running()):
                # Not our child (the agent restarted): its exit code is
                # lost, only the end time is known.
                record['ended'] = time.time()
                self._save()
        return self.status()

    @staticmethod
    def _signal(pid, sig):
        try:
            os.killpg(pid, sig)  # the workload leads its own session
        except ProcessLookupError:
            pass
        except OSError:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
