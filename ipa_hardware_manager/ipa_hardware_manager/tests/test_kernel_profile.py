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

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import unittest
from unittest import mock

from ironic_python_agent import errors

from bmc_common import protocol
from ipa_hardware_manager import kernel_profile
from ipa_hardware_manager import manager
from ipa_hardware_manager import rootfs
from ipa_hardware_manager import workload

NODE = {'uuid': 'n1'}
OBJ = 'var/lib/ironic/bmc-kernel-builds/builds/%s/obj' % ('ab' * 12)


class KernelProfileTest(unittest.TestCase):

    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        base = os.path.join(self.root, OBJ, 'kernel')
        os.makedirs(base)
        with open(os.path.join(base, 'fork.gcda'), 'wb') as f:
            f.write(b'counts of fork')
        # The kernel's .gcno entries are symlinks into the build tree.
        os.symlink('/nonexistent/fork.gcno', os.path.join(base, 'fork.gcno'))
        with open(os.path.join(self.root, 'reset'), 'w'):
            pass

    def test_reset_writes_the_reset_file(self):
        kernel_profile.reset(self.root)
        with open(os.path.join(self.root, 'reset')) as f:
            self.assertEqual('1', f.read())

    def test_collect_reads_every_gcda_into_a_tar(self):
        result = kernel_profile.collect(1000, self.root)
        data = protocol.unpack(result['data'])
        self.assertEqual(hashlib.sha256(data).hexdigest(), result['sha256'])
        self.assertEqual((1, 14), (result['files'], result['bytes']))
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            self.assertEqual([OBJ + '/kernel/fork.gcda'], tar.getnames())
            self.assertEqual(b'counts of fork', tar.extractfile(
                OBJ + '/kernel/fork.gcda').read())
        self.assertIn('emulated', result['machine'])

    def test_collect_is_bounded(self):
        self.assertRaisesRegex(kernel_profile.KernelProfileError,
                               'more than 10 bytes', kernel_profile.collect,
                               10, self.root)

    def test_a_kernel_without_gcov_is_named(self):
        missing = os.path.join(self.root, 'nope')
        self.assertRaisesRegex(
            kernel_profile.KernelProfileError,
            'container_kernel_profile=gcov: the booted kernel .* has no '
            'gcov profile', kernel_profile.reset, missing)
        self.assertRaises(kernel_profile.KernelProfileError,
                          kernel_profile.collect, 100, missing)

    def test_machine_tells_tcg_from_kvm_and_hardware(self):
        def machine(cpuinfo, clock):
            with open(os.path.join(self.root, 'cpuinfo'), 'w') as f:
                f.write(cpuinfo)
            with open(os.path.join(self.root, 'clock'), 'w') as f:
                f.write(clock + '\n')
            return kernel_profile.machine(os.path.join(self.root, 'cpuinfo'),
                                          os.path.join(self.root, 'clock'))
        qemu = ('model name\t: QEMU Virtual CPU version 2.5+\n'
                'flags\t\t: fpu tsc hypervisor\n')
        self.assertTrue(machine(qemu, 'tsc')['emulated'])
        self.assertFalse(machine(qemu, 'kvm-clock')['emulated'])
        real = ('model name\t: Intel(R) Xeon(R) Gold 6230\n'
                'flags\t\t: fpu tsc\n')
        found = machine(real, 'tsc')
        self.assertEqual((False, False, 'Intel(R) Xeon(R) Gold 6230'),
                         (found['emulated'], found['hypervisor'],
                          found['cpu_model']))


class ProfileStepsTest(unittest.TestCase):

    def setUp(self):
        self.hwm = manager.BmcContainerHardwareManager()
        self.sup = self.hwm._supervisor = mock.Mock(spec=workload.Supervisor)
        self.sup.status.return_value = {'state': 'absent'}

    @mock.patch.object(manager, 'kernel_profile_reset', autospec=True)
    @mock.patch.object(rootfs, 'load', autospec=True)
    def test_start_resets_the_counters_before_the_workload(self, mock_load,
                                                           mock_reset):
        mock_load.return_value = {'root': '/r'}
        order = []
        mock_reset.side_effect = lambda: order.append('reset') or 12.5
        self.sup.start.side_effect = lambda *a, **k: order.append(
            'start') or {'pid': 1, 'started': 13.0}
        result = self.hwm.bmc_start_workload(NODE, [], command=['true'],
                                             kernel_profile='gcov')
        self.assertEqual(['reset', 'start'], order)
        self.assertEqual({'reset': 12.5}, result['kernel_profile'])

    @mock.patch.object(manager, 'kernel_profile_reset', autospec=True)
    @mock.patch.object(rootfs, 'load', autospec=True)
    def test_no_gcov_kernel_fails_the_start(self, mock_load, mock_reset):
        mock_load.return_value = {'root': '/r'}
        mock_reset.side_effect = kernel_profile.KernelProfileError(
            'container_kernel_profile=gcov: the booted kernel has no gcov')
        self.assertRaisesRegex(errors.DeploymentError,
                               'bmc_start_workload: container_kernel_profile'
                               '=gcov: the booted kernel has no gcov',
                               self.hwm.bmc_start_workload, NODE, [],
                               command=['true'], kernel_profile='gcov')
        self.sup.start.assert_not_called()

    @mock.patch.object(rootfs, 'load', autospec=True)
    def test_an_unknown_profile_is_refused(self, mock_load):
        mock_load.return_value = {'root': '/r'}
        self.assertRaisesRegex(errors.DeploymentError,
                               "kernel_profile must be one of gcov, got "
                               "'perf'", self.hwm.bmc_start_workload, NODE,
                               [], command=['true'], kernel_profile='perf')
        self.sup.start.assert_not_called()

    def test_collect_refused_while_running(self):
        self.sup.status.return_value = {'state': 'running'}
        self.assertRaisesRegex(errors.DeploymentError,
                               'the workload is running',
                               self.hwm.bmc_collect_kernel_profile, NODE, [],
                               max_bytes=10)

    def test_collect_needs_a_bound(self):
        self.sup.status.return_value = {'state': 'exited'}
        self.assertRaisesRegex(errors.DeploymentError,
                               'max_bytes must be a number of bytes',
                               self.hwm.bmc_collect_kernel_profile, NODE, [],
                               max_bytes='lots')

    def test_the_step_is_offered(self):
        names = [s['step'] for s in self.hwm.get_deploy_steps(NODE, [])]
        self.assertIn(protocol.STEP_COLLECT_KERNEL_PROFILE, names)
