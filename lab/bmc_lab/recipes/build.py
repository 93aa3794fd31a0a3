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

"""Build a recipe's image from Debian 12 packages, cache it, push it, and
run its entrypoint on this machine.

The steps (root: debootstrap, chroot and mounts):

1. a Debian 12 ``minbase`` root (debootstrap, as ``tools/ci-root.sh``
   makes CI's root), with the mirror's ``bookworm``, ``-updates`` and
   ``-security`` suites, upgraded; shared by every recipe;
2. per recipe, a copy of it with the recipe's packages
   (``--no-install-recommends``), its setup, its entrypoint; no
   documentation, manual pages, locales, apt lists or logs;
3. that tree as a one-layer OCI image (:mod:`bmc_lab.ociimage`, as the
   demo image), every mtime clamped to :data:`EPOCH` and no device nodes,
   so the same tree always gives the same digest.

Packages are downloaded with the host's network, then installed in
private mount, PID and network namespaces (with ``policy-rc.d`` refusing
every start): a package's maintainer script cannot start a daemon that
outlives the step or listens on this machine's network.

The cache (``BMC_RECIPE_CACHE``, /var/tmp/bmc-recipes) keeps the base
root, each recipe's root and its image (an OCI image layout) under the
hash of their inputs: the suite, mirrors and build steps, the packages,
setup and entrypoint.  A build whose inputs did not change reuses them.
The packages are the mirror's of the day of the first build;
``/etc/bmc-recipe.json`` in the image lists their versions, and
``--rebuild`` builds afresh (newer packages, a new digest).
"""

import contextlib
import dataclasses
import glob
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time

from bmc_lab import ociimage
from bmc_lab import procs
from bmc_lab import recipes

#: Bump when the build steps change what a tree holds.
BUILDER_VERSION = 1
SUITE = 'bookworm'
DEFAULT_MIRROR = 'http://deb.debian.org/debian'
DEFAULT_SECURITY_MIRROR = 'http://deb.debian.org/debian-security'
DEFAULT_CACHE = '/var/tmp/bmc-recipes'
#: Every mtime in a layer is at most this (2024-01-01, the date
#: ociimage writes as the image's "created").
EPOCH = 1704067200
IMAGE_PATH = ('PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:'
              '/sbin:/bin')
DONE = '.done'
#: Within a layer: these directories are mount points, kept empty.
MOUNT_POINTS = ('dev', 'proc', 'sys')

#: dpkg leaves out what a container never reads (as Debian's "slim"
#: images do); copyright files stay.
DPKG_SLIM = """\
# bmc-recipe: no documentation, manual pages or translations.
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/lintian/*
"""
APT_CONF = """\
// bmc-recipe: what is asked for, nothing recommended or suggested.
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
"""
POLICY_RC_D = """\
#!/bin/sh
# bmc-recipe: package scripts start no services in this root.
exit 101
"""
HOSTS = """\
127.0.0.1\tlocalhost
::1\t\tlocalhost ip6-localhost ip6-loopback
"""
#: Run in the root, last: what a build leaves that an image does not need
#: or that differs from one build to the next.
CLEANUP = r"""
set -e
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old \
    /var/lib/dpkg/*-old /var/cache/ldconfig/aux-cache /root/.cache \
    /usr/share/man/* /usr/share/info/* /usr/share/lintian/* \
    /tmp/* /var/tmp/* /usr/sbin/policy-rc.d /etc/resolv.conf /etc/hostname
find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias \
    -exec rm -rf {} +
find /var/log -type f -delete
"""

