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

"""Kernel builds end to end on a fake source tree: the conductor's side
(plan, start, status, the cache by digest) and the worker it starts (a
real process, real make, real tar)."""

import gzip
import json
import os
import shutil
import signal
import tempfile
import time

import fixtures
from ironic.common import exception
from ironic.tests import base

from ironic_bmc.kernel import artifact
from ironic_bmc.kernel import build as worker
from ironic_bmc.kernel import builds
from ironic_bmc.kernel import profile as kernel_profile
from ironic_bmc.tests.unit.kernel import fake_source


def _running(program):
    """The pids of the live processes that run ``program`` (the test's
    own fake make: its path is in the test's temporary directory)."""
    pids = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % entry, 'rb') as f:
                argv = f.read().split(b'\0')
            with open('/proc/%s/stat' % entry) as f:
                state = f.read().rsplit(')', 1)[1].split()[0]
        except OSError:
            continue    # ended meanwhile
        if program.encode() in argv and state != 'Z':
            pids.append(int(entry))
    return pids


def _kill_running(program):
    """Kill what a failed test left of its own fake make."""
    for pid in _running(program):
        os.kill(pid, signal.SIGKILL)


class KernelBuildsTestCase(base.TestCase):

    # The builds are real processes (make, tar) on a fake source tree.
    block_execute = False

    def _clear_attrs(self):
        # Ironic's base deletes the test's attributes at cleanup, which
        # pytest's unittest runner then trips over.
        pass

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix='bmc-kbuild-test-')
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        # make and depmod are the fakes (the unit tier's machine has
        # neither); the worker, a real process, finds them on PATH.
        tools = fake_source.install_tools(os.path.join(self.tmp, 'bin'))
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', tools + os.pathsep + os.environ.get('PATH', '')))
        self.src_dir = os.path.join(self.tmp, 'src')
        os.makedirs(self.src_dir)
        fake_source.write(os.path.join(self.src_dir,
                                       'linux-source-6.1.tar.gz'))
        self.configs = os.path.join(self.tmp, 'configs')
        os.makedirs(self.configs)
        self._fragment('small', 'CONFIG_64BIT=y\nCONFIG_DEBUG_FS=y\n')
        self.config(kernel_build_dir=os.path.join(self.tmp, 'kb'),
                    kernel_source_dirs=[self.src_dir],
                    kernel_config_dirs=[self.configs],
                    kernel_build_min_free_gb=0, kernel_build_timeout=60,
                    group='container')
        self.config(file_url_allowed_paths=[self.tmp], group='conductor')

    def _fragment(self, name, text):
        with open(os.path.join(self.configs, name + '.config'), 'w') as f:
            f.write(text)

    def _wait(self, build_id, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = builds.status(build_id)
            if status['state'] not in (worker.QUEUED, worker.BUILDING):
                return status
            time.sleep(0.1)
        self.fail('build %s did not end' % build_id)

    def _log(self, build_id):
        with open(builds.status(build_id)['log']) as f:
            return f.read()

    def test_plain_build_is_published_and_named_in_uname(self):
        status = self._wait(builds.start(builds.plan('plain',
                                                     config='small'))
                            ['build_id'])
        self.assertEqual(worker.SUCCEEDED, status['state'],
                         status.get('error'))
        build_id = status['build_id']
        self.assertEqual('file://%s/kb/builds/%s/artifact/vmlinuz'
                         % (self.tmp, build_id), status['kernel'])
        self.assertEqual(fake_source.RELEASE, status['release'])
        published = builds.artifact_dir(build_id)
        with open(os.path.join(published, artifact.VMLINUZ)) as f:
            image = f.read()
        # "uname -v" of the kernel names its variant and build.
        self.assertIn('#plain-%s' % build_id[:12], image)
        self.assertEqual('#plain-%s' % build_id[:12],
                         status['build']['uname_v_prefix'])
        with open(os.path.join(published, artifact.MANIFEST)) as f:
            manifest = json.load(f)
        self.assertEqual('plain', manifest['build']['variant'])
        with gzip.open(os.path.join(published, artifact.MODULES_CPIO)) as f:
            self.assertIn(b'modules.builtin', f.read())
        # The object tree is gone; the config and the log stay.
        directory = os.path.dirname(status['log'])
        self.assertFalse(os.path.exists(os.path.join(directory, 'obj')))
        with open(os.path.join(directory, worker.CONFIG)) as f:
            self.assertIn('CONFIG_DEBUG_FS=y', f.read())

    def test_same_inputs_return_the_cached_build(self):
        spec = builds.plan('plain', config='small')
        first = self._wait(builds.start(spec)['build_id'])
        again = builds.start(builds.plan('plain', config='small'))
        self.assertTrue(again['cached'])
        self.assertEqual(first['build_id'], again['build_id'])
        self.assertEqual(first['ended'], again['ended'])
        # Another fragment text is another build.
        self._fragment('small', 'CONFIG_64BIT=y\n')
        self.assertNotEqual(first['build_id'],
                            builds.plan('plain', config='small')['build_id'])

    def test_gcov_adds_its_fragment_and_is_another_build(self):
        plain = builds.plan('plain', config='small')
        gcov = builds.plan('gcov', config='small')
        self.assertNotEqual(plain['build_id'], gcov['build_id'])
        self.assertEqual(['small.config', 'gcov.config'],
                         [os.path.basename(p) for p in gcov['fragments']])

    def test_an_option_that_does_not_stick_fails_naming_it(self):
        self._fragment('bad', 'CONFIG_64BIT=y\nCONFIG_NEEDS_MISSING=y\n')
        status = self._wait(builds.start(builds.plan('plain', config='bad'))
                            ['build_id'])
        self.assertEqual(worker.FAILED, status['state'])
        self.assertIn('CONFIG_NEEDS_MISSING=y (now unset)', status['error'])
        self.assertNotIn('kernel', status)
        self.assertFalse(os.path.exists(builds.artifact_dir(
            status['build_id'])))
        # A failed build is started again when asked again.
        again = builds.start(builds.plan('plain', config='bad'))
        self.assertFalse(again['cached'])

    def test_a_build_past_its_timeout_is_killed(self):
        self.config(kernel_build_timeout=60, group='container')
        spec = builds.plan('plain', config='small')
        spec['timeout'] = 1
        # make's compile sleeps 30 s, then leaves a mark.  A worker that
        # waited for it instead of killing it would fail the same way (its
        # next step is past the deadline), and one that left it running
        # too: the mark and the processes left, not the time the build
        # took, tell them apart.  (Killed before or during its compile:
        # either way no make outlives the build, none wakes up.)
        mark = os.path.join(self.tmp, 'make-slept')
        make = os.path.join(self.tmp, 'bin', 'make')
        self.useFixture(fixtures.EnvironmentVariable('FAKE_SLEEP', '30'))
        self.useFixture(fixtures.EnvironmentVariable('FAKE_SLEEP_MARK',
                                                     mark))
        self.addCleanup(_kill_running, make)
        status = self._wait(builds.start(spec)['build_id'])
        self.assertEqual(worker.FAILED, status['state'])
        self.assertIn('ran past its timeout of 1 s', status['error'])
        self.assertFalse(os.path.exists(mark),
                         'make was waited for, not killed')
        self.assertEqual([], _running(make), 'make still runs: not killed')

    def test_not_enough_disk_is_refused_before_compiling(self):
        spec = builds.plan('plain', config='small')
        spec['min_free_bytes'] = 2 ** 62
        status = self._wait(builds.start(spec)['build_id'])
        self.assertEqual(worker.FAILED, status['state'])
        self.assertIn('not enough disk for a kernel build', status['error'])
        self.assertNotIn('compiling', self._log(status['build_id']))

    def test_a_dead_build_process_is_a_failed_build(self):
        spec = builds.plan('plain', config='small')
        directory = os.path.join(self.tmp, 'kb', 'builds', spec['build_id'])
        os.makedirs(directory)
        with open(os.path.join(directory, worker.SPEC), 'w') as f:
            json.dump(spec, f)
        with open(os.path.join(directory, worker.STATUS), 'w') as f:
            # No process has this pid.
            json.dump({'state': worker.BUILDING, 'pid': 2 ** 22 + 1}, f)
        status = builds.status(spec['build_id'])
        self.assertEqual(worker.FAILED, status['state'])
        self.assertIn('ended without a result', status['error'])

    def test_pgo_build_uses_the_profile_of_its_gcov_build(self):
        gcov = self._wait(builds.start(builds.plan('gcov', config='small'))
                          ['build_id'])
        self.assertEqual(worker.SUCCEEDED, gcov['state'], gcov.get('error'))
        tar = fake_source.profile_tar(
            os.path.join(self.tmp, 'profile.tar'), gcov['build_id'],
            objects=fake_source.OBJECTS[:2])
        with kernel_profile.open_tar(tar) as opened:
            found, files, size = kernel_profile.check(opened, 2 ** 20)
        self.assertEqual((gcov['build_id'], 2), (found, files))
        profile = {'path': tar, 'sha256': artifact.sha256_file(tar),
                   'build': found, 'run': 'run-1'}
        spec = builds.plan('pgo', profile=profile)
        # The gcov build's source and config, without the gcov fragment.
        self.assertEqual(['small.config'],
                         [os.path.basename(p) for p in spec['fragments']])
        status = self._wait(builds.start(spec)['build_id'])
        self.assertEqual(worker.SUCCEEDED, status['state'],
                         status.get('error'))
        used = status['build']['profile']
        self.assertEqual(2, used['gcda_files'])
        # gcc read two profiles; the third object had none.
        self.assertEqual(1, used['objects_without_profile'])
        self.assertEqual(gcov['build_id'], used['from_build'])
        with open(os.path.join(builds.artifact_dir(status['build_id']),
                               artifact.VMLINUZ)) as f:
            image = f.read()
        self.assertIn('-fprofile-use', image)
        self.assertIn('#pgo-', image)
        self.assertIn('profile used: 2 .gcda files',
                      self._log(status['build_id']))
        # Another profile, another kernel.
        other = dict(profile, sha256='0' * 64)
        self.assertNotEqual(spec['build_id'],
                            builds.plan('pgo', profile=other)['build_id'])
        # A profile of an older config does not go into the new one.
        self._fragment('small', 'CONFIG_64BIT=y\n')
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'the config fragments changed since gcov '
                               'build', builds.plan, 'pgo', profile=profile)

    def test_pgo_needs_a_gcov_build_of_this_conductor(self):
        profile = {'path': '/nonexistent', 'sha256': '0' * 64,
                   'build': 'ab' * 12}
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'which this conductor does not have',
                               builds.plan, 'pgo', profile=profile)
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'needs the run that profiled',
                               builds.plan, 'pgo')
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'only a pgo build takes one',
                               builds.plan, 'gcov', profile=profile)

    def test_inputs_are_names_looked_up_in_the_configured_dirs(self):
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'is not a file name',
                               builds.plan, 'plain', source='../etc/passwd')
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'no linux-9.tar.xz in',
                               builds.plan, 'plain', source='linux-9.tar.xz')
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'no nope.config in',
                               builds.plan, 'plain', config='nope')
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               "'fast' is not one of plain, gcov, pgo",
                               builds.plan, 'fast')
        fake_source.write(os.path.join(self.src_dir,
                                       'linux-source-6.12.tar.gz'))
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'name the source tarball: 2',
                               builds.plan, 'plain', config='small')

    def test_builds_must_be_bootable_as_file_urls(self):
        self.config(file_url_allowed_paths=['/var/lib/ironic'],
                    group='conductor')
        self.assertRaisesRegex(
            exception.InvalidParameterValue,
            r'kernel_build_dir \(.*/kb\) is not under \[conductor\]'
            r'file_url_allowed_paths \(/var/lib/ironic\)',
            builds.plan, 'plain', config='small')

    def test_the_package_config_is_found_and_complete(self):
        path = builds.resolve_config('bmc-node')
        with open(path) as f:
            options = worker.parse_config(f.read())
        for option in ('CONFIG_VIRTIO_NET', 'CONFIG_EROFS_FS',
                       'CONFIG_OVERLAY_FS', 'CONFIG_BLK_DEV_NBD',
                       'CONFIG_DM_VERITY', 'CONFIG_CGROUP_BPF',
                       'CONFIG_KEXEC_FILE', 'CONFIG_DEBUG_FS'):
            self.assertEqual('y', options[option], option)
        with open(builds.resolve_config('gcov')) as f:
            self.assertEqual('y', worker.parse_config(f.read())[
                'CONFIG_GCOV_PROFILE_ALL'])
