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

import json
import os
import stat
import subprocess
import tempfile
import unittest
from unittest import mock

from ipa_hardware_manager import container_etc
from ipa_hardware_manager import oci_runtime

ROUTES4 = [{'dst': 'default', 'gateway': '10.0.2.2', 'dev': 'eth0'}]
ADDRS = [{'ifname': 'eth0', 'addr_info': [
    {'family': 'inet6', 'local': 'fe80::1', 'scope': 'link'},
    {'family': 'inet6', 'local': 'fec0::5054:ff:fe12:3456',
     'scope': 'global'},
    {'family': 'inet', 'local': '10.0.2.15', 'scope': 'global'}]}]


def _ip(outputs):
    def run(cmd, **kw):
        key = ' '.join(cmd[2:])
        return subprocess.CompletedProcess(
            cmd, 0, json.dumps(outputs.get(key, [])).encode(), b'')
    return run


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = os.path.join(self.tmp.name, 'root')
        os.makedirs(os.path.join(self.root, 'etc'))

    def read(self, path):
        with open(os.path.join(self.root, path.lstrip('/'))) as f:
            return f.read()


class IdentityTest(Base):
    def test_hosts_names_the_hostname_with_the_nodes_address(self):
        container_etc.write_identity(self.root, 'node-1.example',
                                     ['10.0.2.15', '10.0.3.1', 'fec0::1'])
        self.assertEqual(
            '127.0.0.1\tlocalhost\n'
            '::1\tlocalhost ip6-localhost ip6-loopback\n'
            '10.0.2.15\tnode-1.example node-1\n'
            'fec0::1\tnode-1.example node-1\n', self.read('/etc/hosts'))
        self.assertEqual('node-1.example\n', self.read('/etc/hostname'))
        mode = os.stat(os.path.join(self.root, 'etc/hosts')).st_mode
        self.assertEqual(0o644, stat.S_IMODE(mode))

    def test_without_a_route_out(self):
        container_etc.write_identity(self.root, 'n', [])
        self.assertIn('127.0.1.1\tn\n', self.read('/etc/hosts'))

    def test_replaces_the_images_files_and_links(self):
        # The image's /etc/hosts is a symlink to a file of the node:
        # replaced, never followed.
        outside = os.path.join(self.tmp.name, 'node-hosts')
        with open(outside, 'w') as f:
            f.write('node\n')
        os.symlink(outside, os.path.join(self.root, 'etc/hosts'))
        os.makedirs(os.path.join(self.root, 'etc/hostname'))
        container_etc.write_identity(self.root, 'n', ['10.0.2.15'])
        with open(outside) as f:
            self.assertEqual('node\n', f.read())
        self.assertFalse(os.path.islink(os.path.join(self.root,
                                                     'etc/hosts')))
        self.assertEqual('n\n', self.read('/etc/hostname'))

    def test_etc_link_out_of_the_root_stays_inside(self):
        agent = os.path.join(self.tmp.name, 'agent-etc')
        os.makedirs(agent)
        os.rmdir(os.path.join(self.root, 'etc'))
        os.makedirs(os.path.join(self.root, agent.lstrip('/')))
        os.symlink(agent, os.path.join(self.root, 'etc'))
        container_etc.write_identity(self.root, 'n', ['10.0.2.15'])
        self.assertEqual([], os.listdir(agent))
        self.assertEqual(['hostname', 'hosts'], sorted(os.listdir(
            os.path.join(self.root, agent.lstrip('/')))))

    def test_image_without_etc_gets_one(self):
        os.rmdir(os.path.join(self.root, 'etc'))
        container_etc.write_identity(self.root, 'n', ['10.0.2.15'])
        self.assertEqual('n\n', self.read('/etc/hostname'))

    def test_etc_that_is_a_file_gets_nothing(self):
        os.rmdir(os.path.join(self.root, 'etc'))
        with open(os.path.join(self.root, 'etc'), 'w') as f:
            f.write('x')
        container_etc.write_identity(self.root, 'n', ['10.0.2.15'])
        self.assertEqual('x', self.read('/etc'))

    def test_never_the_nodes_own_etc(self):
        with mock.patch.object(container_etc.os.path, 'realpath',
                               autospec=True, return_value='/'):
            self.assertFalse(container_etc.write_file(self.root,
                                                      '/etc/hosts', 'x'))
        self.assertFalse(os.path.exists(os.path.join(self.root,
                                                     'etc/hosts')))


