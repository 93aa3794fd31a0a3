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

import copy
import os
import stat
import tempfile
import unittest

from ipa_hardware_manager import group
from ipa_hardware_manager import group_args
from ipa_hardware_manager import workload_args
from ipa_hardware_manager.tests import group_fixtures as fx
from bmc_common import protocol

# Made by ssh-keygen for this test only; it guards nothing.
SSH_KEYGEN_PRIVATE = """\
-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACBxgZ7QX6I5l7Qhr2UH1zSDeISlOvDF3CPmWRx9ycohyQAAAIhO8KWcTvCl
nAAAAAtzc2gtZWQyNTUxOQAAACBxgZ7QX6I5l7Qhr2UH1zSDeISlOvDF3CPmWRx9ycohyQ
AAAECM6M868yr3180HQTW1U5JyYW5WmYOznhKYVrIhoQrhu3GBntBfojmXtCGvZQfXNIN4
hKU68MXcI+ZZHH3JyiHJAAAAAWMBAgME
-----END OPENSSH PRIVATE KEY-----
"""
SSH_KEYGEN_PUBLIC = ('ssh-ed25519 '
                     'AAAAC3NzaC1lZDI1NTE5AAAAIHGBntBfojmXtCGvZQfXNIN4hKU68MXcI+ZZHH3JyiHJ'
                     ' c')



