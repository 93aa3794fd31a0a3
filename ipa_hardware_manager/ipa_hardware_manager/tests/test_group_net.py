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

import ipaddress
import os
import socket
import subprocess
import tempfile
import unittest
from unittest import mock

from ipa_hardware_manager import group_net
from ipa_hardware_manager.tests import group_fixtures as fx

ADDRESS = ipaddress.ip_interface('192.168.50.11/24')
FLUSH = ['addr', 'flush', 'dev', 'eth1', 'scope', 'global']
ADD = ['addr', 'add', '192.168.50.11/24', 'dev', 'eth1']
UP = ['link', 'set', 'dev', 'eth1', 'up']


class FindInterfaceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.base = os.path.join(self.tmp.name, 'net')

    def find(self, interfaces, mac=fx.MAC):
        return group_net.find_interface(
            mac, fx.fake_sysfs(self.base, interfaces))

    def test_by_mac_any_case(self):
        self.assertEqual('ens4', self.find(
            {'lo': '00:00:00:00:00:00', 'ens3': '52:54:00:12:34:56',
             'ens4': fx.MAC.upper()}))

    def test_absent_names_what_is_there(self):
        with self.assertRaisesRegex(
                group_net.GroupError,
                r'^no interface has the group network\'s MAC '
                r'52:54:00:12:34:57; seen: ens3 \(52:54:00:12:34:56\)$'):
            self.find({'lo': '00:00:00:00:00:00',
                       'ens3': '52:54:00:12:34:56'})

    def test_loopback_is_never_it(self):
        with self.assertRaisesRegex(group_net.GroupError, 'seen: none'):
            self.find({'lo': fx.MAC})

    def test_a_vlan_carries_the_nics_mac(self):
        self.assertEqual('ens4', self.find(
            {'ens4': (fx.MAC, True), 'ens4.100': fx.MAC}))

    def test_several_nics(self):
        with self.assertRaisesRegex(group_net.GroupError,
                                    'several interfaces have the group '
                                    'network.s MAC 52:54:00:12:34:57: ens4, '
                                    'ens5'):
            self.find({'ens4': (fx.MAC, True), 'ens5': (fx.MAC, True)})

    def test_several_without_a_nic(self):
        with self.assertRaisesRegex(group_net.GroupError,
                                    'several interfaces .*: bond0, br0'):
            self.find({'bond0': fx.MAC, 'br0': fx.MAC})

    def test_no_sysfs(self):
        with self.assertRaisesRegex(group_net.GroupError,
                                    'cannot list the interfaces'):
            group_net.find_interface(fx.MAC, self.base)


class ConfigureTest(unittest.TestCase):
    def test_fresh(self):
        ip = fx.FakeIp()
        self.assertEqual([FLUSH, ADD, UP],
                         group_net.configure('eth1', ADDRESS, ip))
        self.assertEqual([['-j', '-4', 'route', 'show', 'default'],
                          ['-j', '-6', 'route', 'show', 'default'],
                          ['-j', 'addr', 'show', 'dev', 'eth1'],
                          FLUSH, ADD, UP], ip.calls)

    def test_other_addresses_are_flushed(self):
        ip = fx.FakeIp({'addr show dev eth1': [{'addr_info': [
            {'local': '192.168.50.11', 'prefixlen': 24, 'scope': 'global'},
            {'local': '10.9.0.4', 'prefixlen': 16, 'scope': 'global'}]}]})
        group_net.configure('eth1', ADDRESS, ip)
        self.assertEqual([FLUSH, ADD, UP], ip.changes)

    def test_again_leaves_the_address(self):
        # An agent restarted under a running workload: its connections
        # keep their address.
        ip = fx.FakeIp({'addr show dev eth1': [{'addr_info': [
            {'local': 'fe80::1', 'prefixlen': 64, 'scope': 'link'},
            {'local': '192.168.50.11', 'prefixlen': 24,
             'scope': 'global'}]}]})
        self.assertEqual([UP], group_net.configure('eth1', ADDRESS, ip))
        self.assertEqual([UP], ip.changes)

    def test_ipv6_without_dad(self):
        ip = fx.FakeIp()
        group_net.configure('eth1', ipaddress.ip_interface('fd00::b/64'), ip)
        self.assertIn(['addr', 'add', 'fd00::b/64', 'dev', 'eth1', 'nodad'],
                      ip.changes)

    def test_default_route_interface_refused(self):
        for family in ('-4', '-6'):
            ip = fx.FakeIp({family + ' route show default': [
                {'dst': 'default', 'gateway': '10.0.2.2', 'dev': 'eth1'}]})
            with self.assertRaisesRegex(
                    group_net.GroupError, 'the group network.s interface eth1 '
                    'carries the node.s default route'):
                group_net.configure('eth1', ADDRESS, ip)
            self.assertEqual([], ip.changes)

    def test_ip_failure(self):
        ip = fx.FakeIp(fail=['addr', 'add'])
        with self.assertRaisesRegex(group_net.GroupError,
                                    'ip addr add 192.168.50.11/24 dev eth1 '
                                    'failed'):
            group_net.configure('eth1', ADDRESS, ip)
        self.assertEqual([FLUSH, ADD], ip.changes)


