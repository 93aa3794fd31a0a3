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

"""The cloud profile's virtualenv: OpenStack services from PyPI, pinned.

``ensure()`` returns the Python of a virtualenv holding exactly
lab/requirements-cloud.txt under lab/constraints-cloud.txt, building it
when the cache has none (a few minutes).  A virtualenv is named after a
sha256 of both files, so a change to either builds a new one.

Horizon's virtualenv also holds this repository's Horizon plugin and
what it draws with (``EDITABLE``: common/, client/, dashboard/),
installed editable from this checkout by the same pip run: its key also
covers the checkout's path and those distributions' setup.cfg and
requirements.txt (a new dependency or another checkout builds anew; a
change to their code needs nothing).

A half-built virtualenv is never used: each build goes to a directory of
its own, and only when pip has finished is ``<cache>/<key>`` pointed at it
(a symbolic link, replaced atomically).  The virtualenv itself never moves
because its scripts name their interpreter by absolute path.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bmc_lab import procs

DEFAULT_CACHE = '/var/tmp/bmc-cloud'
LAB_DIR = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
REQUIREMENTS = os.path.join(LAB_DIR, 'requirements-cloud.txt')
CONSTRAINTS = os.path.join(LAB_DIR, 'constraints-cloud.txt')
#: Virtualenvs: name -> (requirements, constraints).  Horizon has one of
#: its own: its Django and XStatic packages are not the services' concern.
SETS = {
    'cloud': (REQUIREMENTS, CONSTRAINTS),
    'horizon': (os.path.join(LAB_DIR, 'requirements-horizon.txt'),
                os.path.join(LAB_DIR, 'constraints-horizon.txt')),
    # tempest and ironic-tempest-plugin: a client of the cloud, never
    # beside the services it tests.
    'tempest': (os.path.join(LAB_DIR, 'requirements-tempest.txt'),
                os.path.join(LAB_DIR, 'constraints-tempest.txt')),
}
REPO_DIR = os.path.dirname(LAB_DIR)
#: Distributions of this repository installed editable into a set's
#: virtualenv, in this order: the runs API client and charts (with the
#: definitions they share) and the Horizon plugin.
EDITABLE = {'horizon': ('common', 'client', 'dashboard')}
#: Of an editable distribution, the files that make its key.
_EDITABLE_KEY_FILES = ('setup.cfg', 'requirements.txt')
#: What may not leak from the caller's environment into pip: tox sets
#: PIP_CONSTRAINT (another constraints file) and PIP_ONLY_BINARY (two of
#: the cloud's dependencies, ovs and simplegeneric, are sdists only).
_PIP_ENV_DROP = ('PIP_CONSTRAINT', 'PIP_REQUIREMENT', 'PIP_ONLY_BINARY',
                 'PIP_NO_BINARY', 'PIP_USER', 'PIP_TARGET', 'PIP_PREFIX',
                 'PIP_REQUIRE_VIRTUALENV', 'PYTHONPATH', 'PYTHONHOME',
                 'VIRTUAL_ENV')
BUILD_TIMEOUT = 1800


def default_cache():
    """$BMC_CLOUD_CACHE, else /var/tmp/bmc-cloud."""
    return os.environ.get('BMC_CLOUD_CACHE') or DEFAULT_CACHE


def pip_env():
    """The environment for pip: the caller's, without what must not leak
    into a virtualenv of the lab (see _PIP_ENV_DROP)."""
    env = {k: v for k, v in os.environ.items() if k not in _PIP_ENV_DROP}
    env['PIP_DISABLE_PIP_VERSION_CHECK'] = '1'
    return env


def key(name='cloud'):
    """Directory name of virtualenv ``name`` for its current
    requirements."""
    digest = hashlib.sha256()
    paths = list(SETS[name])
    if EDITABLE.get(name):
        digest.update(REPO_DIR.encode() + b'\0')
        paths += [os.path.join(d, f) for d in editable_dirs(name)
                  for f in _EDITABLE_KEY_FILES]
    for path in paths:
        if not os.path.exists(path):
            raise procs.LabError('%s is missing: the cloud profile runs '
                                 'from a source checkout of the lab (pip '
                                 'install -e lab)' % path)
        with open(path, 'rb') as f:
            digest.update(f.read())
        digest.update(b'\0')
    prefix = '' if name == 'cloud' else name + '-'
    return prefix + 'py%d.%d-%s' % (sys.version_info[:2]
                                    + (digest.hexdigest()[:16],))


def editable_dirs(name):
    """The directories of this checkout installed editable into
    virtualenv ``name``."""
    return [os.path.join(REPO_DIR, d) for d in EDITABLE.get(name, ())]


def pip_argv(python, name):
    """The pip command that fills virtualenv ``name``."""
    requirements, constraints = SETS[name]
    argv = [python, '-m', 'pip', 'install', '-c', constraints,
            '-r', requirements]
    for path in editable_dirs(name):
        argv += ['-e', path]
    return argv


def pip_log(cache=None, name='cloud'):
    """The log of the last build for the current requirements."""
    return os.path.join(cache or default_cache(), key(name) + '.pip.log')


def python_of(venv_dir):
    return os.path.join(venv_dir, 'bin', 'python')


def find(cache=None, name='cloud'):
    """The Python of a complete virtualenv for these requirements, or
    None (nothing is built)."""
    link = os.path.join(cache or default_cache(), key(name))
    python = python_of(link)
    if os.path.islink(link) and os.access(python, os.X_OK):
        return python
    return None


def ensure(cache_dir=None, out=None, name='cloud'):
    """Return the Python executable of virtualenv ``name`` (see SETS),
    building it first if the cache has none for its current requirements.

    ``out``: called with progress messages (a build takes minutes).
    """
    cache = os.path.abspath(cache_dir or default_cache())
    python = find(cache, name)
    if python:
        return python
    os.makedirs(cache, exist_ok=True)
    # Another build may be running.
    with procs.file_lock(os.path.join(cache, '.lock')):
        python = find(cache, name)
        if python:
            return python
        _remove_unfinished(cache)
        return _build(cache, out, name)


def _remove_unfinished(cache):
    """Builds that never completed (the lock is ours: none is running)."""
    linked = {os.path.realpath(os.path.join(cache, n))
              for n in os.listdir(cache)
              if os.path.islink(os.path.join(cache, n))}
    for name in os.listdir(cache):
        path = os.path.join(cache, name)
        if (name.startswith('build-') and os.path.isdir(path)
                and not os.path.islink(path)
                and os.path.realpath(path) not in linked):
            shutil.rmtree(path, ignore_errors=True)


def _build(cache, out, set_name):
    name = key(set_name)
    target = tempfile.mkdtemp(prefix='build-%s-' % name, dir=cache)
    os.chmod(target, 0o755)
    log_path = pip_log(cache, set_name)
    env = pip_env()
    if out:
        out('building the %s virtualenv in %s (a few minutes; pip log: '
            '%s)' % (set_name, target, log_path))
    started = time.monotonic()
    with open(log_path, 'w') as log:
        for step, argv in (
                ('python3 -m venv', [sys.executable, '-m', 'venv', target]),
                ('pip install', pip_argv(python_of(target), set_name))):
            log.write('$ %s\n' % ' '.join(argv))
            log.flush()
            try:
                res = subprocess.run(argv, stdout=log,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env,
                                     timeout=BUILD_TIMEOUT)
                code = res.returncode
            except subprocess.TimeoutExpired:
                code = 'timeout after %ds' % BUILD_TIMEOUT
            except OSError as exc:
                code = exc
            if code != 0:
                shutil.rmtree(target, ignore_errors=True)
                raise procs.LabError(
                    'building the %s virtualenv failed (%s: exit %s); '
                    'see %s' % (set_name, step, code, log_path))
    # Complete: publish it under its key (rename of a fresh link).
    link = os.path.join(cache, name)
    tmp_link = link + '.tmp'
    if os.path.lexists(tmp_link):
        os.unlink(tmp_link)
    os.symlink(os.path.basename(target), tmp_link)
    if os.path.isdir(link) and not os.path.islink(link):
        shutil.rmtree(link)
    os.replace(tmp_link, link)
    if out:
        out('%s virtualenv ready in %.0fs' % (set_name,
                                              time.monotonic() - started))
    return python_of(link)
