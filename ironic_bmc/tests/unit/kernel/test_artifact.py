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

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

from ironic_bmc.kernel import artifact

VERSION = '6.1.0-99-amd64'

DEPS = {
    'kernel/drivers/net/virtio_net.ko': ['kernel/drivers/net/net_failover.ko',
                                         'kernel/net/core/failover.ko'],
    'kernel/drivers/net/net_failover.ko': ['kernel/net/core/failover.ko'],
    'kernel/net/core/failover.ko': [],
    'kernel/fs/erofs/erofs.ko.xz': [],
    'kernel/drivers/block/loop.ko': [],
    'kernel/fs/ext4/ext4.ko': ['kernel/fs/jbd2/jbd2.ko'],
    'kernel/fs/jbd2/jbd2.ko': [],
}


def read_newc(data):
    """Parse a newc cpio: [(name, mode, content)]; checks the format."""
    entries = []
    pos = 0
    while True:
        header = data[pos:pos + 110].decode()
        assert header[:6] == '070701', header[:6]
        fields = [int(header[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
        mode, filesize, namesize = fields[1], fields[6], fields[11]
        assert fields[2] == fields[3] == 0  # uid, gid
        pos += 110
        name = data[pos:pos + namesize - 1].decode()
        assert data[pos + namesize - 1] == 0
        pos += namesize
        pos += (4 - pos % 4) % 4
        content = data[pos:pos + filesize]
        pos += filesize
        pos += (4 - pos % 4) % 4
        if name == 'TRAILER!!!':
            return entries
        entries.append((name, mode, content))


def fake_depmod(root, version):
    moddir = os.path.join(root, 'lib', 'modules', version)
    present = set()
    for dirpath, _dirs, files in os.walk(moddir):
        for name in files:
            if name.endswith(artifact._KO_SUFFIXES):
                present.add(os.path.relpath(os.path.join(dirpath, name),
                                            moddir))
    with open(os.path.join(moddir, 'modules.dep'), 'w') as f:
        f.writelines('%s: %s\n' % (path, ' '.join(DEPS.get(path, [])))
                     for path in sorted(present))


class HelpersTest(unittest.TestCase):
    def test_module_name(self):
        self.assertEqual('virtio_net', artifact.module_name(
            'kernel/drivers/net/virtio_net.ko'))
        self.assertEqual('erofs', artifact.module_name('a/erofs.ko.xz'))
        self.assertEqual('snd_hda_intel',
                         artifact.module_name('x/snd-hda-intel.ko.zst'))

    def test_parse_modules_dep(self):
        text = 'a.ko: b.ko c.ko\nb.ko:\n\nc.ko:\n'
        self.assertEqual({'a.ko': ['b.ko', 'c.ko'], 'b.ko': [], 'c.ko': []},
                         artifact.parse_modules_dep(text))

    def test_select_closure(self):
        paths, missing = artifact.select_modules(
            DEPS, ['virtio-net', 'loop', 'nosuchmod'])
        self.assertEqual(sorted(['kernel/drivers/net/virtio_net.ko',
                                 'kernel/drivers/net/net_failover.ko',
                                 'kernel/net/core/failover.ko',
                                 'kernel/drivers/block/loop.ko']), paths)
        self.assertEqual(['nosuchmod'], missing)

    def test_softdeps_through_aliases(self):
        deps = {'kernel/fs/erofs/erofs.ko': ['kernel/lib/libcrc32c.ko'],
                'kernel/lib/libcrc32c.ko': [],
                'kernel/crypto/crc32c_generic.ko': [],
                'kernel/arch/x86/crypto/crc32c-intel.ko': [],
                'kernel/fs/ext4/ext4.ko': []}
        soft = artifact.parse_softdeps(
            '# comment\nsoftdep libcrc32c pre: crc32c\n'
            'softdep ext4 pre: crc16\n')
        self.assertEqual({'libcrc32c': ['crc32c'], 'ext4': ['crc16']}, soft)
        aliases = artifact.parse_aliases(
            'alias crc32c crc32c_intel\nalias crc32c crc32c_generic\n'
            'alias pci:v00001AF4d* virtio_pci\n')
        paths, missing = artifact.select_modules(deps, ['erofs'], soft,
                                                 aliases)
        self.assertEqual(sorted(['kernel/fs/erofs/erofs.ko',
                                 'kernel/lib/libcrc32c.ko',
                                 'kernel/crypto/crc32c_generic.ko',
                                 'kernel/arch/x86/crypto/crc32c-intel.ko']),
                         paths)
        self.assertEqual([], missing)
        # without softdeps the closure misses the crc32c implementation
        paths, _ = artifact.select_modules(deps, ['erofs'])
        self.assertEqual(2, len(paths))

    def test_newc_roundtrip(self):
        buf = io.BytesIO()
        w = artifact.NewcWriter(buf, mtime=7)
        w.add_dir('lib')
        w.add_file('lib/a', b'12345')
        w.add_file('lib/empty', b'')
        w.close()
        data = buf.getvalue()
        self.assertEqual(0, len(data) % 4)
        entries = read_newc(data)
        self.assertEqual([('lib', 0o40755, b''), ('lib/a', 0o100644,
                                                  b'12345'),
                          ('lib/empty', 0o100644, b'')], entries)

    @unittest.skipUnless(shutil.which('cpio'), 'needs cpio')
    def test_newc_readable_by_cpio(self):
        buf = io.BytesIO()
        w = artifact.NewcWriter(buf)
        w.add_dir('d')
        w.add_file('d/f', b'x' * 5)
        w.close()
        out = subprocess.run(['cpio', '-it', '--quiet'], input=buf.getvalue(),
                             capture_output=True, check=True)
        self.assertEqual(b'd\nd/f\n', out.stdout)


class BuildTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = os.path.join(self.tmp.name, 'root')
        self.out = os.path.join(self.tmp.name, 'out')
        os.makedirs(os.path.join(self.root, 'boot'))
        with open(os.path.join(self.root, 'boot', 'vmlinuz-' + VERSION),
                  'wb') as f:
            f.write(b'KERNEL')
        moddir = os.path.join(self.root, 'lib', 'modules', VERSION)
        for path in DEPS:
            full = os.path.join(moddir, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, 'wb') as f:
                f.write(path.encode())
        with open(os.path.join(moddir, 'modules.order'), 'w') as f:
            f.write('\n'.join(DEPS))
        with open(os.path.join(moddir, 'modules.builtin'), 'w') as f:
            f.write('kernel/fs/overlayfs/overlay.ko\n')
        os.symlink('/usr/src/linux-headers', os.path.join(moddir, 'build'))
        patcher = mock.patch.object(artifact, '_depmod', autospec=True,
                                    side_effect=fake_depmod)
        self.mock_depmod = patcher.start()
        self.addCleanup(patcher.stop)

    def _cpio(self):
        with gzip.open(os.path.join(self.out, artifact.MODULES_CPIO)) as f:
            return read_newc(f.read())

    def test_installed_all(self):
        manifest = artifact.build(self.out, installed=VERSION,
                                  root=self.root)
        self.assertEqual(VERSION, manifest['version'])
        self.assertEqual('installed:' + VERSION, manifest['source'])
        self.assertIsNone(manifest['modules']['subset'])
        self.assertEqual(len(DEPS), manifest['modules']['count'])
        with open(os.path.join(self.out, artifact.VMLINUZ), 'rb') as f:
            self.assertEqual(b'KERNEL', f.read())
        names = [e[0] for e in self._cpio()]
        prefix = 'lib/modules/' + VERSION
        # never lib or lib/modules: they would replace a /lib symlink
        self.assertEqual(prefix, names[0])
        self.assertNotIn('lib', names)
        self.assertNotIn('lib/modules', names)
        self.assertIn(prefix + '/modules.dep', names)
        self.assertIn(prefix + '/kernel/fs/erofs/erofs.ko.xz', names)
        self.assertNotIn(prefix + '/build', names)  # symlinks left out
        # parents always come before their children
        seen = {'lib', 'lib/modules'}
        for name in names:
            parent = name.rpartition('/')[0]
            self.assertTrue(not parent or parent in seen, name)
            seen.add(name)
        # the manifest matches the files
        with open(os.path.join(self.out, artifact.MANIFEST)) as f:
            on_disk = json.load(f)
        self.assertEqual(manifest, on_disk)
        for name in (artifact.VMLINUZ, artifact.MODULES_CPIO):
            with open(os.path.join(self.out, name), 'rb') as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(),
                                 manifest['files'][name]['sha256'])

    def test_subset_with_dependencies(self):
        manifest = artifact.build(self.out, installed=VERSION,
                                  root=self.root,
                                  modules=['virtio_net', 'overlay', 'nope'])
        self.assertEqual(3, manifest['modules']['count'])
        # overlay is built in: not reported missing
        self.assertEqual(['nope'], manifest['modules']['missing'])
        names = {e[0] for e in self._cpio()}
        prefix = 'lib/modules/%s/' % VERSION
        self.assertIn(prefix + 'kernel/net/core/failover.ko', names)
        self.assertNotIn(prefix + 'kernel/fs/ext4/ext4.ko', names)
        self.assertIn(prefix + 'modules.builtin', names)
        deps = {e[0]: e[2] for e in self._cpio()}[
            prefix + 'modules.dep'].decode()
        self.assertIn('virtio_net.ko:', deps)
        self.assertNotIn('ext4', deps)

    def test_preset(self):
        manifest = artifact.build(self.out, installed=VERSION,
                                  root=self.root, modules=['agent'])
        self.assertIn('virtio_net', manifest['modules']['subset'])
        self.assertIn('erofs', manifest['modules']['subset'])

    def test_deterministic(self):
        artifact.build(self.out, installed=VERSION, root=self.root)
        with open(os.path.join(self.out, artifact.MODULES_CPIO), 'rb') as f:
            first = f.read()
        artifact.build(self.out, installed=VERSION, root=self.root)
        with open(os.path.join(self.out, artifact.MODULES_CPIO), 'rb') as f:
            self.assertEqual(first, f.read())

    @mock.patch.object(artifact, '_run', autospec=True)
    def test_deb_runs_depmod_when_deb_has_no_modules_dep(self, mock_run):
        deb = os.path.join(self.tmp.name, 'linux-image.deb')
        open(deb, 'w').close()

        def extract(*cmd):
            self.assertEqual(('dpkg-deb', '-x', deb), cmd[:3])
            shutil.copytree(self.root, cmd[3], symlinks=True)
        mock_run.side_effect = extract
        manifest = artifact.build(self.out, deb=deb, modules=['loop'])
        self.assertEqual('deb:linux-image.deb', manifest['source'])
        # once for the full tree (to resolve deps), once for the subset
        self.assertEqual(2, self.mock_depmod.call_count)
        self.assertEqual(1, manifest['modules']['count'])

    def test_errors(self):
        self.assertRaisesRegex(artifact.ArtifactError, 'exactly one',
                               artifact.build, self.out)
        self.assertRaisesRegex(artifact.ArtifactError, 'no such file',
                               artifact.build, self.out, deb='/nonexistent')
        self.assertRaisesRegex(artifact.ArtifactError,
                               'no boot/vmlinuz-9.9',
                               artifact.build, self.out, installed='9.9',
                               root=self.root)

    def test_several_kernels(self):
        open(os.path.join(self.root, 'boot', 'vmlinuz-other'), 'w').close()
        self.assertRaisesRegex(artifact.ArtifactError, 'several kernels',
                               artifact.find_kernel, self.root)

    def test_cli(self):
        with mock.patch('sys.stdout', new_callable=io.StringIO) as out:
            rc = artifact.main(['--installed', VERSION, '--out', self.out,
                                '--root', self.root, '--modules', 'loop'])
        self.assertEqual(0, rc)
        self.assertEqual(VERSION, json.loads(out.getvalue())['version'])

    def test_cli_error(self):
        with mock.patch('sys.stderr', new_callable=io.StringIO) as err:
            rc = artifact.main(['--installed', '0.0', '--out', self.out,
                                '--root', self.root])
        self.assertEqual(1, rc)
        self.assertIn('error: no boot/vmlinuz-0.0', err.getvalue())