class RunIpTest(unittest.TestCase):
    @mock.patch.object(group_net.subprocess, 'run', autospec=True)
    def test_argv_and_timeout(self, mock_run):
        mock_run.return_value = subprocess.CompletedProcess([], 0, '[]', '')
        self.assertEqual('[]', group_net.run_ip(['-j', 'addr']))
        mock_run.assert_called_once_with(
            ['ip', '-j', 'addr'], stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=group_net.IP_TIMEOUT,
            check=False)

    @mock.patch.object(group_net.subprocess, 'run', autospec=True)
    def test_failures(self, mock_run):
        mock_run.return_value = subprocess.CompletedProcess(
            [], 2, '', 'RTNETLINK answers: File exists\n')
        with self.assertRaisesRegex(group_net.GroupError,
                                    r'^ip addr add x failed \(exit 2\): '
                                    'RTNETLINK answers: File exists$'):
            group_net.run_ip(['addr', 'add', 'x'])
        mock_run.side_effect = subprocess.TimeoutExpired(['ip'], 10)
        with self.assertRaisesRegex(group_net.GroupError, 'timed out'):
            group_net.run_ip(['link'])
        mock_run.side_effect = FileNotFoundError(2, 'No such file')
        with self.assertRaisesRegex(group_net.GroupError, 'No such file'):
            group_net.run_ip(['link'])


class HostnameTest(unittest.TestCase):
    def test_set_when_it_differs(self):
        names = []
        group_net.set_hostname('job-1', names.append, lambda: 'localhost')
        group_net.set_hostname('job-1', names.append, lambda: 'job-1')
        self.assertEqual(['job-1'], names)

    def test_failure(self):
        def refuse(name):
            raise PermissionError(1, 'Operation not permitted')
        with self.assertRaisesRegex(group_net.GroupError,
                                    'cannot set the host name job-1'):
            group_net.set_hostname('job-1', refuse, lambda: 'localhost')


class PeersTest(unittest.TestCase):
    def test_accepts(self):
        with socket.socket() as server:
            server.bind(('127.0.0.1', 0))
            server.listen(1)
            port = server.getsockname()[1]
            self.assertTrue(group_net.accepts('127.0.0.1', port))
        self.assertFalse(group_net.accepts('127.0.0.1', port))

    def test_many_not_ready_are_summed_up(self):
        clock = fx.FakeClock()
        peers = [{'rank': r, 'hostname': 'job-%d' % r,
                  'address': fx.member_address(r)} for r in range(1, 40)]
        with self.assertRaisesRegex(
                group_net.GroupError, r'rank 10 \(job-10, 192.168.50.20\) '
                'and 29 more$'):
            group_net.wait_for_peers(peers, 22, 0,
                                     connect=lambda a, p: False,
                                     clock=clock, sleep=clock.sleep)
        self.assertEqual([], clock.sleeps)