#: The mounts of a chroot step or run, in new mount, PID (and network)
#: namespaces, outside the chroot: /proc, sysfs read-only, a /dev of the
#: usual nodes; then ``chroot ROOT env -i ARGS...``.
ENTER = r"""
set -e
root=$1 private_net=$2
shift 2
mount --make-rprivate /
if [ "$private_net" = 1 ]; then
    ip link set lo up
    hostname bmc-workload
fi
mount -t proc proc "$root/proc"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
mount -t tmpfs -o mode=0755,nosuid dev "$root/dev"
for d in null zero full random urandom tty; do
    : >"$root/dev/$d"
    mount --bind "/dev/$d" "$root/dev/$d"
done
mkdir "$root/dev/shm" "$root/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
cd /
exec chroot "$root" /usr/bin/env -i "$@"
"""
#: The same over a throw-away overlay of ROOT (a run leaves the cached
#: root as it was): ``sh -c OVERLAY _ ROOT WORK PRIVATE ARGS...``.
OVERLAY = r"""
set -e
lower=$1 work=$2
shift 2
mount --make-rprivate /
mount -t tmpfs -o mode=0755 bmc-recipe-run "$work"
mkdir "$work/upper" "$work/work" "$work/root"
mount -t overlay overlay \
    -o "lowerdir=$lower,upperdir=$work/upper,workdir=$work/work" "$work/root"
exec sh -c "$ENTER" enter "$work/root" "$@"
"""
#: The environment of a build step in a root (SOURCE_DATE_EPOCH: the
#: date useradd writes into /etc/shadow, and other dates, are EPOCH's).
STEP_ENV = ('PATH=/usr/sbin:/usr/bin:/sbin:/bin', 'HOME=/root', 'LC_ALL=C',
            'DEBIAN_FRONTEND=noninteractive',
            'SOURCE_DATE_EPOCH=%d' % EPOCH)


def cache_dir():
    return os.environ.get('BMC_RECIPE_CACHE') or DEFAULT_CACHE


# --- mirrors and inputs ----------------------------------------------------

def _deb822(text):
    """Paragraphs of a deb822 sources file as dicts of field -> value."""
    out, cur, last = [], {}, None
    for line in text.splitlines():
        if line.startswith('#'):
            continue
        if not line.strip():
            if cur:
                out.append(cur)
            cur, last = {}, None
        elif line[0] in ' \t' and last:
            cur[last] += ' ' + line.strip()
        elif ':' in line:
            last, _, value = line.partition(':')
            last = last.strip().lower()
            cur[last] = value.strip()
    if cur:
        out.append(cur)
    return out


def host_mirrors(apt_dir='/etc/apt'):
    """(mirror, security mirror) of this machine's apt sources for
    bookworm (None where it has none)."""
    entries = []  # (uri, suite)
    for path in sorted(glob.glob(os.path.join(apt_dir, 'sources.list.d',
                                              '*.sources'))):
        with contextlib.suppress(OSError), open(path) as f:
            for para in _deb822(f.read()):
                if para.get('enabled', 'yes').lower() == 'no' or (
                        'deb' not in para.get('types', '').split()):
                    continue
                for uri in para.get('uris', '').split():
                    entries += [(uri, s) for s in
                                para.get('suites', '').split()]
    lists = [os.path.join(apt_dir, 'sources.list')] + sorted(glob.glob(
        os.path.join(apt_dir, 'sources.list.d', '*.list')))
    for path in lists:
        with contextlib.suppress(OSError), open(path) as f:
            for line in f:
                words = line.split('#', 1)[0].split()
                if len(words) < 3 or words[0] != 'deb':
                    continue
                words = [w for w in words[1:] if not w.startswith('[')
                         and not w.endswith(']')]
                if len(words) >= 2:
                    entries.append((words[0], words[1]))
    mirror = next((u for u, s in entries if s == SUITE), None)
    security = next((u for u, s in entries if s == SUITE + '-security'),
                    None)
    return mirror, security


def mirrors(env=None, apt_dir='/etc/apt'):
    """The mirrors to build from: BMC_RECIPE_MIRROR and
    BMC_RECIPE_SECURITY_MIRROR, else this machine's, else Debian's."""
    env = os.environ if env is None else env
    host, host_security = host_mirrors(apt_dir)
    return ((env.get('BMC_RECIPE_MIRROR') or host or DEFAULT_MIRROR)
            .rstrip('/'),
            (env.get('BMC_RECIPE_SECURITY_MIRROR') or host_security
             or DEFAULT_SECURITY_MIRROR).rstrip('/'))