class ValidateTest(unittest.TestCase):
    def bad(self, message, change, rank=0, launcher='ssh'):
        args = fx.group(rank=rank, launcher=launcher)
        change(args)
        with self.assertRaisesRegex(group_args.GroupError, message) as ctx:
            group.validate(args)
        # The start step fails as on any other bad argument.
        self.assertIsInstance(ctx.exception, workload_args.WorkloadError)
        return str(ctx.exception)

    def set(self, path, value):
        """A change setting ``args[path...]`` to ``value``."""
        def change(args):
            target = args
            for key in path[:-1]:
                target = target[key]
            if value is KeyError:
                del target[path[-1]]
            else:
                target[path[-1]] = value
        return change

    def test_good(self):
        member = group.validate(fx.group(rank=1))
        fields = member.fields
        self.assertEqual(1, member.rank)
        self.assertEqual('job-1', member.hostname)
        self.assertEqual('192.168.50.11', member.address)
        self.assertEqual(fx.MAC, fields['mac'])        # lowercase
        self.assertEqual(['job-0', 'job-1', 'job-2'], member.hostnames)
        # Canonical host keys: no comment.
        self.assertEqual(fx.public(101), fields['members'][1]['host_key'])
        self.assertEqual(fx.public(1), fields['ssh']['public_key'])
        self.assertEqual(fx.public(101), fields['ssh']['host_public_key'])
        self.assertEqual([fx.public(1, 'job')],
                         fields['ssh']['authorized_keys'])
        self.assertEqual(30.0, fields['peer_wait'])

    def test_not_an_object(self):
        with self.assertRaisesRegex(group_args.GroupError,
                                    'group must be an object, got list'):
            group.validate([])

    def test_name(self):
        for name in ('Job', 'job_1', '-job', 'job-', '', 'j' * 49, 7):
            self.bad('group name must be a lowercase DNS label',
                     self.set(['name'], name))
        self.assertTrue(group.validate(fx.group(
            name='j' * 48, members=[
                dict(m, hostname='j' * 48 + '-%d' % m['rank'])
                for m in fx.group()['members']])))

    def test_id(self):
        for ident in ('', 'a' * 65, 'a b', 12, None):
            self.bad('group id must be', self.set(['id'], ident))

    def test_size_and_rank(self):
        for size in (0, 1025, True, '3', None):
            self.bad('group size must be an integer from 1 to 1024',
                     self.set(['size'], size))
        for rank in (3, -1, None, False):
            self.bad('group rank must be an integer from 0 to 2',
                     self.set(['rank'], rank))

    def test_launcher(self):
        self.bad('group launcher must be one of ssh, none, got .mpi.',
                 self.set(['launcher'], 'mpi'))

    def test_interface(self):
        self.bad('group interface must be an object',
                 self.set(['interface'], '52:54:00:12:34:57'))
        for mac in ('52:54:00:12:34', '52-54-00-12-34-57', 'zz:54:00:12:34:57',
                    None):
            self.bad('group interface.mac must be a MAC address',
                     self.set(['interface', 'mac'], mac))
        for address in ('192.168.50.10', 'gateway/24', '127.0.0.1/8',
                        '224.0.0.1/4', '0.0.0.0/0', None, 5):
            self.bad('group interface.address must be an address with its '
                     'prefix', self.set(['interface', 'address'], address))

    def test_members(self):
        self.bad(r'group members must be a list of the 3 members \(size\), '
                 'by rank, got 2', lambda a: a['members'].pop())
        self.bad('group members must be a list', self.set(['members'], {}))
        self.bad(r'group members\[1\] must be an object',
                 self.set(['members', 1], 'job-1'))

        def swap(args):
            args['members'][1], args['members'][2] = (args['members'][2],
                                                      args['members'][1])
        self.bad(r'group members\[1\].rank must be 1 \(the members are '
                 r'listed by rank\), got 2', swap)
        self.bad(r'members\[2\].rank must be 2',
                 self.set(['members', 2, 'rank'], '2'))
        self.bad(r'group members\[2\].hostname must be a DNS label',
                 self.set(['members', 2, 'hostname'], 'job_2'))
        self.bad(r'group members\[2\].address must be an address in the '
                 r'group network 192.168.50.0/24, got .10.0.0.1.',
                 self.set(['members', 2, 'address'], '10.0.0.1'))
        self.bad(r'members\[2\].address must be an address',
                 self.set(['members', 2, 'address'], 3232248331))
        self.bad(r'group members\[2\] must be a member of its own',
                 self.set(['members', 2, 'address'], '192.168.50.11'))
        self.bad(r'group members\[2\] must be a member of its own',
                 self.set(['members', 2, 'hostname'], 'JOB-1'))

    def test_host_keys(self):
        self.bad(r'group members\[1\].host_key must be a public key line',
                 self.set(['members', 1, 'host_key'], None))
        for key in (fx.public(5, kind='ssh-rsa'),
                    fx.public(5) + '\nssh-ed25519 AAAA',
                    fx.public(5, size=31), 'ssh-ed25519 !!!!',
                    'ssh-ed25519'):
            self.bad(r'group members\[1\].host_key must be a "ssh-ed25519 '
                     r'<base64> \[comment\]" line without a newline',
                     self.set(['members', 1, 'host_key'], key))
        # Its type and its data's differ.
        line = fx.public(5).replace('ssh-ed25519', 'ssh-dss')
        self.bad(r'members\[1\].host_key must be', self.set(
            ['members', 1, 'host_key'], line))

    def test_own_member(self):
        self.bad(r'group members\[0\].address must be this member\'s '
                 'interface address 192.168.50.9, got .192.168.50.10.',
                 self.set(['interface', 'address'], '192.168.50.9/24'))
        self.bad(r'group members\[1\].hostname must be job-1, got .node-1.',
                 self.set(['members', 1, 'hostname'], 'node-1'), rank=1)

    def test_ssh(self):
        self.bad(r'group ssh must be an object \{private_key, host_key, '
                 r'authorized_keys\} \(container_group_launcher=ssh\)$',
                 self.set(['ssh'], KeyError))
        for key in (None, 'ssh-ed25519 AAAA', fx.private(1).replace(
                'OPENSSH', 'RSA'), fx.private(1)[:200] + '\n' + group_args.END,
                '\n'.join([group_args.BEGIN, 'QUFBQQ==', group_args.END]),
                group_args.BEGIN + '\n' + 'A' * 9000 + '\n' + group_args.END):
            message = self.bad(
                'group ssh.private_key must be an unencrypted OpenSSH '
                'ed25519 private key', self.set(['ssh', 'private_key'], key))
            self.assertNotIn('AAAA', message)       # never a key's value
        self.bad('group ssh.host_key must be unencrypted: sshd and a '
                 'BatchMode ssh cannot ask for a passphrase$',
                 self.set(['ssh', 'host_key'], fx.private(
                     100, cipher=b'aes256-ctr')))
        self.bad('group ssh.host_key must be one key, not 2$', self.set(
            ['ssh', 'host_key'], fx.private(100, keys=2)))
        self.bad(r'group ssh.host_key must be the private key of '
                 r'members\[0\].host_key$',
                 self.set(['ssh', 'host_key'], fx.private(7)))
        for keys in ([], None, fx.public(1)):
            self.bad('group ssh.authorized_keys must be a list of 1 to',
                     self.set(['ssh', 'authorized_keys'], keys))
        self.bad(r'group ssh.authorized_keys\[1\] must be a "type <base64> '
                 r'\[comment\]" line without a newline, got',
                 self.set(['ssh', 'authorized_keys'], [
                     fx.public(1), fx.public(2) + '\n' + fx.public(3)]))

    def test_authorized_keys_of_any_type(self):
        rsa = fx.public(9, 'rsa', kind='ssh-rsa', size=256)
        args = fx.group()
        args['ssh']['authorized_keys'].append(rsa)
        self.assertIn(rsa, group.validate(args).fields['ssh'][
            'authorized_keys'])

    def test_peer_wait(self):
        for wait in (-1, 3601, 'soon', True, float('nan'), KeyError):
            self.bad('group peer_wait must be a number of seconds from 0 to '
                     '3600', self.set(['peer_wait'], wait))

    def test_none_launcher_needs_no_keys(self):
        args = fx.group(rank=2, launcher='none')
        del args['ssh'], args['peer_wait']
        for member in args['members']:
            member['host_key'] = None
        member = group.validate(args)
        self.assertIsNone(member.fields['ssh'])
        self.assertEqual(0.0, member.fields['peer_wait'])
        # Given, they are checked all the same.
        self.bad('ssh.private_key', self.set(['ssh', 'private_key'], 'x'),
                 launcher='none')
        self.bad('peer_wait', self.set(['peer_wait'], -5), launcher='none')

    def test_one_member_group(self):
        member = group.validate(fx.group(size=1))
        self.assertEqual(['job-0'], member.hostnames)

    def test_ipv6(self):
        args = fx.group(rank=1, size=2)
        args['interface']['address'] = 'fd00:50::11/64'
        for m in args['members']:
            m['address'] = 'fd00:50::%d' % (10 + m['rank'])
        member = group.validate(args)
        self.assertEqual('fd00:50::11', member.address)

    def test_public_key_of_an_ssh_keygen_key(self):
        # A throwaway key made once by OpenSSH 9.2's ``ssh-keygen -t ed25519
        # -N '' -C c``: the test needs no ssh-keygen where it runs (CI's
        # clean root has none) and still checks OpenSSH's own format.
        key, public = group_args.private_key(SSH_KEYGEN_PRIVATE,
                                             'ssh.private_key')
        self.assertEqual(SSH_KEYGEN_PRIVATE, key)
        self.assertEqual(SSH_KEYGEN_PUBLIC.rsplit(' ', 1)[0], public)
        self.assertEqual(public, group_args.public_key(SSH_KEYGEN_PUBLIC,
                                                       'k'))


