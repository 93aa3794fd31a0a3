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

"""The OCI runtime (crun) as the supervisor drives it.

One container, ``bmc-workload``, whose state crun keeps under the
supervisor's state directory: its bundle (the spec of :mod:`oci_spec`),
``crun run`` in the foreground (it exits with the container's status),
``crun kill`` and ``crun kill --all`` (the whole cgroup), and
``crun delete --force`` for what a previous agent left.
"""

import json
import os
import shutil
import signal
import subprocess
import time

from oslo_log import log

LOG = log.getLogger(__name__)

BINARY = 'crun'
CONTAINER_ID = 'bmc-workload'
BUNDLE_DIR = 'bundle'
PID_FILE = 'container.pid'
#: How long ``crun run`` may take to create the container.
CREATE_TIMEOUT = 60


#: The agent's own ``oom_score_adj``: under memory pressure the OOM killer
#: takes the workload (0, ``oci_spec.WORKLOAD_OOM_SCORE_ADJ``) before the
#: agent, which reports the run and powers the node off at its end.  Not
#: -1000: an agent that leaks can still be killed rather than hang the
#: node (Docker gives dockerd -500).
AGENT_OOM_SCORE_ADJ = -900


def protect_agent(proc='/proc'):
    """Lower the agent's own ``oom_score_adj`` (idempotent); whether it
    could."""
    path = os.path.join(proc, 'self/oom_score_adj')
    try:
        with open(path, 'w') as f:
            f.write('%d\n' % AGENT_OOM_SCORE_ADJ)
    except OSError as exc:
        LOG.warning('Could not lower the agent\'s oom_score_adj: %s', exc)
        return False
    return True


class RuntimeFailure(Exception):
    """The runtime could not do what was asked; says why."""


class Runtime:
    def __init__(self, state_dir, binary=BINARY):
        self.state_dir = state_dir
        self.binary = binary
        self.pid_file = os.path.join(state_dir, PID_FILE)

    def available(self):
        return shutil.which(self.binary) is not None

    def _cmd(self, *args):
        return [self.binary, '--root', os.path.join(self.state_dir, 'crun'),
                *args]

    def call(self, *args, timeout=30):
        """Run a short runtime command; (ok, its output)."""
        try:
            # argv list, no shell: crun with arguments this module builds.
            done = subprocess.run(  # noqa: S603
                self._cmd(*args), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                timeout=timeout, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return False, str(exc)
        return done.returncode == 0, done.stdout.decode(errors='replace')

    def prepare(self, spec):
        """Forget what a previous agent's run left; write the bundle;
        the command that runs the container in the foreground."""
        self.call('delete', '--force', CONTAINER_ID)
        bundle = os.path.join(self.state_dir, BUNDLE_DIR)
        shutil.rmtree(bundle, ignore_errors=True)
        os.makedirs(bundle)
        with open(os.path.join(bundle, 'config.json'), 'w') as f:
            json.dump(spec, f, indent=1)
        if os.path.exists(self.pid_file):
            os.unlink(self.pid_file)
        # env --default-signal: the workload starts with every signal at
        # its default, whatever the agent ignores (a StopSignal ignored
        # at the start cannot be trapped).  choom: the runtime and the
        # container start at the workload's oom_score_adj, not at the
        # agent's (crun 1.8 does not apply the spec's oomScoreAdj 0
        # over an inherited -900: seen on the lab's nodes).
        # --no-pivot: the agent's root is the initramfs, which
        # pivot_root cannot leave.
        oom = spec.get('process', {}).get('oomScoreAdj')
        prefix = []
        if oom is not None and shutil.which('choom'):
            prefix = ['choom', '-n', str(oom), '--']
        elif oom is not None:
            LOG.warning('choom (util-linux) is not in this ramdisk: the '
                        'workload keeps the agent\'s oom_score_adj %d '
                        'instead of %d', AGENT_OOM_SCORE_ADJ, oom)
        return prefix + ['env', '--default-signal'] + self._cmd(
            'run', '--no-pivot', '--bundle', bundle, '--pid-file',
            self.pid_file, CONTAINER_ID)

    def wait_created(self, proc, error_output):
        """The container's init pid once ``crun run`` (``proc``) has
        created it; its own error (``error_output()``) when it could
        not."""
        deadline = time.monotonic() + CREATE_TIMEOUT
        while time.monotonic() < deadline:
            try:
                with open(self.pid_file) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            except (OSError, ValueError):
                pass
            if proc.poll() is not None:
                raise RuntimeFailure('the OCI runtime could not create the '
                                    'container (exit %s): %s' % (
                                        proc.returncode, error_output()))
            time.sleep(0.02)
        proc.kill()
        proc.wait()
        raise RuntimeFailure('the OCI runtime did not create the container '
                            'within %d s: %s' % (CREATE_TIMEOUT,
                                                 error_output()))

    def kill(self, sig, all_processes, container_pid, runtime_pid):
        """``sig`` (a number, or ``KILL``) to the container's init, or with
        ``all_processes`` to its whole cgroup; straight to the processes
        when the runtime cannot."""
        args = ['kill'] + (['--all'] if all_processes else []) + [
            CONTAINER_ID, str(sig)]
        ok, output = self.call(*args)
        if ok:
            return
        LOG.warning('%s %s failed (%s); signalling the processes directly',
                    self.binary, ' '.join(args), output.strip())
        number = int(signal.SIGKILL) if sig == 'KILL' else int(sig)
        targets = [container_pid]
        if all_processes and runtime_pid:
            targets.append(-runtime_pid)    # crun's own process group
        for target in targets:
            if not target:
                continue
            try:
                os.kill(target, number)
            except (ProcessLookupError, PermissionError):
                pass
