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

import os
import stat
import tempfile
import unittest

from ipa_hardware_manager import group
from ipa_hardware_manager import group_files
from ipa_hardware_manager.tests import group_fixtures as fx

GROUP_DIR = '/etc/bmc/group'


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = os.path.join(self.tmp.name, 'root')
        os.makedirs(os.path.join(self.root, 'etc'))

    def path(self, path):
        return os.path.join(self.root, path.lstrip('/'))

    def read(self, path):
        with open(self.path(path)) as f:
            return f.read()

    def mode(self, path):
        return stat.S_IMODE(os.lstat(self.path(path)).st_mode)

    def write_all(self, rank=1, launcher='ssh', **over):
        member = group.validate(fx.group(rank=rank, launcher=launcher,
                                         **over))
        return group_files.write_all(self.root, member.fields,
                                     member.address)


class SshLauncherTest(Base):
    def setUp(self):
        super().setUp()
        self.written = self.write_all(rank=1)

    def test_modes(self):
        self.assertEqual({
            GROUP_DIR + '/hostfile': 0o644,
            GROUP_DIR + '/id_ed25519': 0o600,
            GROUP_DIR + '/id_ed25519.pub': 0o644,
            GROUP_DIR + '/authorized_keys': 0o644,
            GROUP_DIR + '/known_hosts': 0o644,
            GROUP_DIR + '/ssh_host_ed25519_key': 0o600,
            GROUP_DIR + '/ssh_host_ed25519_key.pub': 0o644,
            GROUP_DIR + '/sshd_config': 0o644,
            '/etc/ssh/ssh_config.d/bmc-group.conf': 0o644,
            '/run/sshd': 0o755,
        }, {p: self.mode(p) for p in self.written})
        self.assertTrue(os.path.isdir(self.path('/run/sshd')))
        self.assertEqual(0o755, self.mode(GROUP_DIR))
        if os.geteuid() == 0:
            info = os.stat(self.path(GROUP_DIR + '/ssh_host_ed25519_key'))
            self.assertEqual((0, 0), (info.st_uid, info.st_gid))

    def test_hostfile(self):
        self.assertEqual('job-0\njob-1\njob-2\n',
                         self.read('/etc/bmc/group/hostfile'))

    def test_keys(self):
        self.assertEqual(fx.private(1), self.read(GROUP_DIR + '/id_ed25519'))
        self.assertEqual(fx.public(1) + '\n',
                         self.read(GROUP_DIR + '/id_ed25519.pub'))
        self.assertEqual(fx.private(101),
                         self.read(GROUP_DIR + '/ssh_host_ed25519_key'))
        self.assertEqual(fx.public(101) + '\n',
                         self.read(GROUP_DIR + '/ssh_host_ed25519_key.pub'))
        self.assertEqual(fx.public(1, 'job') + '\n',
                         self.read(GROUP_DIR + '/authorized_keys'))
        self.assertEqual(
            'job-0,192.168.50.10 %s\njob-1,192.168.50.11 %s\n'
            'job-2,192.168.50.12 %s\n' % (fx.public(100), fx.public(101),
                                          fx.public(102)),
            self.read(GROUP_DIR + '/known_hosts'))

    def test_sshd_config(self):
        self.assertEqual([
            'ListenAddress 192.168.50.11:22',
            'HostKey /etc/bmc/group/ssh_host_ed25519_key',
            'AuthorizedKeysFile /etc/bmc/group/authorized_keys',
            'PermitRootLogin prohibit-password',
            'PasswordAuthentication no',
            'KbdInteractiveAuthentication no',
            'UsePAM no',
            'PidFile none',
            'X11Forwarding no',
            'AllowTcpForwarding no',
            'PermitUserEnvironment no',
        ], [line for line in self.read(GROUP_DIR + '/sshd_config').split('\n')
            if line and not line.startswith('#')])

    def test_ssh_config(self):
        self.assertEqual([
            'Host job-0 job-1 job-2 192.168.50.10 192.168.50.11 '
            '192.168.50.12',
            '    IdentityFile /etc/bmc/group/id_ed25519',
            '    UserKnownHostsFile /etc/bmc/group/known_hosts',
            '    StrictHostKeyChecking yes',
            '    User root',
            '    BatchMode yes',
        ], [line for line in self.read(
            '/etc/ssh/ssh_config.d/bmc-group.conf').split('\n')
            if line and not line.startswith('#')])

    def test_again_replaces(self):
        self.assertEqual(self.written, self.write_all(rank=1))
        self.assertEqual('job-0\njob-1\njob-2\n',
                         self.read('/etc/bmc/group/hostfile'))


