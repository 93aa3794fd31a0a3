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

"""Workload tests run real processes; only the chroot is mocked.

``os.chroot`` is patched in the parent, and the child created by fork
inherits the patched module, so the command runs in the test's own root
while everything else (session, env, cwd, output, signals) is real.
"""

import json
import os
import signal
import tempfile
import time
import unittest
from unittest import mock

from ipa_hardware_manager import rapl
from ipa_hardware_manager import tunables
from ipa_hardware_manager import workload
from bmc_common import protocol


def _wait_exit(sup, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = sup.status()
        if status['state'] != 'running':
            return status
        time.sleep(0.05)
    raise AssertionError('workload still running')


class SupervisorTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.state = os.path.join(self.tmp.name, 'state')
        self.chroot = mock.patch.object(os, 'chroot', autospec=True)
        self.mock_chroot = self.chroot.start()
        self.addCleanup(self.chroot.stop)
        self.sup = workload.Supervisor(self.state)
        self.addCleanup(self._kill)

    def _kill(self):
        rec = self.sup.record
        if rec and self.sup._running():
            os.killpg(rec['pid'], signal.SIGKILL)
        if self.sup.watcher is not None:
            self.sup.watcher.join(10)

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

    def test_workload_cpus_from_tunables(self):
        cpu = max(os.sched_getaffinity(0))
        with mock.patch.object(tunables, 'workload_cpus', autospec=True,
                               return_value={cpu}):
            self.sup.start('/', ['sh', '-c', 'grep Cpus_allowed_list '
                                 '/proc/self/status'])
        status = _wait_exit(self.sup)
        self.assertEqual([cpu], status['cpus'])
        self.assertEqual('Cpus_allowed_list:\t%d\n' % cpu,
                         status['output_tail'])

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
        self.mock_chroot.assert_not_called()  # only called in the child

    def test_output_tail_is_bounded(self):
        script = 'head -c 20000 /dev/zero | tr "\\0" a; echo END'
        self.sup.start('/', ['sh', '-c', script])
        status = _wait_exit(self.sup)
        self.assertEqual(protocol.OUTPUT_TAIL_BYTES,
                         len(status['output_tail']))
        self.assertTrue(status['output_tail'].endswith('aEND\n'))

    def test_default_env(self):
        self.sup.start('/', ['sh', '-c', 'echo $PATH $HOME $container'])
        status = _wait_exit(self.sup)
        self.assertEqual('%s /root bmc\n' % workload.DEFAULT_PATH,
                         status['output_tail'])

    def test_runs_in_own_session(self):
        self.sup.start('/', ['sh', '-c', 'ps -o sid= -p $$; echo $$'])
        status = _wait_exit(self.sup)
        sid, pid = status['output_tail'].split()
        self.assertEqual(sid, pid)

    def test_one_workload_at_a_time(self):
        self.sup.start('/', ['sleep', '30'])
        with self.assertRaisesRegex(workload.WorkloadError,
                                    'already running'):
            self.sup.start('/', ['true'])

    def test_stop_sigterm(self):
        self.sup.start('/', ['sleep', '30'], mode='service')
        self.assertEqual('running', self.sup.status()['state'])
        start = time.monotonic()
        status = self.sup.stop(grace=5)
        self.assertLess(time.monotonic() - start, 4)
        self.assertEqual('exited', status['state'])
        self.assertEqual(-signal.SIGTERM, status['exit_code'])

    def test_stop_escalates_to_sigkill(self):
        script = 'trap "" TERM; echo ready; while :; do sleep 0.1; done'
        self.sup.start('/', ['sh', '-c', script])
        deadline = time.monotonic() + 5
        while 'ready' not in self.sup.status()['output_tail']:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        status = self.sup.stop(grace=0.5)
        self.assertEqual('exited', status['state'])
        self.assertEqual(-signal.SIGKILL, status['exit_code'])

    def test_stop_nothing_running(self):
        self.assertEqual('absent', self.sup.stop()['state'])

    def test_bad_grace(self):
        with self.assertRaisesRegex(workload.WorkloadError, 'grace'):
            self.sup.stop(grace='soon')

    def test_missing_command(self):
        with self.assertRaisesRegex(workload.WorkloadError,
                                    'cannot start /nonexistent'):
            self.sup.start('/', ['/nonexistent/cmd'])

    def test_state_survives_agent_restart(self):
        self.sup.start('/', ['sleep', '30'])
        pid = self.sup.record['pid']
        with open(os.path.join(self.state, workload.STATE_FILE)) as f:
            self.assertEqual(pid, json.load(f)['pid'])
        again = workload.Supervisor(self.state)
        self.assertEqual('running', again.status()['state'])
        status = again.stop(grace=5)
        self.assertEqual('exited', status['state'])
        self.assertIsNone(status['exit_code'])  # not our child: unknown
        self.sup.proc.wait()

    def test_chroot_and_user_in_child(self):
        # The child really calls chroot (patched) with the staged root and
        # then drops to the user: check through the output it produces.
        root = os.path.join(self.tmp.name, 'root')
        os.makedirs(os.path.join(root, 'etc'))
        os.makedirs(os.path.join(root, 'work'))
        with open(os.path.join(root, 'etc', 'passwd'), 'w') as f:
            f.write('root:x:0:0:root:/root:/bin/sh\n')
        chroot_calls = os.path.join(self.tmp.name, 'chroot-called')

        def fake_chroot(path):
            with open(chroot_calls, 'w') as f:
                f.write(path)
        self.mock_chroot.side_effect = fake_chroot
        with mock.patch.object(os, 'chdir', autospec=True) as mock_chdir:
            mock_chdir.side_effect = lambda p: None
            self.sup.start(root, ['id', '-u'], workdir='/work', user='root')
        status = _wait_exit(self.sup)
        with open(chroot_calls) as f:
            self.assertEqual(root, f.read())
        self.assertEqual('0\n', status['output_tail'])


class ValidationTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.sup = workload.Supervisor(os.path.join(self.tmp.name, 's'))

    def _bad(self, message, root='/', **kw):
        args = {'command': ['true']}
        args.update(kw)
        with self.assertRaisesRegex(workload.WorkloadError, message):
            self.sup.start(root, **args)

    def test_command(self):
        self._bad('non-empty list', command='echo hi')
        self._bad('non-empty list', command=[])
        self._bad('non-empty list', command=['echo', 1])

    def test_env(self):
        self._bad('env must map', env={'A': 1})
        self._bad('env must map', env=['A=1'])

    def test_workdir(self):
        self._bad('absolute path', workdir='tmp')
        self._bad('does not exist', workdir='/nonexistent/dir')

    def test_mode(self):
        self._bad('unknown workload mode', mode='daemon')

    def test_no_root(self):
        self._bad('stage the rootfs first', root='/nonexistent/root')


class ResolveUserTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, 'etc'))
        with open(os.path.join(self.root, 'etc', 'passwd'), 'w') as f:
            f.write('root:x:0:0:root:/root:/bin/sh\n'
                    'redis:x:999:998::/data:/bin/false\n')
        with open(os.path.join(self.root, 'etc', 'group'), 'w') as f:
            f.write('root:x:0:\nredis:x:998:\nadm:x:4:\n')

    def test_default_root(self):
        self.assertEqual((0, 0, '/root'),
                         workload.resolve_user(self.root, None))

    def test_name(self):
        self.assertEqual((999, 998, '/data'),
                         workload.resolve_user(self.root, 'redis'))

    def test_name_and_group(self):
        self.assertEqual((999, 4, '/data'),
                         workload.resolve_user(self.root, 'redis:adm'))

    def test_numeric(self):
        self.assertEqual((1234, 5678, '/'),
                         workload.resolve_user(self.root, '1234:5678'))
        self.assertEqual((999, 998, '/data'),
                         workload.resolve_user(self.root, 999))

    def test_unknown(self):
        with self.assertRaisesRegex(workload.WorkloadError, 'user .nobody'):
            workload.resolve_user(self.root, 'nobody')
        with self.assertRaisesRegex(workload.WorkloadError, 'group .wheel'):
            workload.resolve_user(self.root, 'redis:wheel')
