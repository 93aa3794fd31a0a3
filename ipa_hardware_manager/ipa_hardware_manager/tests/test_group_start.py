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

"""A run group member's start: the step, the supervisor, the spec."""

import json
import os
import tempfile
import unittest
from unittest import mock

from ironic_python_agent import errors

from ipa_hardware_manager import container_etc
from ipa_hardware_manager import group
from ipa_hardware_manager import manager
from ipa_hardware_manager import oci_spec
from ipa_hardware_manager import rootfs
from ipa_hardware_manager import rootfs_verity
from ipa_hardware_manager import workload
from ipa_hardware_manager.tests import group_fixtures as fx
from ipa_hardware_manager.tests import test_workload

NODE = {'uuid': 'node-1', 'instance_info': {}}


@mock.patch.object(rootfs_verity, 'integrity_problem', autospec=True,
                   return_value=None)
@mock.patch.object(rootfs, 'load', autospec=True,
                   return_value={'root': '/var/lib/bmc/root'})
class StartStepTest(unittest.TestCase):
    def setUp(self):
        self.hwm = manager.BmcContainerHardwareManager()
        self.sup = self.hwm._supervisor = mock.Mock(spec=workload.Supervisor)
        self.sup.status.return_value = {'state': 'absent'}
        self.sup.start.return_value = {'pid': 42, 'started': 1.0}
        self.calls = []
        for name in ('check_image', 'setup', 'wait_for_peers'):
            patcher = mock.patch.object(group.Member, name, autospec=True,
                                        side_effect=self._called(name))
            patcher.start()
        self.addCleanup(mock.patch.stopall)

    def _called(self, name):
        def call(member, *args, **kwargs):
            self.calls.append((name, args))
            if name == 'setup':
                member.interface_name = 'eth1'
            if name == 'wait_for_peers':
                return 1.5 if member.rank == 0 else None
        return call

    def start(self, **kw):
        args = {'command': ['mpirun', 'app'], 'env': {'A': 'b'}}
        args.update(kw)
        return self.hwm.bmc_start_workload(NODE, [], **args)

    def test_calls_through(self, mock_load, mock_problem):
        result = self.start(group=fx.group(rank=0), user='root')
        self.assertEqual(
            [('check_image', ('/var/lib/bmc/root', 'root', True)),
             ('setup', ('/var/lib/bmc/root', True)),
             ('wait_for_peers', ())], self.calls)
        kwargs = self.sup.start.call_args[1]
        member = kwargs['group']
        self.assertIsInstance(member, group.Member)
        self.assertEqual('job-0', member.hostname)
        # The supervisor merges the env and swaps the command.
        self.assertEqual({'A': 'b'}, kwargs['env'])
        self.assertEqual(['mpirun', 'app'], self.sup.start.call_args[0][1])
        self.assertEqual({'pid': 42, 'started': 1.0, 'group': {
            'interface': 'eth1', 'address': '192.168.50.10/24',
            'peers_ready': 1.5}}, result)

    def test_other_rank(self, mock_load, mock_problem):
        result = self.start(group=fx.group(rank=2), privileged=False,
                            user='0')
        self.assertEqual(('check_image', ('/var/lib/bmc/root', '0', False)),
                         self.calls[0])
        self.assertIsNone(result['group']['peers_ready'])

    def test_without_group_unchanged(self, mock_load, mock_problem):
        self.assertEqual({'pid': 42, 'started': 1.0}, self.start())
        self.assertNotIn('group', self.sup.start.call_args[1])
        self.assertEqual([], self.calls)

    def test_bad_group(self, mock_load, mock_problem):
        with self.assertRaisesRegex(
                errors.DeploymentError, 'Deploy step failed: '
                'bmc_start_workload: group rank must be an integer from 0 '
                'to 2, got 5$'):
            self.start(group=fx.group(rank=5))
        self.assertEqual([], self.calls)
        self.sup.start.assert_not_called()

    def test_bad_arguments_fail_before_the_wait(self, mock_load,
                                                mock_problem):
        with self.assertRaisesRegex(errors.DeploymentError,
                                    'unknown workload mode'):
            self.start(group=fx.group(rank=0), mode='daemon')
        self.assertEqual([], self.calls)

    def test_group_error_is_a_deployment_error(self, mock_load,
                                               mock_problem):
        group.Member.check_image.side_effect = group.GroupError(
            'the image has no /usr/sbin/sshd: container_group_launcher=ssh '
            'needs openssh-server in the image, or use none')
        with self.assertRaisesRegex(
                errors.DeploymentError, 'Deploy step failed: '
                'bmc_start_workload: the image has no /usr/sbin/sshd'):
            self.start(group=fx.group(rank=1))
        self.sup.start.assert_not_called()

    def test_refused_while_running(self, mock_load, mock_problem):
        self.sup.status.return_value = {'state': 'running'}
        with self.assertRaisesRegex(errors.DeploymentError,
                                    'a workload is running; stop it first'):
            self.start(group=fx.group(rank=1))
        self.assertEqual([], self.calls)

    @mock.patch.object(manager, 'kernel_profile_reset', autospec=True,
                       return_value=0.25)
    def test_the_profile_is_reset_after_the_wait(self, mock_reset,
                                                 mock_load, mock_problem):
        mock_reset.side_effect = lambda: self.calls.append(('reset', ()))
        self.start(group=fx.group(rank=0), kernel_profile='gcov')
        self.assertEqual(['check_image', 'setup', 'wait_for_peers', 'reset'],
                         [c[0] for c in self.calls])


