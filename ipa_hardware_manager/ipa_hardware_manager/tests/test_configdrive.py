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

import hashlib
import io
import os
import shutil
import stat
import subprocess
import tempfile
import unittest
from unittest import mock

from ipa_hardware_manager import container_root
from ipa_hardware_manager import configdrive
from ipa_hardware_manager import manager
from ipa_hardware_manager import oci_spec
from ipa_hardware_manager import rootfs
from ipa_hardware_manager import rootfs_download
from bmc_common import configdrive as reader
from bmc_common import protocol
from bmc_common.tests import isos


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.base = os.path.join(self.tmp, 'cd')
        self.root = os.path.join(self.tmp, 'root')
        os.makedirs(os.path.join(self.root, 'etc'))
        self.iso = isos.config_drive()
        self.args = {'url': 'http://10.0.2.2:8080/n/configdrive-x/c.iso',
                     'sha256': hashlib.sha256(self.iso).hexdigest(),
                     'size': len(self.iso), 'authorized_keys': True}
        self.download = mock.patch.object(
            rootfs_download, 'download', autospec=True,
            side_effect=self._download).start()
        self.losetup = mock.patch.object(
            configdrive, '_losetup', autospec=True,
            return_value=subprocess.CompletedProcess(
                [], 0, '/dev/loop7\n', '')).start()
        self.addCleanup(mock.patch.stopall)

    def _download(self, url, dest, sha256, size):
        with open(dest, 'wb') as f:
            f.write(self.iso)
        return len(self.iso)

    def read(self, *parts):
        with open(os.path.join(*parts)) as f:
            return f.read()


class PrepareTest(Base):
    def test_files_keys_and_device(self):
        files, done = configdrive.prepare(self.args, self.root, self.base)
        self.assertEqual(os.path.join(self.base, 'files'), files)
        self.assertGreaterEqual(done.pop('seconds'), 0)
        self.assertEqual({'files': 3, 'bytes': len(self.iso),
                          'device': '/dev/loop7', 'authorized_keys': 1},
                         done)
        self.download.assert_called_once_with(
            self.args['url'], os.path.join(self.base, 'config-2.iso'),
            self.args['sha256'], len(self.iso))
        self.assertEqual('#!/bin/sh\necho hi\n', self.read(
            files, 'openstack/latest/user_data'))
        self.assertIn('public_keys', self.read(
            files, 'openstack/latest/meta_data.json'))
        keys = os.path.join(self.root, 'root/.ssh/authorized_keys')
        self.assertEqual(isos.KEY + '\n', self.read(keys))
        self.assertEqual(0o600, stat.S_IMODE(os.stat(keys).st_mode))
        for d in ('root', 'root/.ssh'):
            st = os.stat(os.path.join(self.root, d))
            self.assertEqual(0o700, stat.S_IMODE(st.st_mode))
            self.assertEqual((0, 0), (st.st_uid, st.st_gid))
        self.losetup.assert_called_once_with(
            '--find', '--show', '--read-only',
            os.path.join(self.base, 'config-2.iso'))
        self.assertEqual('/dev/loop7', self.read(self.base, 'device'))

    def test_keys_appended_once_to_what_the_image_has(self):
        os.makedirs(os.path.join(self.root, 'root/.ssh'))
        keys = os.path.join(self.root, 'root/.ssh/authorized_keys')
        with open(keys, 'w') as f:
            f.write('ssh-rsa IMAGE own')
        configdrive.prepare(self.args, self.root, self.base)
        _files, done = configdrive.prepare(self.args, self.root, self.base)
        self.assertEqual(0, done['authorized_keys'])
        self.assertEqual('ssh-rsa IMAGE own\n%s\n' % isos.KEY,
                         self.read(keys))

    def test_keys_switched_off(self):
        args = dict(self.args, authorized_keys=False)
        _files, done = configdrive.prepare(args, self.root, self.base)
        self.assertEqual(0, done['authorized_keys'])
        self.assertFalse(os.path.exists(os.path.join(self.root, 'root')))

    def test_symlinked_root_home_stays_inside_the_root(self):
        outside = os.path.join(self.tmp, 'outside')
        os.makedirs(outside)
        # An absolute link resolves inside the root, never outside.
        os.symlink(outside, os.path.join(self.root, 'root'))
        configdrive.prepare(self.args, self.root, self.base)
        self.assertEqual([], os.listdir(outside))
        self.assertTrue(os.path.isfile(os.path.join(
            self.root, outside.lstrip('/'), '.ssh/authorized_keys')))

    def test_authorized_keys_symlink_not_followed(self):
        os.makedirs(os.path.join(self.root, 'root/.ssh'))
        target = os.path.join(self.tmp, 'victim')
        with open(target, 'w') as f:
            f.write('x')
        os.symlink(target, os.path.join(self.root,
                                        'root/.ssh/authorized_keys'))
        with self.assertRaisesRegex(configdrive.ConfigDriveError,
                                    'cannot write /root/.ssh/authorized_'):
            configdrive.prepare(self.args, self.root, self.base)
        self.assertEqual('x', self.read(target))

    def test_previous_drive_released(self):
        configdrive.prepare(self.args, self.root, self.base)
        self.losetup.reset_mock()
        configdrive.prepare(self.args, self.root, self.base)
        self.assertEqual(mock.call('--detach', '/dev/loop7'),
                         self.losetup.call_args_list[0])

    def test_no_loop_device_is_not_fatal(self):
        self.losetup.return_value = subprocess.CompletedProcess(
            [], 1, '', 'losetup: cannot find an unused loop device')
        _files, done = configdrive.prepare(self.args, self.root, self.base)
        self.assertIsNone(done['device'])

    def test_download_error(self):
        self.download.side_effect = rootfs_download.DownloadError(
            'artifact x has digest sha256:1, expected sha256:2')
        with self.assertRaisesRegex(configdrive.ConfigDriveError,
                                    'configdrive: artifact x has digest'):
            configdrive.prepare(self.args, self.root, self.base)

    def test_malformed_iso_refused(self):
        self.iso = isos.config_drive(label='cidata')
        with self.assertRaisesRegex(configdrive.ConfigDriveError,
                                    'volume label'):
            configdrive.prepare(dict(self.args, size=len(self.iso)),
                                self.root, self.base)

    def test_arguments_checked(self):
        for bad in ({'url': 'file:///etc/shadow'}, {'sha256': 'x'},
                    {'size': 0}, {'size': True},
                    {'authorized_keys': 'yes'}):
            with self.assertRaises(configdrive.ConfigDriveError):
                configdrive.prepare(dict(self.args, **bad), self.root,
                                    self.base)
        self.download.assert_not_called()


