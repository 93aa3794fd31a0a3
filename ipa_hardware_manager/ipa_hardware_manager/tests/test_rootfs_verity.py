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

from ipa_hardware_manager import rootfs_verity

STATUS = """/dev/mapper/bmc-rootfs is active and is in use.
  type:        VERITY
  status:      %s
  hash type:   1
  data block:  4096
"""


def _done(returncode=0, stdout='', stderr=''):
    return subprocess.CompletedProcess([], returncode, stdout, stderr)


@mock.patch.object(rootfs_verity.subprocess, 'run', autospec=True)
class VerityTest(unittest.TestCase):
    def test_open(self, mock_run):
        mock_run.return_value = _done()
        self.assertEqual('/dev/mapper/bmc-rootfs', rootfs_verity.open_device(
            '/b/a.erofs', '/b/a.erofs.verity', 'c' * 64))
        self.assertEqual(['veritysetup', 'open', '/b/a.erofs', 'bmc-rootfs',
                          '/b/a.erofs.verity', 'c' * 64],
                         list(mock_run.call_args.args[0]))

    def test_open_refused_names_the_root_hash(self, mock_run):
        mock_run.return_value = _done(1, stderr='Verification of root hash '
                                                'failed.')
        with self.assertRaisesRegex(rootfs_verity.VerityError,
                                    'root hash c{64}.*Verification of root'):
            rootfs_verity.open_device('/b/a', '/b/a.verity', 'c' * 64)

    def test_status(self, mock_run):
        mock_run.return_value = _done(stdout=STATUS % 'verified')
        self.assertEqual('verified', rootfs_verity.status())
        self.assertIsNone(rootfs_verity.integrity_problem())
        mock_run.return_value = _done(stdout=STATUS % 'corrupted')
        self.assertEqual('corrupted', rootfs_verity.status())
        self.assertIn('integrity: dm-verity found a corrupted block',
                      rootfs_verity.integrity_problem())
        mock_run.return_value = _done(4, stderr='not active')
        self.assertIsNone(rootfs_verity.status())

    def test_no_veritysetup(self, mock_run):
        mock_run.side_effect = FileNotFoundError('veritysetup')
        self.assertIsNone(rootfs_verity.status())
        with self.assertRaisesRegex(rootfs_verity.VerityError,
                                    'cryptsetup-bin'):
            rootfs_verity.close()