def sources(mirror, security):
    """/etc/apt/sources.list.d/debian.sources of the roots."""
    keyring = '/usr/share/keyrings/debian-archive-keyring.gpg'
    return ('Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main'
            '\nSigned-By: %s\n\nTypes: deb\nURIs: %s\nSuites: %s-security\n'
            'Components: main\nSigned-By: %s\n'
            % (mirror, SUITE, SUITE, keyring, security, SUITE, keyring))


def _digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()
                          ).hexdigest()


def base_inputs(mirror, security):
    return {'builder': BUILDER_VERSION, 'suite': SUITE,
            'variant': 'minbase', 'sources': sources(mirror, security),
            'dpkg': DPKG_SLIM, 'apt': APT_CONF, 'env': list(STEP_ENV)}


def recipe_inputs(recipe, base_key):
    """What a recipe's tree and image are made of."""
    return {'builder': BUILDER_VERSION, 'base': base_key,
            'packages': sorted(recipe.packages), 'setup': recipe.setup,
            'files': {path: hashlib.sha256(data).hexdigest()
                      for path, data in sorted(recipe.files().items())},
            'command': recipe.command, 'env': list(recipe.env),
            'cleanup': CLEANUP, 'epoch': EPOCH, 'hosts': HOSTS}


# --- the layer -------------------------------------------------------------

def layer_entries(tree):
    """The tree as layer entries: mount points empty, no device nodes,
    every mtime at most EPOCH."""
    out = []
    for entry in ociimage.entries_from_dir(tree):
        top, _, rest = entry.name.partition('/')
        if top in MOUNT_POINTS and rest:
            continue
        if entry.kind in ('chr', 'blk', 'fifo'):
            continue
        out.append(dataclasses.replace(entry,
                                       mtime=min(entry.mtime, EPOCH)))
    return out


def image_of(recipe, tree):
    return ociimage.build_image(
        [layer_entries(tree)], entrypoint=[recipe.command],
        env=[IMAGE_PATH] + list(recipe.env), workdir='/')


def write_layout(image, path, tag):
    """``image`` as an OCI image layout in directory ``path``."""
    blobs = os.path.join(path, 'blobs', 'sha256')
    os.makedirs(blobs, exist_ok=True)
    for digest, data in list(image.blobs.items()) + [
            (image.digest, image.manifest)]:
        with open(os.path.join(blobs, digest.split(':', 1)[1]), 'wb') as f:
            f.write(data)
    with open(os.path.join(path, 'oci-layout'), 'w') as f:
        json.dump({'imageLayoutVersion': '1.0.0'}, f)
    index = {'schemaVersion': 2, 'mediaType': ociimage.MEDIA_INDEX,
             'manifests': [{'mediaType': ociimage.MEDIA_MANIFEST,
                            'digest': image.digest,
                            'size': len(image.manifest),
                            'annotations': {
                                'org.opencontainers.image.ref.name': tag}}]}
    with open(os.path.join(path, 'index.json'), 'w') as f:
        json.dump(index, f, sort_keys=True)


def read_layout(path):
    """The image of an OCI image layout written by :func:`write_layout`."""
    def blob(digest):
        with open(os.path.join(path, 'blobs', 'sha256',
                               digest.split(':', 1)[1]), 'rb') as f:
            data = f.read()
        if ociimage.digest_of(data) != digest:
            raise recipes.RecipeError('%s: blob %s is corrupt; rebuild with '
                                      '--rebuild' % (path, digest))
        return data
    with open(os.path.join(path, 'index.json')) as f:
        desc = json.load(f)['manifests'][0]
    manifest = blob(desc['digest'])
    doc = json.loads(manifest)
    blobs = {doc['config']['digest']: blob(doc['config']['digest'])}
    for layer in doc['layers']:
        blobs[layer['digest']] = blob(layer['digest'])
    config = json.loads(blobs[doc['config']['digest']])
    return ociimage.Image(manifest=manifest, blobs=blobs, config=config)


# --- running in a root -----------------------------------------------------

