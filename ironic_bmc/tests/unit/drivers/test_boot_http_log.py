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
import tempfile
import unittest
from unittest import mock

from ironic_bmc.drivers import boot_http_log

NODE = '32e91710-8081-4414-be8f-3b689aa8590c'
OTHER = '0d4c51f6-9a55-4c0e-9d6f-6c1a2a1b3c4d'

TIMED = [
    # Another node's, at the same time; a 404; this node's three files.
    '1000.100 0.050 200 8247232 "GET /%s/deploy_kernel HTTP/1.1" "iPXE"'
    % OTHER,
    '1008.500 0.400 200 8247232 "GET /%s/deploy_kernel HTTP/1.1" "iPXE"'
    % NODE,
    '1008.600 0.010 404 153 "GET /%s/nothing HTTP/1.1" "iPXE"' % NODE,
    '1010.900 2.300 200 119380735 "GET /%s/deploy_ramdisk HTTP/1.1" "iPXE"'
    % NODE,
    '1011.000 0.100 200 5627776 "GET /%s/bmc_modules HTTP/1.1" "iPXE"'
    % NODE,
    'not a request line',
    # After the kernel started: the rootfs, not a boot file.
    '1050.000 1.000 200 1990656 "GET /%s/rootfs-x/rootfs.erofs HTTP/1.1" '
    '"Python-urllib/3.11"' % NODE,
]
COMBINED = [
    '127.0.0.1 - - [24/Nov/2026:16:34:34 +0000] "GET /%s/deploy_kernel '
    'HTTP/1.1" 200 8247232 "-" "iPXE/1.0.0"' % NODE,
    '127.0.0.1 - - [24/Nov/2026:16:34:36 +0000] "GET /%s/deploy_ramdisk '
    'HTTP/1.1" 200 119380735 "-" "iPXE/1.0.0"' % NODE,
]


class BootHttpLogTestCase(unittest.TestCase):

    def _log(self, lines):
        fd, path = tempfile.mkstemp()
        self.addCleanup(os.unlink, path)
        with os.fdopen(fd, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        return path

    def test_parse(self):
        self.assertEqual(
            (1008.1, 1008.5, 200, 8247232, '/%s/deploy_kernel' % NODE),
            tuple(round(v, 3) if isinstance(v, float) else v
                  for v in boot_http_log.parse(TIMED[1])))
        start, end, status, size, path = boot_http_log.parse(COMBINED[0])
        self.assertIsNone(start)
        self.assertEqual(1795538074.0, end)
        self.assertIsNone(boot_http_log.parse('not a request line'))

    def test_split_timed(self):
        got = boot_http_log.split(self._log(TIMED), NODE, 1000.0, 1013.0)
        self.assertEqual({'firmware_s': 8.1, 'downloads_s': 2.9,
                          'downloads_to_kernel_s': 2.0, 'requests': 3,
                          'bytes': 8247232 + 119380735 + 5627776,
                          'resolution_s': 0.001}, got)

    def test_split_combined_is_to_the_second(self):
        got = boot_http_log.split(self._log(COMBINED), NODE,
                                  1795538070.0, 1795538040.0 + 40)
        self.assertEqual(1.0, got['resolution_s'])
        self.assertEqual(4.0, got['firmware_s'])
        self.assertEqual(2.0, got['downloads_s'])

    def test_nothing_found_or_unreadable(self):
        got = boot_http_log.split(self._log(TIMED), NODE, 2000.0, 2100.0)
        self.assertIn('no request for /%s/ in' % NODE, got['error'])
        got = boot_http_log.split('/nonexistent/access.log', NODE, 1, 2)
        self.assertEqual('cannot read /nonexistent/access.log: No such '
                         'file or directory', got['error'])

    def test_only_the_tail_is_read(self):
        # The kernel's request is 20 KB before the end: not read.
        lines = [TIMED[1]] + ['x' * 100] * 200 + TIMED[2:]
        path = self._log(lines)
        with mock.patch.object(boot_http_log, 'TAIL_BYTES', 2000):
            got = boot_http_log.split(path, NODE, 1000.0, 1013.0)
        self.assertEqual(2, got['requests'])
        self.assertEqual(119380735 + 5627776, got['bytes'])
