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

"""Workload tests run real processes under a stand-in OCI runtime.

``fake_crun.py`` does what the supervisor relies on crun for (run with a
pid file and the container's exit status, kill, kill --all, delete) with
real processes and signals, without namespaces: the spec the supervisor
writes is checked in test_oci_spec and, with crun itself, on a QEMU node
in the e2e tier.
"""

import json
import os
import signal
import tempfile
import threading
import time
import unittest
from unittest import mock

from ipa_hardware_manager import rapl
from ipa_hardware_manager import tunables
from ipa_hardware_manager import workload
from ipa_hardware_manager import workload_stop
from bmc_common import protocol

FAKE_CRUN = os.path.join(os.path.dirname(__file__), 'fake_crun.py')


def _wait_exit(sup, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = sup.status()
        if status['state'] != 'running':
            return status
        time.sleep(0.05)
    raise AssertionError('workload still running')


def _wait_output(sup, text, timeout=5):
    deadline = time.monotonic() + timeout
    while text not in sup.status()['output_tail']:
        if time.monotonic() > deadline:
            raise AssertionError('no %r in the output' % text)
        time.sleep(0.05)


class SupervisorTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.state = os.path.join(self.tmp.name, 'state')
        self.sup = workload.Supervisor(self.state, runtime=FAKE_CRUN)
        self.addCleanup(self._kill)
        # Most tests run the fake runtime on '/': neither the host's /etc
        # nor the test process's oom_score_adj is touched.
        self.identity = mock.patch.object(
            workload.container_etc, 'write_identity', autospec=True).start()
        self.protect = mock.patch.object(
            workload.oci_runtime, 'protect_agent', autospec=True).start()
        self.addCleanup(mock.patch.stopall)

    def _kill(self):
        rec = self.sup.record
        if rec and rec.get('pid') and self.sup._running():
            try:
                os.killpg(rec['container_pid'], signal.SIGKILL)
            except ProcessLookupError:
                pass    # it ended between the check and the kill
        # The walltime thread may be mid-stop: it must have saved the
        # record for the last time before the state directory goes.
        self.assertTrue(self.sup.cancel_walltime(15),
                        'the walltime stop still runs')
        if self.sup.watcher is not None:
            self.sup.watcher.join(10)

    def _calls(self):
        with open(os.path.join(self.state, 'crun', 'calls')) as f:
            return f.read().splitlines()

    def _spec(self):
        with open(os.path.join(self.state, workload.BUNDLE_DIR,
                               'config.json')) as f:
            return json.load(f)

    def test_rapl_absent_reason(self):
        with mock.patch.object(rapl, 'snapshot', autospec=True,
                               return_value=rapl.absent('no RAPL here')):
            self.sup.start('/', ['true'])
            status = _wait_exit(self.sup)
        self.assertEqual({'state': 'absent', 'reason': 'no RAPL here'},
                         status['rapl'])

    def test_rapl_energy_of_the_workload_window(self):
        snaps = iter([100.0, 103.5])

        def snapshot(root='/'):
            return {'state': 'present', 'time': time.time(),
                    'monotonic': time.monotonic(), 'zones': {
                        'intel-rapl:0': {
                            'name': 'package-0', 'max_energy_range_uj': 10**9,
                            'energy_uj': int(next(snaps, 103.5) * 1e6)}}}
        with mock.patch.object(rapl, 'snapshot', side_effect=snapshot):
            self.sup.start('/', ['true'])
            self.sup.watcher.join(10)
            status = self.sup.status()
        self.assertEqual('measured', status['rapl']['state'])
        self.assertEqual(3.5, status['rapl']['joules'])
        self.assertFalse(status['rapl']['running'])

    def test_workload_cpus_go_to_its_cgroup(self):
        with mock.patch.object(tunables, 'workload_cpus', autospec=True,
                               return_value={3, 1}):
            self.sup.start('/', ['true'])
        status = _wait_exit(self.sup)
        self.assertEqual([1, 3], status['cpus'])
        self.assertEqual({'cpus': '1,3'},
                         self._spec()['linux']['resources']['cpu'])
        self.assertEqual(workload.CGROUP_PATH,
                         self._spec()['linux']['cgroupsPath'])

    def test_absent(self):
        self.assertEqual({'state': 'absent', 'exit_code': None,
                          'output_tail': '', 'stages': []},
                         self.sup.status())

    def test_job_exit_code_and_output(self):
        result = self.sup.start(
            '/', ['sh', '-c', 'echo "hello $GREETING from $(pwd)"; exit 3'],
            env={'GREETING': 'bmc'}, workdir='/tmp', mode='job')
        self.assertIsInstance(result['pid'], int)
        self.assertIsInstance(result['started'], float)
        status = _wait_exit(self.sup)
        self.assertEqual('exited', status['state'])
        self.assertEqual(3, status['exit_code'])
        self.assertEqual('hello bmc from /tmp\n', status['output_tail'])
        self.assertEqual([protocol.STAGE_WORKLOAD_STARTED,
                          protocol.STAGE_WORKLOAD_EXITED],
                         [s['name'] for s in status['stages']])
        run = self._calls()[-1].split()
        self.assertEqual(['run', '--no-pivot', '--bundle'], run[:3])
        self.assertEqual(workload.CONTAINER_ID, run[-1])

    def _hooked(self):
        told = threading.Event()
        self.sup.exit_hook = told.set
        return told

    def test_an_exit_of_its_own_is_told(self):
        told = self._hooked()
        self.sup.start('/', ['sh', '-c', 'exit 0'])
        self.assertTrue(told.wait(10))

    def test_a_walltime_end_is_told(self):
        told = self._hooked()
        self.sup.start('/', ['sh', '-c', 'sleep 30'], walltime='0.3',
                       stop_grace=0.5)
        self.assertTrue(told.wait(15))

    def test_a_requested_stop_is_not_told(self):
        told = self._hooked()
        self.sup.start('/', ['sh', '-c', 'echo ready; exec sleep 30'])
        _wait_output(self.sup, 'ready')
        self.sup.stop(grace=2, reason=protocol.STOP_UNDEPLOY)
        self.sup.watcher.join(10)
        self.assertFalse(told.is_set())

    def test_a_failing_hook_changes_nothing(self):
        self.sup.exit_hook = mock.Mock(side_effect=RuntimeError('no API'))
        self.sup.start('/', ['sh', '-c', 'exit 4'])
        self.assertEqual(4, _wait_exit(self.sup)['exit_code'])
        self.sup.watcher.join(10)
        self.sup.exit_hook.assert_called_once_with()

    def test_stale_container_deleted_first(self):
        self.sup.start('/', ['true'])
        _wait_exit(self.sup)
        self.assertEqual('delete --force %s' % workload.CONTAINER_ID,
                         self._calls()[0])

    def test_output_tail_is_bounded(self):
        script = 'head -c 20000 /dev/zero | tr "\\0" a; echo END'
        self.sup.start('/', ['sh', '-c', script])
        status = _wait_exit(self.sup)
        self.assertEqual(protocol.OUTPUT_TAIL_BYTES,
                         len(status['output_tail']))
        self.assertTrue(status['output_tail'].endswith('aEND\n'))

    def test_output_kept_bounded_by_the_keeper(self):
        script = ('i=0; while [ $i -lt 12000 ]; do echo "line $i of the '
                  'job"; i=$((i+1)); done; echo END >&2')
        self.sup.start('/', ['sh', '-c', script], output_max=131072)
        status = _wait_exit(self.sup)
        self.assertTrue(status['output_tail'].endswith('line 11999 of the '
                                                       'job\nEND\n'))
        kept = sum(os.path.getsize(p) for p in
                   workload.output_keeper.files(self.state))
        self.assertLessEqual(kept, 131072)
        self.assertEqual(status['output']['bytes'],
                         kept + status['output']['dropped'])
        self.assertGreater(status['output']['dropped'], 0)

    def test_bad_output_max(self):
        with self.assertRaisesRegex(workload.WorkloadError, 'output_max'):
            self.sup.start('/', ['true'], output_max=10)

    def test_default_env(self):
        self.sup.start('/', ['sh', '-c', 'echo $PATH $HOME $container'])
        status = _wait_exit(self.sup)
        self.assertEqual('%s /root bmc\n' % workload.DEFAULT_PATH,
                         status['output_tail'])

    def test_runtime_leads_its_own_session(self):
        self.sup.start('/', ['sleep', '30'])
        pid = self.sup.record['pid']
        self.assertEqual(pid, os.getsid(pid))

    def test_one_workload_at_a_time(self):
        self.sup.start('/', ['sleep', '30'])
        with self.assertRaisesRegex(workload.WorkloadError, 'is running'):
            self.sup.start('/', ['true'])

    def test_stop_with_the_images_stop_signal(self):
        # The signal state is printed for the failure message: a shell
        # cannot trap a signal ignored (or blocked) when it started.
        script = ('grep -E "^Sig(Blk|Ign)" /proc/self/status; '
                  'trap "echo got INT; exit 0" INT; echo ready; '
                  'while :; do sleep 0.1; done')
        self.sup.start('/', ['sh', '-c', script], mode='service',
                       stop_signal='SIGINT')
        _wait_output(self.sup, 'ready')
        # The stop's clock stands still while it waits: its grace cannot
        # run out, so it returns only by seeing the workload end on the
        # signal (not by waiting the grace out), however slow the
        # machine.  Only after 1200 polls does the clock move, by a day at
        # each poll, so that a stop that never sees the end fails instead
        # of hanging.
        polls = []

        def sleep(seconds):
            polls.append(seconds)
            time.sleep(seconds)

        with mock.patch.object(workload_stop, 'time',
                               autospec=True) as mock_time:
            mock_time.time.side_effect = time.time
            mock_time.monotonic.side_effect = lambda: (
                100.0 + 86400.0 * max(0, len(polls) - 1199))
            mock_time.sleep.side_effect = sleep
            status = self.sup.stop(grace=5, reason=protocol.STOP_UNDEPLOY)
        self.assertEqual('exited', status['state'])
        self.assertEqual(0, status['exit_code'], status)
        self.assertIn('got INT', status['output_tail'])
        self.assertEqual({'reason': 'undeploy', 'signal': 'SIGINT',
                          'grace': 5.0, 'killed': False},
                         {k: status['stop'][k] for k in
                          ('reason', 'signal', 'grace', 'killed')})
        # Its duration is read on the same clock: none of the grace
        # passed; and it polled for the end, never slept the grace away.
        self.assertEqual(0.0, status['stop']['seconds'])
        self.assertTrue(polls)
        self.assertEqual([], [p for p in polls if p >= 5], polls)
        self.assertIn('kill %s 2' % workload.CONTAINER_ID, self._calls())
        self.assertNotIn('kill --all %s KILL' % workload.CONTAINER_ID,
                         self._calls())

    def test_stop_escalates_to_sigkill_of_the_cgroup(self):
        script = 'trap "" TERM; echo ready; while :; do sleep 0.1; done'
        self.sup.start('/', ['sh', '-c', script])
        _wait_output(self.sup, 'ready')
        status = self.sup.stop(grace=0.5)
        self.assertEqual('exited', status['state'])
        self.assertEqual(128 + signal.SIGKILL, status['exit_code'])
        self.assertTrue(status['stop']['killed'])
        self.assertIn('kill --all %s KILL' % workload.CONTAINER_ID,
                      self._calls())

    def test_walltime_ends_the_workload(self):
        script = 'trap "" TERM; while :; do sleep 0.1; done'
        self.sup.start('/', ['sh', '-c', script], walltime='0.5',
                       stop_grace=0.5)
        status = _wait_exit(self.sup, timeout=15)
        self.assertEqual(protocol.STOP_WALLTIME, status['stop']['reason'])
        self.assertEqual(0.5, status['stop']['grace'])
        self.assertTrue(status['stop']['killed'])
        self.assertEqual(0.5, status['walltime'])
        self.assertEqual(128 + signal.SIGKILL, status['exit_code'])

    def test_walltime_rearmed_by_a_restarted_agent(self):
        self.sup.start('/', ['sleep', '30'], walltime=1)
        self.sup.timer.cancel()     # this agent "dies"
        again = workload.Supervisor(self.state, runtime=FAKE_CRUN)
        self.addCleanup(lambda: self.assertTrue(again.cancel_walltime(15)))
        # (The helper's timeout bounds a hang only.)
        self.assertEqual(protocol.STOP_WALLTIME,
                         _wait_exit(again, timeout=15)['stop']['reason'])
        self.sup.proc.wait()

    def test_stop_nothing_running(self):
        self.assertEqual('absent', self.sup.stop()['state'])

    def test_bad_grace(self):
        with self.assertRaisesRegex(workload.WorkloadError, 'grace'):
            self.sup.stop(grace='soon')
        with self.assertRaisesRegex(workload.WorkloadError, 'grace'):
            self.sup.stop(grace=-1)

    def test_runtime_failure_is_an_error_with_its_message(self):
        with self.assertRaisesRegex(workload.WorkloadError,
                                    'could not create the container.*'
                                    'nonexistent/cmd. not found'):
            self.sup.start('/', ['/nonexistent/cmd'])
        self.assertIsNone(self.sup.record)
        self.assertEqual('absent', self.sup.status()['state'])

    def test_no_runtime_in_the_ramdisk(self):
        sup = workload.Supervisor(self.state, runtime='/nonexistent/crun')
        with self.assertRaisesRegex(workload.WorkloadError,
                                    'rebuild it with the bmc-agent'):
            sup.start('/', ['true'])

    def test_state_survives_agent_restart(self):
        self.sup.start('/', ['sleep', '30'])
        pid = self.sup.record['pid']
        with open(os.path.join(self.state, workload.STATE_FILE)) as f:
            self.assertEqual(pid, json.load(f)['pid'])
        again = workload.Supervisor(self.state, runtime=FAKE_CRUN)
        self.assertEqual('running', again.status()['state'])
        status = again.stop(grace=5)
        self.assertEqual('exited', status['state'])
        self.assertIsNone(status['exit_code'])  # not our child: unknown
        self.sup.proc.wait()

    def test_workload_outlives_its_runtime_process_and_the_agent(self):
        # The agent's service cgroup killed: crun run with it, not the
        # container.
        self.sup.start('/', ['sleep', '30'])
        record = self.sup.record
        with self.sup.lock:
            # The agent is gone: nothing of it records crun's end.
            self.sup.record = {'pid': None}
        os.kill(record['pid'], signal.SIGKILL)
        self.sup.proc.wait()
        again = workload.Supervisor(self.state, runtime=FAKE_CRUN)
        self.assertEqual('running', again.status()['state'])
        status = again.stop(grace=5)
        self.assertEqual('exited', status['state'])
        self.assertFalse(status['stop']['killed'])
        self.assertFalse(workload.pid_alive(record['container_pid']))

    def test_user_and_privileged_reach_the_spec(self):
        root = os.path.join(self.tmp.name, 'root')
        os.makedirs(os.path.join(root, 'etc'))
        os.makedirs(os.path.join(root, 'work'))
        with open(os.path.join(root, 'etc', 'passwd'), 'w') as f:
            f.write('root:x:0:0:root:/root:/bin/sh\n')
        self.sup.start(root, ['true'], workdir='/work', user='root',
                       privileged=False, rlimits={'nofile': 4096})
        _wait_exit(self.sup)
        spec = self._spec()
        self.assertEqual(root, spec['root']['path'])
        self.assertEqual('/work', spec['process']['cwd'])
        self.assertIn({'type': 'RLIMIT_NOFILE', 'soft': 4096, 'hard': 4096},
                      spec['process']['rlimits'])
        self.assertIn({'type': 'ipc'}, spec['linux']['namespaces'])
        self.assertFalse(self.sup.status()['privileged'])
        # A confined container's own hostname, in its /etc too; the agent
        # protected itself from the OOM killer, the workload is not.
        self.assertEqual('bmc-workload', spec['hostname'])
        self.identity.assert_called_once_with(root, 'bmc-workload')
        self.protect.assert_called_once_with()
        self.assertEqual(0, spec['process']['oomScoreAdj'])

    def test_privileged_has_the_nodes_hostname(self):
        with mock.patch.object(workload.oci_spec.socket, 'gethostname',
                               autospec=True, return_value='node-7'):
            self.sup.start('/', ['true'])
        _wait_exit(self.sup)
        self.identity.assert_called_once_with('/', 'node-7')
        self.assertIn('HOSTNAME=node-7', self._spec()['process']['env'])


class ValidationTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.sup = workload.Supervisor(os.path.join(self.tmp.name, 's'),
                                       runtime=FAKE_CRUN)
        for name in ('write_identity', 'protect_agent'):
            target = (workload.container_etc if name == 'write_identity'
                      else workload.oci_runtime)
            mock.patch.object(target, name, autospec=True).start()
        self.addCleanup(mock.patch.stopall)

    def _bad(self, message, root='/', **kw):
        args = {'command': ['true']}
        args.update(kw)
        with self.assertRaisesRegex(workload.WorkloadError, message):
            self.sup.start(root, **args)
        self.assertIsNone(self.sup.record)

    def test_command(self):
        self._bad('non-empty list', command='echo hi')
        self._bad('non-empty list', command=[])
        self._bad('non-empty list', command=['echo', 1])

    def test_env(self):
        self._bad('env must map', env={'A': 1})
        self._bad('env must map', env=['A=1'])

    def test_workdir(self):
        self._bad('absolute path', workdir='tmp')
        # Never made on the node's own root.
        self._bad('not a directory', workdir='/nonexistent/dir')
        self.assertFalse(os.path.exists('/nonexistent'))

    def test_mode(self):
        self._bad('unknown workload mode', mode='daemon')

    def test_no_root(self):
        self._bad('stage the rootfs first', root='/nonexistent/root')

    def test_stop_signal(self):
        self._bad('not a signal name', stop_signal='SIGNOPE')
        self._bad('not a signal number', stop_signal='999')

    def test_walltime(self):
        self._bad('stop_grace', walltime=10, stop_grace=-1)
        self._bad('more than 0', walltime=0)
        self._bad('more than 0', walltime='-5')
        self._bad('not a duration', walltime='soon')

    def test_privileged(self):
        self._bad('privileged must be true or false', privileged='yes')

    def test_rlimits(self):
        self._bad('unknown rlimit', rlimits={'files': 10})

    def test_unknown_user(self):
        self._bad('user .no-such-user. is not in the image',
                  user='no-such-user')