class ExtractTest(Base):
    def test_traversal_refused(self):
        image = reader.Image(io.BytesIO(self.iso), len(self.iso))
        target = os.path.join(self.tmp, 'files')
        for path in ('../x', 'a/../../x', '/etc/x', 'a//b'):
            shutil.rmtree(target, ignore_errors=True)
            with self.assertRaisesRegex(configdrive.ConfigDriveError,
                                        'out of its directory|plain path'):
                configdrive.extract(image, [reader.Entry(path, False, 0, 1)],
                                    target)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, 'x')))

    def test_existing_file_never_replaced(self):
        image = reader.Image(io.BytesIO(self.iso), len(self.iso))
        target = os.path.join(self.tmp, 'files')
        entries = [reader.Entry('a', False, 0, 1),
                   reader.Entry('a', False, 0, 1)]
        with self.assertRaises(FileExistsError):
            configdrive.extract(image, entries, target)


class SpecTest(Base):
    def test_mount_read_only_under_run(self):
        files = os.path.join(self.base, 'files')
        spec = oci_spec.build(self.root, ['true'],
                              mounts=[configdrive.mount(files)])
        mounts = container_root.resolve_mount_points(self.root, spec['mounts'])
        names = [m['destination'] for m in mounts]
        # The image's own /run (no mount of the container there).
        self.assertNotIn('/run', names)
        mount = mounts[names.index(protocol.CONFIGDRIVE_PATH)]
        self.assertEqual({'destination': '/run/bmc/config-drive',
                          'type': 'bind', 'source': files,
                          'options': ['bind', 'ro', 'nosuid', 'nodev',
                                      'noexec']}, mount)


class StepTest(Base):
    def setUp(self):
        super().setUp()
        self.hwm = manager.BmcContainerHardwareManager()
        self.hwm._supervisor = mock.Mock()
        self.hwm._supervisor.status.return_value = {'state': 'absent'}
        self.hwm._supervisor.start.return_value = {'pid': 4, 'started': 1}
        mock.patch.object(rootfs, 'load', autospec=True,
                          return_value={'root': self.root}).start()
        mock.patch.object(configdrive, 'BASE', self.base).start()
        mock.patch.object(manager.steps_tunables, 'partitions_at_start',
                          autospec=True, return_value=None).start()

    def test_start_with_a_configdrive(self):
        result = self.hwm.bmc_start_workload(
            {}, [], command=['sh'], configdrive=self.args)
        self.assertEqual(3, result['configdrive']['files'])
        mounts = self.hwm._supervisor.start.call_args.kwargs['mounts']
        self.assertEqual([configdrive.mount(
            os.path.join(self.base, 'files'))], mounts)

    def test_refused_configdrive_fails_the_step(self):
        with self.assertRaisesRegex(Exception,
                                    'bmc_start_workload: configdrive url'):
            self.hwm.bmc_start_workload(
                {}, [], command=['sh'], configdrive={'url': 'x'})
        self.hwm._supervisor.start.assert_not_called()
