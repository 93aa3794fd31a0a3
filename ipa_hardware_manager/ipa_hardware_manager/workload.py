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

The command runs under an OCI runtime (crun) from a runtime spec written
by :mod:`oci_spec`: by default privileged, sharing the machine (the
machine is the container), in its own mount and PID namespaces and its
own cgroup.  Its combined stdout/stderr goes to a file in RAM.  One
workload at a time.

``crun run`` stays the agent's child for the workload's life and exits
with its status.  A small JSON record next to the output lets an agent
that was restarted still report on (and stop) a workload started by its
predecessor, and re-arm its walltime.
"""

import json
import os
import subprocess
import sys
import threading
import time

from oslo_log import log

from ipa_hardware_manager import container_root
from ipa_hardware_manager import container_etc
from ipa_hardware_manager import oci_runtime
from ipa_hardware_manager import oci_spec
from ipa_hardware_manager import output_keeper
from ipa_hardware_manager import rapl
from ipa_hardware_manager import tunables
from ipa_hardware_manager import workload_args
from ipa_hardware_manager import workload_output
from ipa_hardware_manager import workload_stop
from bmc_common import protocol

LOG = log.getLogger(__name__)

STATE_DIR = '/run/bmc-workload'
STATE_FILE = 'workload.json'
KEEPER_LOG = 'output-keeper.log'
BUNDLE_DIR = oci_runtime.BUNDLE_DIR
CONTAINER_ID = oci_runtime.CONTAINER_ID
CGROUP_PATH = '/bmc-workload'
DEFAULT_PATH = oci_spec.DEFAULT_PATH
DEFAULT_GRACE = workload_stop.DEFAULT_GRACE
#: RAM the workload's output may use on the node (the conductor says).
DEFAULT_OUTPUT_MAX = 16 * 1024 * 1024
#: How long the keeper may take to write the last of the output.
DRAIN_TIMEOUT = 10


WorkloadError = workload_args.WorkloadError


def pid_alive(pid):
    """Whether ``pid`` runs."""
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


class Supervisor(workload_stop.StopMixin):
    """Starts, watches and stops the one workload of this node."""

    def __init__(self, state_dir=STATE_DIR, runtime=oci_runtime.BINARY):
        self.state_dir = state_dir
        self.runtime = oci_runtime.Runtime(state_dir, runtime)
        self.lock = threading.Lock()
        self.proc = None
        self.watcher = None
        self.meter = None
        self.timer = None
        self.keeper = None
        #: Called (no arguments) when the workload ends on its own.
        self.exit_hook = None
        self.record = self._load()
        if self.record and self._running():
            self._arm_walltime()

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

    def _crun_error(self, keeper):
        """What crun printed, once the keeper has written all of it."""
        try:
            keeper.wait(DRAIN_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        return workload_output.tail(self.state_dir, 2048).strip()

    # -- the output keeper -------------------------------------------------

    def _start_keeper(self, output_max):
        """The output keeper on a new pipe; (keeper, the pipe's write
        end for the workload)."""
        for name in (output_keeper.OUTPUT_FILE, output_keeper.ROTATED_FILE,
                     output_keeper.STATE_FILE):
            path = os.path.join(self.state_dir, name)
            if os.path.exists(path):
                os.unlink(path)
        read_end, write_end = os.pipe()
        try:
            with open(os.path.join(self.state_dir, KEEPER_LOG), 'ab') as log:
                # argv list, no shell: this agent's own output keeper.
                keeper = subprocess.Popen(  # noqa: S603
                    [sys.executable, '-m',
                     'ipa_hardware_manager.output_keeper', self.state_dir,
                     str(output_max)],
                    stdin=read_end, stdout=log, stderr=log, close_fds=True,
                    start_new_session=True)
        except OSError as exc:
            os.close(write_end)
            raise WorkloadError('cannot start the output keeper: %s'
                                % exc) from exc
        finally:
            os.close(read_end)
        return keeper, write_end

    def _keeper_done(self, record, timeout):
        """Wait up to ``timeout`` seconds for the keeper to write the last
        of the output (it ends when the workload's last writer does)."""
        if self.keeper is not None and self.keeper.pid == record.get(
                'keeper_pid'):
            try:
                self.keeper.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + timeout
        while record.get('keeper_pid') and pid_alive(record['keeper_pid']):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    # -- state ---------------------------------------------------------------

    def _running(self):
        if self.proc is not None:
            return self.proc.poll() is None
        if self.record and self.record.get('exit_code') is None:
            # Not our child (the agent restarted): the container's init
            # decides, as its ``crun run`` may have died with the agent.
            return pid_alive(self.record.get('container_pid')
                             or self.record['pid'])
        return False

    def start(self, root, command, env=None, workdir=None, user=None,
              mode=protocol.MODE_JOB, stop_signal=None, walltime=None,
              privileged=True, rlimits=None, stop_grace=DEFAULT_GRACE,
              output_max=DEFAULT_OUTPUT_MAX, mounts=None, group=None):
        """Start the workload; ``group`` (a set up :class:`group.Member`)
        gives a run group member's host name, /etc/hosts lines, variables
        and command."""
        stop_number, seconds, stop_grace = workload_args.validate(
            command, env, workdir, mode, stop_signal, walltime, privileged,
            stop_grace, output_max)
        if group is not None:
            command = group.command(command)
            env = group.env(env)
        if not root or not os.path.isdir(root):
            raise WorkloadError('no staged root at %r: stage the rootfs '
                                'first' % (root,))
        if not self.runtime.available():
            raise WorkloadError('the OCI runtime %s is not in this agent '
                                'ramdisk; rebuild it with the bmc-agent '
                                'element' % self.runtime.binary)
        # The workload CPUs of the low-noise profile: the workload's cgroup
        # owns them (the agent has confined itself to the housekeeping
        # ones).
        cpus = tunables.workload_cpus()
        member_name = group.hostname if group is not None else None
        hostname = oci_spec.hostname_of(privileged,
                                        group_hostname=member_name)
        try:
            container_root.make_workdir(root, workdir)
            spec = oci_spec.build(
                root, command, env=env, workdir=workdir, user=user,
                privileged=privileged, rlimits=rlimits, cpus=cpus,
                hugepages=oci_spec.hugepages_configured(),
                cgroup_path=CGROUP_PATH,
                cap_last_cap=oci_spec.cap_last_cap(),
                annotations={'org.openstack.ironic.bmc.mode': mode},
                mounts=mounts, hostname=hostname,
                group_hostname=member_name)
            spec['mounts'] = container_root.resolve_mount_points(root,
                                                           spec['mounts'])
        except oci_spec.SpecError as exc:
            raise WorkloadError(str(exc)) from None
        user_spec = spec['process']['user']
        with self.lock:
            if self._running():
                raise WorkloadError('a workload is running (pid %s)'
                                    % self.record['pid'])
            if group is None:
                container_etc.write_identity(root, hostname)
            else:
                # The member's name at its group address, and the others.
                container_etc.write_identity(root, hostname,
                                             [group.address],
                                             group.hosts_lines())
            oci_runtime.protect_agent()
            os.makedirs(self.state_dir, exist_ok=True)
            cmd = self.runtime.prepare(spec)
            keeper, write_end = self._start_keeper(output_max)
            try:
                # argv list, no shell: crun (the image's command runs
                # inside it).
                proc = subprocess.Popen(  # noqa: S603
                    cmd, stdin=subprocess.DEVNULL, stdout=write_end,
                    stderr=write_end, close_fds=True, start_new_session=True)
            except OSError as exc:
                keeper.kill()
                keeper.wait()
                raise WorkloadError('cannot start the OCI runtime %s: %s'
                                    % (self.runtime.binary, exc)) from exc
            finally:
                # Only the workload writes: the keeper sees the end of
                # the output when the workload's last process is gone.
                os.close(write_end)
            try:
                container_pid = self.runtime.wait_created(
                    proc, lambda: self._crun_error(keeper))
            except oci_runtime.RuntimeFailure as exc:
                raise WorkloadError(str(exc)) from None
            self.proc = proc
            self.keeper = keeper
            started = time.time()
            self.meter = rapl.Meter().start()
            self.record = {
                'pid': proc.pid, 'container_pid': container_pid,
                'started': started, 'ended': None, 'exit_code': None,
                'mode': mode, 'command': list(command), 'root': root,
                'output_dir': self.state_dir, 'keeper_pid': keeper.pid,
                'rapl': None,
                'cpus': sorted(cpus) if cpus else None,
                'privileged': privileged,
                'stop_signal': stop_number, 'walltime': seconds,
                'deadline': started + seconds if seconds else None,
                'stop_grace': stop_grace,
                'stop': None}
            self._save()
            self.watcher = threading.Thread(
                target=self._watch, args=(proc,), name='bmc-workload-watch',
                daemon=True)
            self.watcher.start()
            self._arm_walltime()
        LOG.info('Started %s workload %s as pid %d (container init %d, uid '
                 '%d, gid %d, %s) in %s', mode, command, proc.pid,
                 container_pid, user_spec['uid'], user_spec['gid'],
                 'privileged' if privileged else 'confined', root)
        return {'pid': proc.pid, 'container_pid': container_pid,
                'started': round(started, 3)}

    def _watch(self, proc):
        code = proc.wait()
        record = self.record or {}
        if not self._keeper_done(record, DRAIN_TIMEOUT):
            LOG.warning('The output keeper of workload pid %d still runs '
                        '%d s after it: a process of the workload may hold '
                        'its output open', proc.pid, DRAIN_TIMEOUT)
        meter = self.meter
        energy = meter.stop() if meter is not None else None
        timer = None
        with self.lock:
            if self.record and self.record.get('pid') == proc.pid:
                self.record['exit_code'] = code
                self.record['ended'] = time.time()
                self.record['rapl'] = energy
                self._save()
                timer = self.timer      # this workload's, not a later one's
        # A walltime stop under way records how it ended before the exit
        # is told (and before this thread, which callers join, ends).
        if not workload_stop.end_timer(timer, workload_stop.KILL_WAIT):
            LOG.warning('The walltime stop of workload pid %d still runs',
                        proc.pid)
        LOG.info('Workload pid %d exited with %d', proc.pid, code)
        self._tell_exit(record)

    def status(self):
        with self.lock:
            record = self.record
            if not record:
                return {'state': protocol.WORKLOAD_ABSENT, 'exit_code': None,
                        'output_tail': '', 'stages': []}
            running = self._running()
        if not running:
            # Exited only once its output is all written.
            self._keeper_done(record, DRAIN_TIMEOUT)
        with self.lock:
            if (not running and record.get('exit_code') is None
                    and self.proc is not None):
                # Exited, the watcher has not recorded it yet.
                record['exit_code'] = self.proc.wait()
                record['ended'] = time.time()
                self._save()
            state = (protocol.WORKLOAD_RUNNING if running
                     else protocol.WORKLOAD_EXITED)
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
            kept = output_keeper.read_state(record['output_dir']) or {}
            return {'state': state, 'exit_code': record.get('exit_code'),
                    'output_tail': workload_output.tail(
                        record['output_dir']),
                    'output': {'bytes': kept.get('bytes', 0),
                               'dropped': kept.get('dropped', 0)},
                    'pid': record['pid'], 'mode': record.get('mode'),
                    'cpus': record.get('cpus'), 'rapl': energy,
                    'privileged': record.get('privileged'),
                    'walltime': record.get('walltime'),
                    'stop': record.get('stop'), 'stages': stages}
