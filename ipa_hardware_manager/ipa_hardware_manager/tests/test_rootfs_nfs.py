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


import subprocess
import unittest
from unittest import mock

from ipa_hardware_manager import rootfs_nfs

NFS = {'server': '10.0.2.100', 'port': 12049, 'export': '/bmc/key',
       'options': 'vers=4.1,hard,timeo=100'}


class CheckTest(unittest.TestCase):
    def test_ok(self):
        checked = rootfs_nfs.check(NFS)
        self.assertEqual({'server': '10.0.2.100', 'port': 12049,
                          'export': '/bmc/key',
                          'options': ['vers=4.1', 'hard', 'timeo=100']},
                         checked)

    def _bad(self, message, **kw):
        with self.assertRaisesRegex(rootfs_nfs.NFSError, message):
            rootfs_nfs.check(dict(NFS, **kw))

    def test_bad_values(self):
        self._bad('nfs.server', server='a b')
        self._bad('nfs.server', server='h:/x')
        self._bad('nfs.port must be an integer', port='x')
        self._bad('nfs.port must be 1-65535', port=0)
        self._bad('nfs.export must be an absolute path', export='bmc/k')
        self._bad('without "..', export='/bmc/../etc')
        self._bad('bad option', options='vers=4.1,a b')
        # The mount is read-only whatever the conductor says.
        self._bad("'rw' is set by the agent", options='rw')
        self._bad("'addr=1.2.3.4' is set by the agent",
                  options='addr=1.2.3.4')

    def test_not_a_dict(self):
        with self.assertRaisesRegex(rootfs_nfs.NFSError, 'must be an object'):
            rootfs_nfs.check('10.0.2.100:/bmc/key')


class MountTest(unittest.TestCase):
    def test_command(self):
        cmd = rootfs_nfs.mount_command(rootfs_nfs.check(NFS), '/mnt/l',
                                       '10.0.2.100')
        self.assertEqual(
            ['mount', '-t', 'nfs4', '-o',
             'ro,addr=10.0.2.100,port=12049,vers=4.1,hard,timeo=100',
             '10.0.2.100:/bmc/key', '/mnt/l'], cmd)

    @mock.patch.object(rootfs_nfs.socket, 'getaddrinfo', autospec=True)
    def test_name_is_resolved(self, mock_gai):
        mock_gai.return_value = [(2, 1, 6, '', ('192.0.2.7', 0))]
        self.assertEqual('192.0.2.7', rootfs_nfs.resolve('nfs.example'))
        self.assertEqual('192.0.2.8', rootfs_nfs.resolve('192.0.2.8'))

    @mock.patch.object(rootfs_nfs.time, 'sleep', autospec=True)
    @mock.patch.object(rootfs_nfs.subprocess, 'run', autospec=True)
    def test_retries_then_succeeds(self, mock_run, mock_sleep):
        mock_run.side_effect = [
            subprocess.CompletedProcess([], 32, '', 'No such file'),
            subprocess.CompletedProcess([], 0, '', '')]
        seconds = rootfs_nfs.mount(rootfs_nfs.check(NFS), '/mnt/l')
        self.assertGreaterEqual(seconds, 0)
        self.assertEqual(2, mock_run.call_count)
        mock_sleep.assert_called_once_with(rootfs_nfs.RETRY_DELAY)

    @mock.patch.object(rootfs_nfs.time, 'sleep', autospec=True)
    @mock.patch.object(rootfs_nfs.subprocess, 'run', autospec=True)
    def test_gives_up_naming_the_export(self, mock_run, mock_sleep):
        mock_run.return_value = subprocess.CompletedProcess(
            [], 32, '', 'mount(2) system call failed: No such file')
        with self.assertRaisesRegex(
                rootfs_nfs.NFSError,
                'cannot mount NFS export 10.0.2.100:12049/bmc/key: '
                'mount.2. system call failed'):
            rootfs_nfs.mount(rootfs_nfs.check(NFS), '/mnt/l', attempts=3)
        self.assertEqual(3, mock_run.call_count)

    @mock.patch.object(rootfs_nfs.subprocess, 'run', autospec=True)
    def test_no_answer(self, mock_run):
        mock_run.side_effect = subprocess.TimeoutExpired('mount', 60)
        with self.assertRaisesRegex(rootfs_nfs.NFSError,
                                    'did not answer within 60 s'):
            rootfs_nfs.mount(rootfs_nfs.check(NFS), '/mnt/l')