def enter_argv(root, args, private_net=True, env=STEP_ENV, overlay=None):
    """``unshare`` argv running ``args`` in ``root`` (see ENTER); with
    ``overlay`` (a scratch directory), over a throw-away overlay of it."""
    ns = ['unshare', '--mount', '--pid', '--fork', '--kill-child',
          '--propagation', 'private']
    if private_net:
        ns += ['--net', '--uts']
    flag = '1' if private_net else '0'
    if overlay:
        return ns + ['--', 'env', 'ENTER=' + ENTER, 'sh', '-c', OVERLAY,
                     'overlay', root, overlay, flag] + list(env) + list(args)
    return ns + ['--', 'sh', '-c', ENTER, 'enter', root, flag] + list(
        env) + list(args)


@dataclasses.dataclass
class Build:
    """What :meth:`Builder.build` made or found."""
    recipe: str
    key: str
    path: str
    image: ociimage.Image
    info: dict
    cached: bool

    @property
    def tag(self):
        return self.key[:12]

    @property
    def rootfs(self):
        return os.path.join(self.path, 'rootfs')


class Builder:
    """Builds and caches recipe images under ``cache``."""

    def __init__(self, cache=None, out=print, mirror=None, security=None):
        self.cache = os.path.abspath(cache or cache_dir())
        self.out = out
        found = mirrors()
        self.mirror = mirror or found[0]
        self.security = security or found[1]

    @property
    def base_key(self):
        return _digest(base_inputs(self.mirror, self.security))

    def key(self, recipe):
        return _digest(recipe_inputs(recipe, self.base_key))

    def path(self, recipe):
        return os.path.join(self.cache, '%s-%s' % (recipe.name,
                                                   self.key(recipe)[:16]))

    def log(self, name):
        return os.path.join(self.cache, 'logs', '%s.log' % name)

    def cached(self, recipe):
        """The build of ``recipe`` if its inputs did not change, or None
        (no root needed)."""
        path = self.path(recipe)
        if not os.path.exists(os.path.join(path, DONE)):
            return None
        with open(os.path.join(path, 'build.json')) as f:
            info = json.load(f)
        return Build(recipe.name, self.key(recipe), path,
                     read_layout(os.path.join(path, 'oci')), info, True)

    def build(self, recipe, rebuild=False):
        """The recipe's image, built unless cached with the same inputs
        (``rebuild``: build the base root and the recipe afresh)."""
        if not rebuild:
            found = self.cached(recipe)
            if found:
                return found
        if os.geteuid() != 0:
            raise recipes.RecipeError(
                'building the %s image needs root (debootstrap, chroot, '
                'mounts)' % recipe.name)
        os.makedirs(self.cache, exist_ok=True)
        with procs.file_lock(os.path.join(self.cache, '.lock'), self.out,
                             'Another build uses %s; waiting for it ...'
                             % self.cache):
            if not rebuild:
                found = self.cached(recipe)
                if found:
                    return found
            return self._build(recipe, rebuild)

    # -- the steps --

    def _run(self, argv, what, name, timeout=1800):
        procs.run_long(argv, what, self.log(name), out=self.out,
                       timeout=timeout)

    def _in_root(self, root, script, name, what, private_net=True):
        self._run(enter_argv(root, ['/bin/sh', '-c', script],
                             private_net=private_net), what, name)

    def _apt(self, root, args, name, what):
        """apt-get ARGS: the packages downloaded with the network, then
        installed without it."""
        words = ' '.join(args)
        shutil.copyfile('/etc/resolv.conf',
                        os.path.join(root, 'etc', 'resolv.conf'))
        self._in_root(root, 'set -e; apt-get -q update; apt-get -y -q '
                      '--download-only %s' % words, name,
                      what + ' (download)', private_net=False)
        self._in_root(root, 'set -e; apt-get -y -q %s' % words, name,
                      what + ' (install)')

    def base(self, rebuild=False):
        """The shared Debian 12 minbase root (built if need be)."""
        key = self.base_key
        path = os.path.join(self.cache, 'base-%s' % key[:16])
        root = os.path.join(path, 'rootfs')
        if os.path.exists(os.path.join(path, DONE)) and not rebuild:
            return root, 0.0
        start = time.monotonic()
        tmp = path + '.tmp'
        _remove(tmp)
        os.makedirs(tmp)
        self.out('Building the Debian %s base root from %s (debootstrap '
                 'minbase) ...' % (SUITE, self.mirror))
        debs = os.path.join(self.cache, 'debs')
        os.makedirs(debs, exist_ok=True)
        tmp_root = os.path.join(tmp, 'rootfs')
        self._run(['debootstrap', '--variant=minbase', '--cache-dir=' + debs,
                   SUITE, tmp_root, self.mirror], 'debootstrap', 'base')
        _write(tmp_root, '/etc/apt/sources.list.d/debian.sources',
               sources(self.mirror, self.security))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(tmp_root, 'etc', 'apt', 'sources.list'))
        _write(tmp_root, '/etc/dpkg/dpkg.cfg.d/90bmc-recipe-slim', DPKG_SLIM)
        _write(tmp_root, '/etc/apt/apt.conf.d/90bmc-recipe', APT_CONF)
        _write(tmp_root, '/usr/sbin/policy-rc.d', POLICY_RC_D, 0o755)
        self._apt(tmp_root, ['upgrade'], 'base', 'apt-get upgrade')
        self._in_root(tmp_root, CLEANUP, 'base', 'cleanup')
        # (The cleanup is also the recipes' last step: policy-rc.d stays
        # in the base root until then.)
        _write(tmp_root, '/usr/sbin/policy-rc.d', POLICY_RC_D, 0o755)
        with open(os.path.join(tmp, 'inputs.json'), 'w') as f:
            json.dump(base_inputs(self.mirror, self.security), f, indent=1,
                      sort_keys=True)
        open(os.path.join(tmp, DONE), 'w').close()
        _remove(path)
        os.rename(tmp, path)
        self._prune('base-', path)
        seconds = time.monotonic() - start
        self.out('Base root ready in %.0f s: %s' % (seconds, root))
        return root, seconds

    def _build(self, recipe, rebuild):
        started = time.monotonic()
        base, base_s = self.base(rebuild)
        key = self.key(recipe)
        path = self.path(recipe)
        tmp = path + '.tmp'
        _remove(tmp)
        os.makedirs(tmp)
        root = os.path.join(tmp, 'rootfs')
        self.out('Building the %s image: %s ...'
                 % (recipe.name, ' '.join(recipe.packages)))
        t0 = time.monotonic()
        self._run(['cp', '-a', '--reflink=auto', base, root], 'copy of the '
                  'base root', recipe.name)
        self._apt(root, ['install'] + sorted(recipe.packages), recipe.name,
                  'apt-get install')
        for target, data in recipe.files().items():
            _write(root, target, data,
                   0o755 if data.startswith(b'#!') else 0o644)
        if recipe.setup:
            self._in_root(root, 'set -e\n' + recipe.setup, recipe.name,
                          'the recipe\'s setup')
        versions = subprocess.run(
            ['chroot', root, 'dpkg-query', '-W', '-f',
             '${Package}=${Version}\\n'], capture_output=True, text=True,
            check=True).stdout.split()
        _write(root, '/etc/bmc-recipe.json', json.dumps(
            {'recipe': recipe.name, 'inputs': key, 'suite': SUITE,
             'packages': sorted(versions)}, indent=1, sort_keys=True) + '\n')
        self._in_root(root, CLEANUP, recipe.name, 'cleanup')
        _write(root, '/etc/hosts', HOSTS)
        packages_s = time.monotonic() - t0
        t0 = time.monotonic()
        image = image_of(recipe, root)
        write_layout(image, os.path.join(tmp, 'oci'), key[:12])
        image_s = time.monotonic() - t0
        layers = image.manifest_json['layers']
        info = {'recipe': recipe.name, 'inputs': key, 'tag': key[:12],
                'digest': image.digest,
                'layer_bytes': sum(d['size'] for d in layers),
                'rootfs_bytes': _tree_bytes(root),
                'packages': len(versions),
                'seconds': {'base': round(base_s, 1),
                            'packages': round(packages_s, 1),
                            'image': round(image_s, 1),
                            'total': round(time.monotonic() - started, 1)},
                'built': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
                'mirror': self.mirror}
        with open(os.path.join(tmp, 'build.json'), 'w') as f:
            json.dump(info, f, indent=1, sort_keys=True)
        with open(os.path.join(tmp, 'inputs.json'), 'w') as f:
            json.dump(recipe_inputs(recipe, self.base_key), f, indent=1,
                      sort_keys=True)
        open(os.path.join(tmp, DONE), 'w').close()
        _remove(path)
        os.rename(tmp, path)
        self._prune(recipe.name + '-', path)
        self.out('%s image %s built in %.0f s (root %.0f MB, layer %.0f MB)'
                 % (recipe.name, image.digest[:19], info['seconds']['total'],
                    info['rootfs_bytes'] / 1e6, info['layer_bytes'] / 1e6))
        return Build(recipe.name, key, path, image, info, False)

    def _prune(self, prefix, keep):
        """Remove the other builds of the same kind (older inputs)."""
        for other in glob.glob(os.path.join(self.cache, prefix + '*')):
            name = os.path.basename(other)
            rest = name[len(prefix):]
            if other != keep and len(rest.split('.')[0]) == 16 and (
                    '-' not in rest):
                _remove(other)


