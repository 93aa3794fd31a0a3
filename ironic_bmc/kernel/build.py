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

"""The kernel build worker: one build, from its spec to a kernel artifact.

The conductor (:mod:`ironic_bmc.kernel.builds`) writes a spec and starts
this module as its own process, outside any node lock::

    python -m ironic_bmc.kernel.build BUILD_DIR

It waits for a build slot (``flock``), then:

1. unpacks the source tarball once per digest (``sources/<sha256>``);
2. configures an ``O=`` tree: ``make tinyconfig``, the fragments merged
   with ``scripts/kconfig/merge_config.sh``, ``make olddefconfig``; an
   option of a fragment that did not stick fails the build, named;
3. for a ``pgo`` build, puts the profile's ``.gcda`` files where the
   objects will be and builds with ``-fprofile-use``;
4. ``make bzImage modules``, then ``modules_install`` into a stage tree,
   bounded by the spec's timeout (the whole process group is killed);
5. makes the artifact (:mod:`ironic_bmc.kernel.artifact`: ``vmlinuz``,
   ``modules.cpio.gz``, ``manifest.json``) in the build's ``artifact``
   directory (written aside, then renamed into place); the object
   tree is deleted, the config and the log are kept.

``status.json`` in BUILD_DIR says where it is; ``build.log`` holds every
command's output.  Standard library only.
"""

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time

from ironic_bmc.kernel import artifact
from ironic_bmc.kernel import profile as kernel_profile

SPEC = 'spec.json'
STATUS = 'status.json'
LOG = 'build.log'
CONFIG = 'config'
#: The build's artifact, under its directory.
ARTIFACT = 'artifact'

QUEUED = 'queued'
BUILDING = 'building'
SUCCEEDED = 'succeeded'
FAILED = 'failed'

PLAIN = 'plain'
GCOV = 'gcov'
PGO = 'pgo'
VARIANTS = (PLAIN, GCOV, PGO)

#: What a pgo build adds to the compiler's flags: read the profile, accept
#: its counters as they are (a kernel's are not updated atomically), and
#: do not fail on objects it has no profile for (e.g. the boot code).
PGO_KCFLAGS = ('-fprofile-use -fprofile-correction -Wno-coverage-mismatch '
               '-Wmissing-profile')
#: gcc's warning for an object compiled without profile data.
_MISSING_PROFILE = re.compile(r"profile count data file not found")

_OPTION = re.compile(r'^(CONFIG_\w+)=(.*)$')
_UNSET = re.compile(r'^# (CONFIG_\w+) is not set$')


class BuildError(Exception):
    """The build failed; the message says why, for the operator."""


