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

"""Kernel builds of this conductor: start one, say where it is.

A build is named by the digest of everything it is made from (the
source tarball's sha256, the config fragments' text, the variant, the
profile's sha256): asking again for the same build returns the running
or finished one, so a second PGO loop of the same image and profile
boots the cached kernel.  Each build runs as its own process
(:mod:`ironic_bmc.kernel.build`) outside any node lock; at most
``[container]kernel_build_workers`` compile at once, the others queue.

Layout of ``[container]kernel_build_dir``::

    sources/<sha256>/          an unpacked source tarball
    builds/<build id>/         spec.json, status.json, build.log, config
    slots/<n>.lock             the build slots

A build's artifact (``vmlinuz``, ``modules.cpio.gz``, ``manifest.json``)
is in ``builds/<build id>/artifact/``.  Its status names the files with
``file://`` URLs, for ``instance_info/kernel`` and ``kernel_modules``:
Ironic caches them into the node's HTTP directory at each deploy, as it
does every boot file, so they need no HTTP server of their own, and a
deploy validates them without a request.  They are this conductor's
files: a build is made on the conductor of the node that asks for it.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading

from ironic.common import exception
from ironic.common.i18n import _
from oslo_log import log

from ironic_bmc.conf import CONF
from ironic_bmc.kernel import artifact
from ironic_bmc.kernel import build as worker

LOG = log.getLogger(__name__)

#: Bump when a change of the worker changes what a build produces.
BUILD_FORMAT = 1
#: The config fragments that ship with this package.
PACKAGE_CONFIGS = os.path.join(os.path.dirname(__file__), 'configs')
DEFAULT_CONFIG = 'bmc-node'
#: The fragment a gcov build adds.
GCOV_FRAGMENT = 'gcov'
ID_LENGTH = 24

_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$')
_ID = re.compile(r'^[0-9a-f]{%d}$' % ID_LENGTH)
_procs = {}
_lock = threading.Lock()


def _root(*parts):
    return os.path.join(CONF.container.kernel_build_dir, *parts)


def artifact_dir(build_id):
    """Where the artifact of a build is."""
    return _root('builds', build_id, worker.ARTIFACT)


def _invalid(field, reason):
    return exception.InvalidParameterValue(
        _('kernel build %(field)s: %(reason)s')
        % {'field': field, 'reason': reason})


def resolve_source(name=None):
    """The path of a source tarball in ``[container]kernel_source_dirs``.

    :param name: its file name; None for the only ``linux-source-*``
        tarball there (e.g. Debian's ``linux-source-6.1``).
    :raises: InvalidParameterValue naming what was looked for.
    """
    dirs = CONF.container.kernel_source_dirs
    if name is not None:
        if not _NAME.match(str(name)):
            raise _invalid('source', _('%r is not a file name (no '
                                       'directories: the tarball is looked '
                                       'up in [container]kernel_source_dirs)'
                                       ) % (name,))
        for directory in dirs:
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                return path
        raise _invalid('source', _('no %(name)s in %(dirs)s')
                       % {'name': name, 'dirs': ', '.join(dirs)})
    found = sorted(
        os.path.join(d, n) for d in dirs if os.path.isdir(d)
        for n in os.listdir(d)
        if n.startswith('linux-source-') and '.tar' in n)
    if len(found) != 1:
        raise _invalid('source', _(
            'name the source tarball: %(count)d linux-source-* tarballs in '
            '%(dirs)s (%(found)s); on Debian, "apt install linux-source-6.1" '
            'puts one in /usr/src') % {
                'count': len(found), 'dirs': ', '.join(dirs),
                'found': ', '.join(os.path.basename(f) for f in found)
                or _('none')})
    return found[0]


def resolve_config(name):
    """The path of config fragment ``name`` (``<name>.config``)."""
    if not _NAME.match(str(name)):
        raise _invalid('config', _('%r is not the name of a config '
                                   'fragment') % (name,))
    dirs = list(CONF.container.kernel_config_dirs) + [PACKAGE_CONFIGS]
    for directory in dirs:
        path = os.path.join(directory, name + '.config')
        if os.path.isfile(path):
            return path
    raise _invalid('config', _('no %(name)s.config in %(dirs)s')
                   % {'name': name, 'dirs': ', '.join(dirs)})


def _source_sha256(path):
    """The tarball's sha256, remembered by (path, size, mtime)."""
    st = os.stat(path)
    index_path = _root('sources', 'index.json')
    key = '%s:%d:%d' % (path, st.st_size, st.st_mtime_ns)
    try:
        with open(index_path) as f:
            index = json.load(f)
    except (OSError, ValueError):
        index = {}
    if key not in index:
        index[key] = artifact.sha256_file(path)
        os.makedirs(os.path.dirname(index_path), exist_ok=True)
        tmp = index_path + '.%d.tmp' % os.getpid()
        with open(tmp, 'w') as f:
            json.dump(index, f)
        os.replace(tmp, index_path)
    return index[key]


def check_deployable():
    """A build's files must be usable as ``file://`` boot files.

    :raises: InvalidParameterValue naming the options to change.
    """
    root = os.path.realpath(CONF.container.kernel_build_dir)
    allowed = [os.path.realpath(p)
               for p in CONF.conductor.file_url_allowed_paths if p]
    if not any(root == a or root.startswith(a.rstrip('/') + '/')
               for a in allowed):
        raise exception.InvalidParameterValue(_(
            'kernel builds: [container]kernel_build_dir (%(dir)s) is not '
            'under [conductor]file_url_allowed_paths (%(allowed)s), so a '
            'deploy could not boot what it builds; put it under one of '
            'them, or add it there') % {
                'dir': CONF.container.kernel_build_dir,
                'allowed': ', '.join(allowed) or _('none: file:// URLs '
                                                   'are disabled')})


def plan(variant, source=None, config=DEFAULT_CONFIG, profile=None):
    """The spec of a build (not started).

    :param variant: plain, gcov or pgo.
    :param profile: for pgo, ``{"path", "sha256", "build": the gcov
        build it was counted on}``; the source and config are that
        build's.
    :raises: InvalidParameterValue naming the field.
    """
    check_deployable()
    if variant not in worker.VARIANTS:
        raise _invalid('variant', _('%(v)r is not one of %(known)s') % {
            'v': variant, 'known': ', '.join(worker.VARIANTS)})
    if (variant == worker.PGO) != (profile is not None):
        raise _invalid('profile_run', _(
            'a pgo build needs the run that profiled the kernel, and only '
            'a pgo build takes one'))
    if variant == worker.PGO:
        profiled = load(profile['build'])
        if profiled is None or profiled['spec']['variant'] != worker.GCOV:
            raise _invalid('profile_run', _(
                'the profile was counted on kernel build %s, which this '
                'conductor does not have (or which is not a gcov build)')
            % profile['build'])
        source_path = profiled['spec']['source']
        fragments = [f for f in profiled['spec']['fragments']
                     if os.path.basename(f) != GCOV_FRAGMENT + '.config']
    else:
        source_path = resolve_source(source)
        fragments = [resolve_config(config)]
        if variant == worker.GCOV:
            fragments.append(resolve_config(GCOV_FRAGMENT))
    digest = hashlib.sha256()
    source_sha = _source_sha256(source_path)
    parts = {'format': BUILD_FORMAT, 'source': source_sha,
             'variant': variant,
             'profile': profile['sha256'] if profile else None,
             'fragments': []}
    for path in fragments:
        with open(path, 'rb') as f:
            parts['fragments'].append(hashlib.sha256(f.read()).hexdigest())
    if variant == worker.PGO:
        counted = [sha for path, sha in zip(
            profiled['spec']['fragments'],
            profiled['spec'].get('fragment_sha256') or (), strict=False)
            if os.path.basename(path) != GCOV_FRAGMENT + '.config']
        if counted != parts['fragments']:
            raise _invalid('profile_run', _(
                'the config fragments changed since gcov build %s counted '
                'the profile: the profile fits the old config only; build '
                'the gcov kernel again and profile again')
                % profile['build'])
    digest.update(json.dumps(parts, sort_keys=True).encode())
    build_id = digest.hexdigest()[:ID_LENGTH]
    spec = {
        'build_id': build_id, 'variant': variant,
        'source': source_path, 'source_sha256': source_sha,
        'fragments': fragments, 'fragment_sha256': parts['fragments'],
        'sources': _root('sources'), 'slots': _root('slots'),
        'workers': CONF.container.kernel_build_workers,
        'jobs': CONF.container.kernel_build_jobs,
        'timeout': CONF.container.kernel_build_timeout,
        'min_free_bytes': CONF.container.kernel_build_min_free_gb * 2 ** 30,
    }
    if profile:
        spec.update(profile=profile['path'], profile_sha256=profile['sha256'],
                    profiled_build=profile['build'],
                    profile_run=profile.get('run'))
    return spec


def start(spec):
    """Start the build of ``spec``, or return the one already made or
    under way (the same digest); its :func:`status`."""
    build_id = spec['build_id']
    directory = _root('builds', build_id)
    with _lock:
        current = status(build_id)
        if current and current['state'] in (worker.QUEUED, worker.BUILDING,
                                             worker.SUCCEEDED):
            return dict(current, cached=current['state'] == worker.SUCCEEDED)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        with open(os.path.join(directory, worker.SPEC), 'w') as f:
            json.dump(spec, f, indent=1, sort_keys=True)
        with open(os.path.join(directory, worker.STATUS), 'w') as f:
            json.dump({'build_id': build_id, 'state': worker.QUEUED,
                       'variant': spec['variant']}, f)
        log_file = open(os.path.join(directory, worker.LOG), 'ab')
        try:
            # argv list, no shell: this package's own worker.
            proc = subprocess.Popen(  # noqa: S603
                [sys.executable, '-m', 'ironic_bmc.kernel.build', directory],
                stdin=subprocess.DEVNULL, stdout=log_file,
                stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log_file.close()
        _procs[build_id] = proc
        # Reap it when it ends (no zombie in the conductor).
        threading.Thread(target=proc.wait, daemon=True,
                         name='bmc-kernel-build-%s' % build_id[:8]).start()
    LOG.info('Kernel build %(id)s (%(variant)s) started: %(dir)s',
             {'id': build_id, 'variant': spec['variant'], 'dir': directory})
    return dict(status(build_id), cached=False)


def _alive(build_id, pid):
    proc = _procs.get(build_id)
    if proc is not None:
        return proc.poll() is None
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load(build_id):
    """``{"spec", "status"}`` of a build, or None."""
    if not _ID.match(str(build_id)):
        return None
    directory = _root('builds', build_id)
    try:
        with open(os.path.join(directory, worker.SPEC)) as f:
            spec = json.load(f)
        with open(os.path.join(directory, worker.STATUS)) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    return {'spec': spec, 'status': state}


def status(build_id):
    """What a build is doing or made, with the URLs of its artifact once
    it succeeded; None if this conductor has no such build."""
    found = load(build_id)
    if found is None:
        return None
    state = found['status']
    spec = found['spec']
    if (state['state'] in (worker.QUEUED, worker.BUILDING)
            and not _alive(build_id, state.get('pid'))):
        state = dict(state, state=worker.FAILED, error=_(
            'the build process ended without a result (was the '
            'conductor host restarted?); start the build again'))
    if state['state'] == worker.SUCCEEDED and not os.path.isfile(
            os.path.join(artifact_dir(build_id), artifact.VMLINUZ)):
        state = dict(state, state=worker.FAILED, error=_(
            'the artifact is gone from %s; start the build again')
            % artifact_dir(build_id))
    result = {'build_id': build_id, 'variant': spec['variant'],
              'state': state['state'],
              'source': os.path.basename(spec['source']),
              'config': [os.path.basename(p) for p in spec['fragments']],
              'log': os.path.join(_root('builds', build_id), worker.LOG)}
    for key in ('step', 'error', 'seconds', 'started', 'ended'):
        if state.get(key) is not None:
            result[key] = state[key]
    if state['state'] == worker.SUCCEEDED:
        base = 'file://' + artifact_dir(build_id)
        manifest = state.get('manifest') or {}
        result.update(kernel=base + '/' + artifact.VMLINUZ,
                      kernel_modules=base + '/' + artifact.MODULES_CPIO,
                      release=manifest.get('version'),
                      build=manifest.get('build'))
    return result


def log_tail(build_id, max_bytes=4096):
    """The end of a build's log (text)."""
    path = _root('builds', build_id, worker.LOG)
    try:
        with open(path, 'rb') as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - max_bytes))
            return f.read().decode('utf-8', 'replace')
    except OSError:
        return ''