def push(build, registry, pusher=None):
    """Push a build as ``bmc/recipe-NAME`` under its tag and ``latest``;
    the reference pinned by digest."""
    repo = recipes.get(build.recipe).repo
    pusher = pusher or ociimage.Pusher(registry)
    try:
        for tag in (build.tag, 'latest'):
            pusher.push_image(repo, tag, build.image)
    except (OSError, RuntimeError) as exc:
        raise recipes.RecipeError('cannot push %s to %s: %s'
                                  % (repo, registry, exc)) from exc
    return '%s/%s@%s' % (registry, repo, build.image.digest)


def run(build, size=None, env=(), timeout=600, rootfs=None):
    """Run the image's entrypoint on this machine, in its root (a
    throw-away overlay of it) in new mount, PID, UTS and network
    namespaces (only a loopback), as the node runs it: the image's Env,
    then ``env``, then BMC_SWEEP_SIZE.  ``rootfs``: another tree of the
    image (e.g. the conductor's artifact, extracted) instead of the
    build's.  (exit status, stdout, stderr)."""
    recipe = recipes.get(build.recipe)
    if os.geteuid() != 0:
        raise recipes.RecipeError('running the %s entrypoint here needs root '
                                  '(namespaces, mounts, chroot)'
                                  % recipe.name)
    cfg = build.image.config['config']
    full = list(cfg.get('Env') or []) + ['HOSTNAME=bmc-workload'] + list(
        env)
    if size is not None:
        full.append('%s=%s' % (recipes.SIZE_ENV, size))
    args = list(cfg.get('Entrypoint') or []) + list(cfg.get('Cmd') or [])
    if args[:1] != [recipe.command]:
        raise recipes.RecipeError('the image runs %s, not %s'
                                  % (args, recipe.command))
    with tempfile.TemporaryDirectory(prefix='bmc-recipe-run-') as scratch:
        argv = enter_argv(rootfs or build.rootfs, args, env=full,
                          overlay=scratch)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise recipes.RecipeError('%s did not end within %d s'
                                      % (recipe.command, timeout)) from exc
    return proc.returncode, proc.stdout, proc.stderr


def final_json(output):
    """The last line of ``output`` if it is a JSON object, else None."""
    lines = [line for line in (output or '').splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = json.loads(lines[-1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _write(root, path, data, mode=0o644):
    dest = os.path.join(root, path.lstrip('/'))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if os.path.islink(dest):
        os.unlink(dest)
    with open(dest, 'wb' if isinstance(data, bytes) else 'w') as f:
        f.write(data)
    os.chmod(dest, mode)


def _remove(path):
    if os.path.lexists(path):
        subprocess.run(['rm', '-rf', '--one-file-system', path], check=True)


def _tree_bytes(root):
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total
