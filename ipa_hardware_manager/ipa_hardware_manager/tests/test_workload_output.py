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

"""The output keeper (a real process on a real pipe) and what the
collect step returns."""

import hashlib
import os
import subprocess
import sys
import tempfile
import unittest

from ipa_hardware_manager import output_keeper
from ipa_hardware_manager import workload_output
from bmc_common import protocol


class KeeperTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name

    def _keep(self, data, max_bytes):
        keeper = subprocess.Popen(
            [sys.executable, '-m', 'ipa_hardware_manager.output_keeper',
             self.dir, str(max_bytes)], stdin=subprocess.PIPE)
        keeper.communicate(data, timeout=60)
        self.assertEqual(0, keeper.returncode)

    def test_small_output_kept_whole(self):
        self._keep(b'hello\nworld\n', 1 << 20)
        self.assertEqual({'bytes': 12, 'dropped': 0, 'max_bytes': 1 << 20,
                          'finished': True},
                         output_keeper.read_state(self.dir))
        self.assertEqual('hello\nworld\n', workload_output.tail(self.dir))

    def test_bounded_to_the_most_recent(self):
        lines = b''.join(b'line %07d\n' % i for i in range(100000))
        self._keep(lines, 256 * 1024)
        state = output_keeper.read_state(self.dir)
        self.assertEqual(len(lines), state['bytes'])
        kept = b''.join(open(p, 'rb').read()
                        for p in output_keeper.files(self.dir))
        self.assertLessEqual(len(kept), 256 * 1024)
        self.assertEqual(len(lines), len(kept) + state['dropped'])
        # What is kept is the end of the output, in order, nothing lost
        # at the rotation.
        self.assertTrue(lines.endswith(kept))
        self.assertEqual('line 0099999\n',
                         workload_output.tail(self.dir, 13))

    def test_tail_across_the_rotation(self):
        with open(os.path.join(self.dir, output_keeper.ROTATED_FILE),
                  'wb') as f:
            f.write(b'older-')
        with open(os.path.join(self.dir, output_keeper.OUTPUT_FILE),
                  'wb') as f:
            f.write(b'newer')
        self.assertEqual('der-newer', workload_output.tail(self.dir, 9))
        packed = workload_output.output(self.dir)
        self.assertEqual(b'older-newer',
                         protocol.unpack(packed['data']))
        self.assertEqual(11, packed['kept'])


class ResultsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = os.path.join(self.tmp.name, 'root')
        os.makedirs(os.path.join(self.root, 'out'))
        self._file('/out/a.txt', b'alpha\n')
        self._file('/out/big.bin', os.urandom(5000))

    def _file(self, path, data):
        with open(self.root + path, 'wb') as f:
            f.write(data)

    def test_files_with_their_digest(self):
        found = workload_output.results(self.root, ['/out/a.txt'], 1000)
        entry = found['/out/a.txt']
        self.assertEqual(b'alpha\n', protocol.unpack(entry['data']))
        self.assertEqual(6, entry['size'])
        self.assertEqual(hashlib.sha256(b'alpha\n').hexdigest(),
                         entry['sha256'])

    def test_what_cannot_be_returned_says_why(self):
        os.symlink('/etc/hostname', os.path.join(self.root, 'out', 'host'))
        os.mkfifo(os.path.join(self.root, 'out', 'fifo'))
        found = workload_output.results(
            self.root, ['/out/missing', '/out', '/out/fifo', '/out/host'],
            1000)
        self.assertIn('no such file', found['/out/missing']['error'])
        self.assertEqual('not a regular file', found['/out']['error'])
        self.assertEqual('not a regular file', found['/out/fifo']['error'])
        # The link is resolved inside the root: the node's file is never
        # read.
        self.assertIn('no such file', found['/out/host']['error'])

    def test_bound_over_all_files(self):
        found = workload_output.results(
            self.root, ['/out/big.bin', '/out/a.txt', '/out/big.bin'], 5003)
        self.assertEqual(5000, found['/out/big.bin']['size'])
        found = workload_output.results(
            self.root, ['/out/a.txt', '/out/big.bin'], 5003)
        self.assertIn('too large', found['/out/big.bin']['error'])
        self.assertIn('data', found['/out/a.txt'])