class SupervisorTest(unittest.TestCase):
    """The supervisor's side, with the stand-in runtime (as
    test_workload's: short workloads, each waited for)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.state = os.path.join(self.tmp.name, 'state')
        self.sup = workload.Supervisor(self.state,
                                       runtime=test_workload.FAKE_CRUN)
        self.addCleanup(self._joined)
        self.identity = mock.patch.object(
            workload.container_etc, 'write_identity', autospec=True).start()
        mock.patch.object(workload.oci_runtime, 'protect_agent',
                          autospec=True).start()
        self.addCleanup(mock.patch.stopall)

    def _joined(self):
        if self.sup.watcher is not None:
            self.sup.watcher.join(10)

    def _spec(self):
        with open(os.path.join(self.state, workload.BUNDLE_DIR,
                               'config.json')) as f:
            return json.load(f)

    def member(self, rank, launcher='none'):
        member = group.validate(fx.group(rank=rank, launcher=launcher))
        member.interface_name = 'eth1'
        return member

    def root(self):
        root = os.path.join(self.tmp.name, 'root')
        os.makedirs(os.path.join(root, 'etc'))
        with open(os.path.join(root, 'etc', 'passwd'), 'w') as f:
            f.write('root:x:0:0:root:/root:/bin/sh\n')
        return root

    def env(self):
        return dict(e.split('=', 1)
                    for e in self._spec()['process']['env'])

    def test_confined_member(self):
        root = self.root()
        member = self.member(1)
        self.sup.start(root, ['true'], env={'BMC_RANK': '9', 'A': 'b'},
                       privileged=False, group=member)
        test_workload._wait_exit(self.sup)
        spec = self._spec()
        self.assertEqual('job-1', spec['hostname'])
        env = self.env()
        self.assertEqual(('job-1', '1', 'b', 'eth1', '192.168.50.11'),
                         (env['HOSTNAME'], env['BMC_RANK'], env['A'],
                          env['BMC_GROUP_IFACE'], env['BMC_GROUP_ADDRESS']))
        self.identity.assert_called_once_with(
            root, 'job-1', ['192.168.50.11'], member.hosts_lines())

    def test_privileged_member(self):
        self.sup.start(self.root(), ['true'], group=self.member(0))
        test_workload._wait_exit(self.sup)
        self.assertNotIn('hostname', self._spec())
        self.assertEqual('job-0', self.env()['HOSTNAME'])

    def test_other_rank_runs_sshd(self):
        with mock.patch.object(group.Member, 'command', autospec=True,
                               return_value=['sh', '-c', 'exit 3']):
            self.sup.start(self.root(), ['mpirun'],
                           group=self.member(1, 'ssh'))
        self.assertEqual(3, test_workload._wait_exit(self.sup)['exit_code'])
        self.assertEqual(['sh', '-c', 'exit 3'],
                         self._spec()['process']['args'])
        self.assertEqual(['sh', '-c', 'exit 3'], self.sup.record['command'])
        self.assertEqual(['/usr/sbin/sshd', '-D', '-e', '-f',
                          '/etc/bmc/group/sshd_config'],
                         self.member(1, 'ssh').command(['mpirun']))

    def test_bad_env_before_the_merge(self):
        with self.assertRaisesRegex(workload.WorkloadError, 'env must map'):
            self.sup.start(self.root(), ['true'], env=['A=b'],
                           group=self.member(0))


class SpecTest(unittest.TestCase):
    def test_group_hostname_in_both_shapes(self):
        self.assertEqual('job-1', oci_spec.hostname_of(False, 'node',
                                                       'job-1'))
        self.assertEqual('job-1', oci_spec.hostname_of(True, 'node',
                                                       'job-1'))
        self.assertEqual('bmc-workload', oci_spec.hostname_of(False, 'node'))
        with tempfile.TemporaryDirectory() as root:
            spec = oci_spec.build(root, ['true'], privileged=False,
                                  hostname='job-1', group_hostname='job-1')
        self.assertEqual('job-1', spec['hostname'])
        self.assertIn('HOSTNAME=job-1', spec['process']['env'])


class HostsTest(unittest.TestCase):
    def test_member_lines_end_the_hosts_file(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, 'etc'))
            container_etc.write_identity(
                root, 'job-1', ['192.168.50.11'],
                ['192.168.50.10\tjob-0', '192.168.50.11\tjob-1'])
            with open(os.path.join(root, 'etc', 'hosts')) as f:
                hosts = f.read()
            with open(os.path.join(root, 'etc', 'hostname')) as f:
                self.assertEqual('job-1\n', f.read())
        self.assertEqual('127.0.0.1\tlocalhost\n'
                         '::1\tlocalhost ip6-localhost ip6-loopback\n'
                         '192.168.50.11\tjob-1\n'
                         '192.168.50.10\tjob-0\n'
                         '192.168.50.11\tjob-1\n', hosts)
