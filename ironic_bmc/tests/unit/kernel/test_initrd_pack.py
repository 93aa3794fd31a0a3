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

"""Initrds joined into one lz4 archive, with the real lz4 and zstd (Debian
packages of the conductor host): what the kernel will unpack is read
back with ``lz4 -dc``."""

import gzip
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

from ironic_bmc.kernel import initrd_pack

TOOLS = all(shutil.which(t) for t in ('lz4', 'zstd'))


@unittest.skipUnless(TOOLS, 'lz4 and zstd (Debian packages) are needed')
class PackTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def _file(self, name, body):
        path = os.path.join(self.dir, name)
        with open(path, 'wb') as f:
            f.write(body)
        return path

    def _unpacked(self, path):
        with open(path, 'rb') as f:
            # The legacy format, the one the kernel reads.
            self.assertEqual(b'\x02\x21\x4c\x18', f.read(4))
        return subprocess.run(['lz4', '-dc', path], check=True,
                              capture_output=True).stdout

    def test_plain_gzip_and_zstd_parts_in_one_stream(self):
        plain = b'070701' + b'a' * 1001          # 1007: 1 byte of padding
        gz = b'070701' + b'g' * 5000
        zs = b'070702' + os.urandom(3000)
        zst = subprocess.run(['zstd', '-q', '-c'], input=zs, check=True,
                             capture_output=True).stdout
        paths = [self._file('ramdisk', plain),
                 self._file('modules.gz', gzip.compress(gz)),
                 self._file('extra.zst', zst)]
        out = os.path.join(self.dir, 'packed')
        written = initrd_pack.pack(paths, out)
        expected = plain + b'\0' + gz + b'\0' * (-len(gz) % 4) + zs
        self.assertEqual(expected, self._unpacked(out))
        self.assertEqual(len(expected), written)

    def test_a_part_it_cannot_unpack_is_refused_by_name(self):
        xz = self._file('ramdisk.xz', b'\xfd7zXZ\x00rest')
        out = os.path.join(self.dir, 'packed')
        with self.assertRaisesRegex(initrd_pack.PackError,
                                    'ramdisk.xz is neither a cpio'):
            initrd_pack.pack([self._file('a', b'070701a'), xz], out)

    def test_a_broken_gzip_part(self):
        bad = self._file('modules.gz', gzip.compress(b'070701' * 100)[:-12])
        with self.assertRaisesRegex(initrd_pack.PackError, 'modules.gz'):
            initrd_pack.pack([bad], os.path.join(self.dir, 'packed'))

    def test_a_broken_zstd_part(self):
        bad = self._file('x.zst', b'\x28\xb5\x2f\xfd' + b'\xff' * 64)
        with self.assertRaisesRegex(initrd_pack.PackError,
                                    'zstd .*x.zst failed'):
            initrd_pack.pack([bad], os.path.join(self.dir, 'packed'))

    @mock.patch.object(initrd_pack, 'MIN_LIMIT', 1 << 20)
    def test_a_decompression_bomb_is_refused_by_name(self):
        # 64 MiB of zeros: about 64 KiB of gzip, a thousand times smaller.
        bomb = self._file('modules.gz', gzip.compress(b'\0' * (64 << 20)))
        zero = b'\0' * (64 << 20)
        zbomb = self._file('x.zst', subprocess.run(
            ['zstd', '-q', '-c'], input=zero, check=True,
            capture_output=True).stdout)
        for path in (bomb, zbomb):
            with self.assertRaisesRegex(
                    initrd_pack.PackError,
                    '%s unpacks to more than 50 times its size' % path):
                initrd_pack.pack([self._file('a', b'070701a'), path],
                                 os.path.join(self.dir, 'packed'))

    @mock.patch.object(initrd_pack, 'MAX_UNPACKED', 1 << 20)
    def test_parts_past_the_absolute_bound_are_refused(self):
        # Each part well within MAX_RATIO (and MIN_LIMIT), but together
        # past MAX_UNPACKED (patched down from 4 GiB to 1 MiB).
        ramdisk = self._file('ramdisk', b'070701' + b'r' * (600 << 10))
        modules = self._file('modules.gz', gzip.compress(
            b'070701' + os.urandom(600 << 10)))
        zero = b'070701' + b'\0' * (2 << 20)
        zbomb = self._file('x.zst', subprocess.run(
            ['zstd', '-q', '-c'], input=zero, check=True,
            capture_output=True).stdout)
        out = os.path.join(self.dir, 'packed')
        for paths, culprit in (([ramdisk, modules], modules),
                               ([zbomb], zbomb)):
            with self.assertRaisesRegex(
                    initrd_pack.PackError,
                    'the initrds unpack to more than 1048576 bytes '
                    'together \\(past it in %s\\): refused' % culprit):
                initrd_pack.pack(paths, out)
        # Below it, as before: 614406 bytes, 2 of padding, 4.
        self.assertEqual(614406 + 2 + 4, initrd_pack.pack(
            [ramdisk, self._file('m.gz', gzip.compress(b'0707'))], out))

    def test_no_lz4_on_the_host(self):
        with mock.patch.object(initrd_pack, 'LZ4', ('no-such-lz4',)), \
                self.assertRaisesRegex(initrd_pack.PackError,
                                       'Debian package lz4'):
            initrd_pack.pack([self._file('a', b'070701a')],
                             os.path.join(self.dir, 'packed'))