class MemberTest(unittest.TestCase):
    def member(self, rank=0, launcher='ssh', **over):
        member = group.validate(fx.group(rank=rank, launcher=launcher,
                                         **over))
        member.interface_name = 'eth1'
        return member

    def test_env_over_the_users(self):
        env = self.member(rank=2).env({'A': 'b', 'BMC_RANK': '9',
                                       'BMC_GROUP_HOSTS': 'mine'})
        self.assertEqual({
            'A': 'b',
            'BMC_GROUP': 'job', 'BMC_GROUP_ID': 'ab12cd34', 'BMC_RANK': '2',
            'BMC_SIZE': '3', 'BMC_HOSTFILE': '/etc/bmc/group/hostfile',
            'BMC_GROUP_IFACE': 'eth1', 'BMC_GROUP_ADDRESS': '192.168.50.12',
            'BMC_GROUP_HOSTS': 'job-0 job-1 job-2'}, env)
        self.assertEqual(protocol.ENV_GROUP_HOSTS, 'BMC_GROUP_HOSTS')
        self.assertEqual(8, len(self.member().env(None)))

    def test_command(self):
        command = ['mpirun', '-n', '3', 'app']
        self.assertEqual(command, self.member(0).command(command))
        self.assertEqual(['/usr/sbin/sshd', '-D', '-e', '-f',
                          '/etc/bmc/group/sshd_config'],
                         self.member(1).command(command))
        # Every member runs the command without a launcher.
        self.assertEqual(command, self.member(1, 'none').command(command))

    def test_hosts_lines_and_result(self):
        member = self.member(1)
        self.assertEqual(['192.168.50.10\tjob-0', '192.168.50.11\tjob-1',
                          '192.168.50.12\tjob-2'], member.hosts_lines())
        self.assertEqual({'interface': 'eth1', 'address': '192.168.50.11/24',
                          'peers_ready': None}, member.result(None))


class CheckImageTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, 'etc'))
        os.makedirs(os.path.join(self.root, 'usr/sbin'))
        # usr-merge: /sbin leads to usr/sbin (resolved inside the root).
        os.symlink('usr/sbin', os.path.join(self.root, 'sbin'))
        with open(os.path.join(self.root, 'etc/passwd'), 'w') as f:
            f.write('root:x:0:0:root:/root:/bin/sh\n'
                    'app:x:1000:1000::/home/app:/bin/sh\n')
        self.sshd = os.path.join(self.root, 'usr/sbin/sshd')
        with open(self.sshd, 'w') as f:
            f.write('#!/bin/sh\n')
        os.chmod(self.sshd, 0o755)

    def check(self, rank=1, launcher='ssh', user=None, privileged=True):
        group.validate(fx.group(rank=rank, launcher=launcher)).check_image(
            self.root, user, privileged)

    def test_root_with_sshd(self):
        self.check()
        self.check(rank=0, user='root')
        self.check(user='0:0')

    def test_no_sshd(self):
        os.unlink(self.sshd)
        message = ('the image has no /usr/sbin/sshd: '
                   'container_group_launcher=ssh needs openssh-server in '
                   'the image, or use none')
        with self.assertRaisesRegex(group.GroupError, message):
            self.check()
        # Rank 0 too: it would otherwise wait for members that all fail.
        with self.assertRaisesRegex(group.GroupError, message):
            self.check(rank=0)
        self.check(launcher='none')

    def test_sshd_not_executable(self):
        os.chmod(self.sshd, 0o644)
        if os.access(self.sshd, os.X_OK):
            self.skipTest('root may execute anything here')
        with self.assertRaisesRegex(group.GroupError, 'has no /usr/sbin/sshd'):
            self.check()

    def test_sshd_a_symlink_out_of_the_root(self):
        # The node's sshd is not the image's.
        os.unlink(self.sshd)
        os.symlink('/usr/sbin/../../bin/sh', self.sshd)
        with self.assertRaisesRegex(group.GroupError, 'has no /usr/sbin/sshd'):
            self.check()

    def test_not_root(self):
        for user in ('app', '1000', '1000:0'):
            with self.assertRaisesRegex(
                    group.GroupError, 'container_group_launcher=ssh runs the '
                    'workload as root .*; the user .%s. is uid' % user):
                self.check(user=user)
        self.check(user='app', launcher='none')
        with self.assertRaisesRegex(group.GroupError, 'not in the image'):
            self.check(user='nobody')

    def test_confined(self):
        with self.assertRaisesRegex(
                group.GroupError, 'container_group_launcher=ssh needs a '
                'privileged container'):
            self.check(privileged=False)
        self.check(privileged=False, launcher='none')


class SetupTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = os.path.join(self.tmp.name, 'root')
        os.makedirs(os.path.join(self.root, 'etc'))
        self.sysfs = fx.fake_sysfs(os.path.join(self.tmp.name, 'net'), {
            'lo': '00:00:00:00:00:00', 'eth0': '52:54:00:12:34:56',
            'eth1': fx.MAC})
        self.ip = fx.FakeIp()
        self.names = []

    def setup(self, member, privileged=True):
        member.setup(self.root, privileged, run=self.ip, sysfs=self.sysfs,
                     sethostname=self.names.append)

    def test_privileged(self):
        member = group.validate(fx.group(rank=1))
        self.setup(member)
        self.assertEqual('eth1', member.interface_name)
        self.assertEqual('eth1', member.env({})['BMC_GROUP_IFACE'])
        self.assertEqual([['addr', 'flush', 'dev', 'eth1', 'scope', 'global'],
                          ['addr', 'add', '192.168.50.11/24', 'dev', 'eth1'],
                          ['link', 'set', 'dev', 'eth1', 'up']],
                         self.ip.changes)
        self.assertEqual(['job-1'], self.names)
        mode = os.stat(os.path.join(
            self.root, 'etc/bmc/group/ssh_host_ed25519_key')).st_mode
        self.assertEqual(0o600, stat.S_IMODE(mode))
        with open(os.path.join(self.root, 'etc/bmc/group/hostfile')) as f:
            self.assertEqual('job-0\njob-1\njob-2\n', f.read())

    def test_confined_leaves_the_nodes_name(self):
        self.setup(group.validate(fx.group(rank=1, launcher='none')),
                   privileged=False)
        self.assertEqual([], self.names)
        self.assertFalse(os.path.exists(os.path.join(
            self.root, 'etc/bmc/group/sshd_config')))

    def test_no_such_nic(self):
        member = group.validate(fx.group(interface={
            'mac': '52:54:00:00:00:99', 'address': '192.168.50.10/24'}))
        with self.assertRaisesRegex(group.GroupError,
                                    'no interface has the group network.s '
                                    'MAC 52:54:00:00:00:99; seen: eth0 '):
            self.setup(member)
        self.assertEqual([], self.ip.calls)
        self.assertEqual([], self.names)


class WaitForPeersTest(unittest.TestCase):
    def setUp(self):
        self.clock = fx.FakeClock()
        self.up_at = {'192.168.50.11': 100.0, '192.168.50.12': 102.0}
        self.tried = []

    def connect(self, address, port):
        self.tried.append((address, port))
        return self.clock.now >= self.up_at[address]

    def wait(self, rank=0, launcher='ssh', peer_wait=30):
        return group.validate(fx.group(
            rank=rank, launcher=launcher, peer_wait=peer_wait)).wait_for_peers(
                connect=self.connect, clock=self.clock,
                sleep=self.clock.sleep)

    def test_ready(self):
        self.assertEqual(2.0, self.wait())
        self.assertEqual([0.5] * 4, self.clock.sleeps)
        # Who was ready is not tried again.
        self.assertEqual(1, self.tried.count(('192.168.50.11', 22)))
        self.assertEqual(5, self.tried.count(('192.168.50.12', 22)))

    def test_timeout(self):
        self.up_at['192.168.50.12'] = 1000.0
        with self.assertRaisesRegex(
                group.GroupError, r'rank 0 waited 1.2 s \(peer_wait\) for the '
                'sshd of every other member; not ready on port 22: rank 2 '
                r'\(job-2, 192.168.50.12\)$'):
            self.wait(peer_wait=1.2)
        self.assertAlmostEqual(1.2, sum(self.clock.sleeps))

    def test_only_rank_0_of_the_ssh_launcher_waits(self):
        self.assertIsNone(self.wait(rank=1))
        self.assertIsNone(self.wait(launcher='none'))
        self.assertEqual([], self.tried)

    def test_rank_0_alone(self):
        member = group.validate(fx.group(size=1))
        self.assertEqual(0.0, member.wait_for_peers(connect=self.connect))


class ProtocolTest(unittest.TestCase):
    def test_hostname(self):
        self.assertEqual('job-3', protocol.group_hostname('job', 3))

    def test_the_fixture_is_what_validate_keeps(self):
        args = fx.group()
        before = copy.deepcopy(args)
        group.validate(args)
        self.assertEqual(before, args)      # not changed in place