class AddressesTest(unittest.TestCase):
    @mock.patch.object(container_etc.subprocess, 'run', autospec=True)
    def test_default_route_interface(self, mock_run):
        mock_run.side_effect = _ip({'-4 route show default': ROUTES4,
                                    'addr show dev eth0': ADDRS})
        self.assertEqual(['10.0.2.15', 'fec0::5054:ff:fe12:3456'],
                         container_etc.node_addresses())

    @mock.patch.object(container_etc.subprocess, 'run', autospec=True)
    def test_no_route(self, mock_run):
        mock_run.side_effect = _ip({})
        self.assertEqual([], container_etc.node_addresses())

    @mock.patch.object(container_etc.subprocess, 'run', autospec=True)
    def test_ip_fails(self, mock_run):
        mock_run.side_effect = OSError('no ip')
        self.assertEqual([], container_etc.node_addresses())


class ResolvConfTest(Base):
    def test_copied(self):
        src = os.path.join(self.tmp.name, 'resolv.conf')
        with open(src, 'w') as f:
            f.write('nameserver 10.0.2.3\n')
        self.assertTrue(container_etc.copy_resolv_conf(self.root, src))
        self.assertEqual('nameserver 10.0.2.3\n',
                         self.read('/etc/resolv.conf'))

    def test_missing_source(self):
        self.assertFalse(container_etc.copy_resolv_conf(
            self.root, os.path.join(self.tmp.name, 'nope')))


class ProtectAgentTest(unittest.TestCase):
    def test_writes_its_own_oom_score_adj(self):
        with tempfile.TemporaryDirectory() as proc:
            os.makedirs(os.path.join(proc, 'self'))
            self.assertTrue(oci_runtime.protect_agent(proc))
            with open(os.path.join(proc, 'self/oom_score_adj')) as f:
                self.assertEqual('-900\n', f.read())

    def test_failure_is_only_a_warning(self):
        self.assertFalse(oci_runtime.protect_agent('/nonexistent-proc'))


class RuntimeOomTest(unittest.TestCase):
    """The runtime and the container start at the workload's
    oom_score_adj, not at the agent's."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.runtime = oci_runtime.Runtime(self.tmp.name)
        self.runtime.call = mock.Mock(return_value=(True, ''))

    def test_choom_prefix(self):
        with mock.patch.object(oci_runtime.shutil, 'which', autospec=True,
                               return_value='/usr/bin/choom'):
            cmd = self.runtime.prepare({'process': {'oomScoreAdj': 0}})
        self.assertEqual(['choom', '-n', '0', '--', 'env',
                          '--default-signal', 'crun'], cmd[:7])

    def test_without_choom(self):
        with mock.patch.object(oci_runtime.shutil, 'which', autospec=True,
                               return_value=None):
            cmd = self.runtime.prepare({'process': {'oomScoreAdj': 0}})
        self.assertEqual(['env', '--default-signal', 'crun'], cmd[:3])

    def test_real_choom_sets_the_child(self):
        if not oci_runtime.shutil.which('choom'):
            self.skipTest('no choom (util-linux) here')
        with open('/proc/self/oom_score_adj') as f:
            own = f.read().strip()
        done = subprocess.run(
            ['choom', '-n', '500', '--', 'cat', '/proc/self/oom_score_adj'],
            capture_output=True, text=True, check=True)
        self.assertEqual('500', done.stdout.strip())
        with open('/proc/self/oom_score_adj') as f:
            self.assertEqual(own, f.read().strip())