class _Build:

    def __init__(self, build_dir):
        self.dir = build_dir
        with open(os.path.join(build_dir, SPEC)) as f:
            self.spec = json.load(f)
        self.log = open(os.path.join(build_dir, LOG), 'ab')
        self.deadline = None
        self.status = {'build_id': self.spec['build_id'],
                       'variant': self.spec['variant'], 'pid': os.getpid(),
                       'state': QUEUED, 'queued': time.time()}

    def save(self, **fields):
        self.status.update(fields)
        tmp = os.path.join(self.dir, STATUS + '.tmp')
        with open(tmp, 'w') as f:
            json.dump(self.status, f, indent=1, sort_keys=True)
        os.replace(tmp, os.path.join(self.dir, STATUS))

    def note(self, text):
        self.log.write(('== %s %s\n' % (time.strftime('%H:%M:%S'), text))
                       .encode())
        self.log.flush()

    def step(self, name):
        self.note(name)
        self.save(step=name)

    def run(self, *cmd, cwd=None, env=None):
        """Run a command into the log, within the build's deadline."""
        self.note('$ ' + ' '.join(cmd))
        left = None
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise BuildError(self._timeout_message())
        # argv list, no shell: make/tar on the build's own paths.
        proc = subprocess.Popen(  # noqa: S603
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            code = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise BuildError(self._timeout_message()) from None
        if code != 0:
            raise BuildError('%s failed (exit %d); the last lines of %s say '
                             'why' % (' '.join(cmd[:3]), code,
                                      os.path.join(self.dir, LOG)))

    def _timeout_message(self):
        return ('the build ran past its timeout of %d s '
                '([container]kernel_build_timeout) and was killed'
                % self.spec['timeout'])

    # The steps

    def wait_for_slot(self):
        slots = self.spec['slots']
        os.makedirs(slots, exist_ok=True)
        while True:
            for i in range(self.spec.get('workers', 1)):
                fd = os.open(os.path.join(slots, '%d.lock' % i),
                             os.O_CREAT | os.O_RDWR, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fd     # held until this process ends
                except BlockingIOError:
                    os.close(fd)
            time.sleep(2)

    def check_disk(self):
        need = self.spec.get('min_free_bytes', 0)
        st = os.statvfs(self.dir)
        free = st.f_bavail * st.f_frsize
        if free < need:
            raise BuildError(
                'not enough disk for a kernel build: %.1f GiB free in %s, '
                '[container]kernel_build_min_free_gb asks for %.1f GiB'
                % (free / 2 ** 30, self.dir, need / 2 ** 30))

    def source_tree(self):
        """The unpacked source (once per tarball digest)."""
        root = os.path.join(self.spec['sources'], self.spec['source_sha256'])
        lock = os.open(root + '.lock', os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if os.path.isfile(os.path.join(root, 'Makefile')):
                return root
            shutil.rmtree(root, ignore_errors=True)
            tmp = root + '.unpacking'
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            self.step('unpacking %s' % self.spec['source'])
            self.run('tar', '-xf', self.spec['source'], '-C', tmp,
                     '--strip-components=1', '--no-same-owner')
            if not os.path.isfile(os.path.join(tmp, 'Makefile')):
                raise BuildError('%s is not a Linux source tarball (no '
                                 'Makefile at its top)' % self.spec['source'])
            os.rename(tmp, root)
            return root
        finally:
            os.close(lock)

    def configure(self, src, obj):
        self.step('configuring')
        self.run('make', '-C', src, 'O=' + obj, 'tinyconfig')
        self.run(os.path.join(src, 'scripts', 'kconfig', 'merge_config.sh'),
                 '-m', '-O', obj, os.path.join(obj, '.config'),
                 *self.spec['fragments'], cwd=src)
        self.run('make', '-C', src, 'O=' + obj, 'olddefconfig')
        with open(os.path.join(obj, '.config')) as f:
            have = parse_config(f.read())
        wanted = {}
        for path in self.spec['fragments']:
            with open(path) as f:
                wanted.update(parse_config(f.read()))
        lost = sorted('%s=%s (now %s)' % (k, v, have.get(k, 'unset'))
                      for k, v in wanted.items() if have.get(k, 'n') != v)
        if lost:
            raise BuildError(
                'options of the config did not stick (a dependency is '
                'missing from the fragments): %s' % ', '.join(lost[:10]))
        shutil.copyfile(os.path.join(obj, '.config'),
                        os.path.join(self.dir, CONFIG))

    def place_profile(self, obj):
        self.step('placing the profile')
        with tarfile.open(self.spec['profile']) as tar:
            placed = kernel_profile.extract(tar, obj)
        self.note('profile: %d .gcda files placed in the object tree'
                  % placed)
        return placed

    def make(self, src, obj, stage):
        self.step('compiling')
        env = dict(os.environ)
        env['KBUILD_BUILD_VERSION'] = '%s-%s' % (
            self.spec['variant'], self.spec['build_id'][:12])
        env['KBUILD_BUILD_USER'] = 'ironic-bmc'
        env['KBUILD_BUILD_HOST'] = 'kernel-build'
        if self.spec['variant'] == PGO:
            env['KCFLAGS'] = PGO_KCFLAGS
        jobs = str(self.spec.get('jobs') or os.cpu_count() or 1)
        self.run('make', '-C', src, 'O=' + obj, '-j' + jobs, 'bzImage',
                 'modules', env=env)
        self.step('installing modules')
        self.run('make', '-C', src, 'O=' + obj, 'modules_install',
                 'INSTALL_MOD_PATH=' + stage, 'INSTALL_MOD_STRIP=1',
                 'DEPMOD=/bin/true', env=env)
        with open(os.path.join(obj, 'include', 'config',
                               'kernel.release')) as f:
            release = f.read().strip()
        os.makedirs(os.path.join(stage, 'boot'), exist_ok=True)
        shutil.copyfile(os.path.join(obj, 'arch', 'x86', 'boot', 'bzImage'),
                        os.path.join(stage, 'boot', 'vmlinuz-' + release))
        return release, env['KBUILD_BUILD_VERSION']

    def missing_profile_count(self):
        """Objects gcc compiled without profile data (from the log)."""
        count = 0
        with open(os.path.join(self.dir, LOG), 'rb') as f:
            for line in f:
                if _MISSING_PROFILE.search(line.decode('utf-8', 'replace')):
                    count += 1
        return count

    def publish(self, out):
        """Put the finished artifact where its status says it is."""
        target = os.path.join(self.dir, ARTIFACT)
        shutil.rmtree(target, ignore_errors=True)
        os.rename(out, target)

    def __call__(self):
        self.save()
        self.note('build %s (%s) queued' % (self.spec['build_id'],
                                            self.spec['variant']))
        slot = self.wait_for_slot()
        started = time.time()
        self.deadline = time.monotonic() + self.spec['timeout']
        self.save(state=BUILDING, started=started)
        obj = os.path.join(self.dir, 'obj')
        stage = os.path.join(self.dir, 'stage')
        out = os.path.join(self.dir, ARTIFACT + '.new')
        try:
            self.check_disk()
            src = self.source_tree()
            for path in (obj, stage, out):
                shutil.rmtree(path, ignore_errors=True)
            os.makedirs(obj)
            self.configure(src, obj)
            placed = (self.place_profile(obj)
                      if self.spec['variant'] == PGO else None)
            release, version = self.make(src, obj, stage)
            build = {'variant': self.spec['variant'],
                     'build_id': self.spec['build_id'],
                     'uname_v_prefix': '#' + version,
                     'source': os.path.basename(self.spec['source']),
                     'source_sha256': self.spec['source_sha256'],
                     'config_sha256': artifact.sha256_file(
                         os.path.join(self.dir, CONFIG)),
                     'fragments': [os.path.basename(p)
                                   for p in self.spec['fragments']]}
            if placed is not None:
                missing = self.missing_profile_count()
                build['profile'] = {
                    'sha256': self.spec['profile_sha256'],
                    'gcda_files': placed, 'objects_without_profile': missing,
                    'from_build': self.spec.get('profiled_build'),
                    'from_run': self.spec.get('profile_run'),
                    'kcflags': PGO_KCFLAGS}
                self.note('profile used: %d .gcda files; gcc compiled %d '
                          'objects without profile data' % (placed, missing))
            self.step('making the artifact')
            manifest = artifact.build(out, installed=release, root=stage)
            manifest['build'] = build
            with open(os.path.join(out, artifact.MANIFEST), 'w') as f:
                json.dump(manifest, f, indent=2, sort_keys=True)
                f.write('\n')
            self.publish(out)
        except (BuildError, artifact.ArtifactError, kernel_profile.
                ProfileError, OSError, KeyError, ValueError) as exc:
            self.note('FAILED: %s' % exc)
            self.save(state=FAILED, error=str(exc), ended=time.time(),
                      seconds=round(time.time() - started, 1))
            return 1
        finally:
            for path in (obj, stage):
                shutil.rmtree(path, ignore_errors=True)
            os.close(slot)
        seconds = round(time.time() - started, 1)
        self.note('succeeded in %.1f s: %s' % (seconds, release))
        self.save(state=SUCCEEDED, ended=time.time(), seconds=seconds,
                  step=None, manifest=manifest)
        return 0


def parse_config(text):
    """{CONFIG_X: value} of a .config or a fragment ("n" when unset)."""
    options = {}
    for line in text.splitlines():
        line = line.strip()
        match = _OPTION.match(line)
        if match:
            options[match.group(1)] = match.group(2)
            continue
        match = _UNSET.match(line)
        if match:
            options[match.group(1)] = 'n'
    return options


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.stderr.write('usage: python -m ironic_bmc.kernel.build '
                         'BUILD_DIR\n')
        return 2
    return _Build(argv[0])()


if __name__ == '__main__':
    sys.exit(main())