class FilesTest(Base):
    def test_none_launcher_only_the_hostfile(self):
        self.assertEqual([GROUP_DIR + '/hostfile'],
                         self.write_all(launcher='none'))
        self.assertEqual(['hostfile'], os.listdir(self.path(GROUP_DIR)))
        self.assertFalse(os.path.exists(self.path('/etc/ssh')))
        self.assertFalse(os.path.exists(self.path('/run/sshd')))

    def test_ipv6_listen_address(self):
        self.assertIn('ListenAddress [fd00::b]:22\n',
                      group_files.sshd_config_text('fd00::b'))

    def test_symlinks_lead_inside_the_root(self):
        outside = os.path.join(self.tmp.name, 'outside')
        os.makedirs(outside)
        # The image's /etc/bmc leads "out", its /run too: both resolve
        # inside the root, as the container sees them.
        os.symlink('/../../../outside', self.path('/etc/bmc'))
        os.symlink(outside, self.path('/run'))
        self.write_all()
        self.assertEqual([], os.listdir(outside))
        self.assertTrue(os.path.isfile(self.path(
            '/outside/group/id_ed25519')))
        self.assertTrue(os.path.isdir(self.path(outside + '/sshd')))

    def test_a_file_that_is_a_symlink_is_replaced(self):
        target = os.path.join(self.tmp.name, 'node-file')
        with open(target, 'w') as f:
            f.write('the node\'s\n')
        os.makedirs(self.path(GROUP_DIR))
        os.symlink(target, self.path(GROUP_DIR + '/id_ed25519'))
        self.write_all()
        with open(target) as f:
            self.assertEqual('the node\'s\n', f.read())
        self.assertFalse(os.path.islink(self.path(GROUP_DIR + '/id_ed25519')))
        self.assertEqual(0o600, self.mode(GROUP_DIR + '/id_ed25519'))

    def test_a_directory_in_the_way(self):
        os.makedirs(self.path(GROUP_DIR + '/known_hosts'))
        with self.assertRaisesRegex(group.GroupError,
                                    '/etc/bmc/group/known_hosts is a '
                                    'directory in the image'):
            self.write_all()

    def test_a_file_in_the_way_of_a_directory(self):
        os.makedirs(self.path('/etc/bmc'))
        with open(self.path(GROUP_DIR), 'w'):
            pass
        with self.assertRaisesRegex(group.GroupError,
                                    '/etc/bmc/group in the image is not a '
                                    'directory'):
            self.write_all()

    def test_never_the_nodes_root(self):
        with self.assertRaisesRegex(group.GroupError, 'the root given is the '
                                    'node.s'):
            group_files.make_dir('/', GROUP_DIR)

    def test_an_image_directory_keeps_its_mode(self):
        os.makedirs(self.path('/etc/ssh/ssh_config.d'))
        os.chmod(self.path('/etc/ssh/ssh_config.d'), 0o750)
        self.write_all()
        self.assertEqual(0o750, self.mode('/etc/ssh/ssh_config.d'))

    def test_too_many_links(self):
        os.symlink('loop', self.path('/etc/loop'))
        with self.assertRaisesRegex(group.GroupError, 'symbolic links'):
            group_files.write(self.root, '/etc/loop/x', '')
