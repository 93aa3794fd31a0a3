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

"""Turn a Linux kernel into a Bare-Metal Container kernel artifact.

From a Debian ``linux-image-*.deb`` or an installed kernel
(``/boot/vmlinuz-V`` + ``/lib/modules/V``) this writes into an output
directory:

* ``vmlinuz`` - the kernel image;
* ``modules.cpio.gz`` - a gzip'ed newc cpio holding ``lib/modules/V`` with
  ``modules.dep`` & co. from ``depmod``: the extra initrd that follows any
  protocol-conforming initrd (Linux unpacks concatenated initrds in order),
  so that one agent ramdisk serves many kernels.  That initrd must have a
  ``/lib/modules`` directory (see ``write_cpio``);
* ``manifest.json`` - version, sizes and sha256 of both.

``--modules`` restricts the modules to the named ones plus what they
depend on (much smaller); the default keeps them all.

Usage::

    python -m ironic_bmc.kernel.artifact --deb linux-image-....deb --out DIR
    python -m ironic_bmc.kernel.artifact --installed 6.1.0-56-amd64 \\
        --out DIR --modules agent

Standard library only; calls ``dpkg-deb`` (for ``--deb``) and ``depmod``.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

VMLINUZ = 'vmlinuz'
MODULES_CPIO = 'modules.cpio.gz'
MANIFEST = 'manifest.json'
MANIFEST_VERSION = 1

#: What the agent ramdisk needs in the lab and on common servers: NICs,
#: disks it may meet, and the filesystems the rootfs is staged with.
AGENT_MODULES = (
    'virtio_pci', 'virtio_net', 'virtio_blk', 'virtio_scsi', 'virtio_rng',
    'e1000', 'e1000e', 'igb', 'ixgbe', 'i40e', 'ice', 'bnxt_en', 'tg3',
    'mlx5_core', 'ahci', 'nvme', 'sd_mod', 'sr_mod',
    'loop', 'erofs', 'squashfs', 'overlay', 'nbd', 'brd', 'zram',
    'nfs', 'nfsv4', 'dm_verity', 'vfat', 'isofs', 'ipmi_si',
    'ipmi_devintf',
    'intel_rapl_msr', 'intel_rapl_common', 'msr',
)
PRESETS = {'agent': AGENT_MODULES}

# depmod's inputs besides the .ko files; its outputs are regenerated.
_DEPMOD_INPUTS = ('modules.builtin', 'modules.builtin.modinfo',
                  'modules.order')
_KO_SUFFIXES = ('.ko', '.ko.xz', '.ko.zst', '.ko.gz')


class ArtifactError(Exception):
    """The kernel artifact could not be made; the message says why."""


def _run(*cmd):
    try:
        # argv list, no shell: dpkg-deb/cpio on the cache's paths.
        proc = subprocess.run(cmd, capture_output=True, text=True,  # noqa: S603
                              check=False)
    except OSError as exc:
        raise ArtifactError('cannot run %s: %s' % (cmd[0], exc)) from exc
    if proc.returncode != 0:
        raise ArtifactError('%s failed (exit %d): %s' % (
            ' '.join(cmd), proc.returncode, proc.stderr.strip()[-500:]))
    return proc.stdout


def sha256_file(path):
    hasher = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1024 * 1024), b''):
            hasher.update(chunk)
    return hasher.hexdigest()


def module_name(path):
    """``kernel/drivers/net/virtio_net.ko.xz`` -> ``virtio_net``."""
    base = os.path.basename(path)
    for suffix in _KO_SUFFIXES:
        if base.endswith(suffix):
            base = base[:-len(suffix)]
            break
    return base.replace('-', '_')


def parse_modules_dep(text):
    """Return {module path: [dependency paths]} from modules.dep text."""
    deps = {}
    for line in text.splitlines():
        path, sep, rest = line.partition(':')
        if sep:
            deps[path.strip()] = rest.split()
    return deps


def parse_softdeps(text):
    """Return {module: [names]} from modules.softdep (pre and post)."""
    soft = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) > 2 and words[0] == 'softdep':
            soft.setdefault(words[1].replace('-', '_'), []).extend(
                w for w in words[2:] if w not in ('pre:', 'post:'))
    return soft


def parse_aliases(text):
    """Return {alias: [module names]} from modules.alias (exact ones)."""
    aliases = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == 'alias':
            aliases.setdefault(words[1], []).append(words[2])
    return aliases


def select_modules(deps, names, softdeps=None, aliases=None):
    """Paths of the named modules plus everything they need (closure).

    Hard dependencies come from modules.dep; soft ones (modules.softdep,
    e.g. ``libcrc32c`` needs a ``crc32c`` implementation, or erofs cannot
    load) are followed too, resolving aliases through modules.alias.
    """
    softdeps = softdeps or {}
    aliases = aliases or {}
    by_name = {module_name(p): p for p in deps}
    wanted = [n.strip().replace('-', '_') for n in names if n.strip()]
    missing = [n for n in wanted if n not in by_name]
    selected = set()
    todo = [by_name[n] for n in wanted if n in by_name]
    while todo:
        path = todo.pop()
        if path in selected:
            continue
        selected.add(path)
        todo.extend(deps.get(path, []))
        for soft in softdeps.get(module_name(path), []):
            for name in [soft.replace('-', '_'), *aliases.get(soft, [])]:
                if name in by_name:
                    todo.append(by_name[name])
    return sorted(selected), missing


def find_kernel(tree, version=None):
    """Return (version, vmlinuz path, modules dir) inside a root tree."""
    boot = os.path.join(tree, 'boot')
    candidates = sorted(n for n in (os.listdir(boot) if os.path.isdir(boot)
                                    else []) if n.startswith('vmlinuz-'))
    if version:
        candidates = [n for n in candidates if n == 'vmlinuz-' + version]
    if not candidates:
        raise ArtifactError('no boot/vmlinuz-%s in %s' % (version or '*',
                                                          tree))
    if len(candidates) > 1:
        raise ArtifactError('several kernels in %s: %s' % (
            tree, ', '.join(candidates)))
    version = candidates[0][len('vmlinuz-'):]
    for sub in ('lib/modules', 'usr/lib/modules'):
        moddir = os.path.join(tree, sub, version)
        if os.path.isdir(moddir):
            return version, os.path.join(boot, candidates[0]), moddir
    raise ArtifactError('no lib/modules/%s in %s' % (version, tree))


def _copy_modules(src, dst, only=None):
    """Copy a modules tree (all, or the relative paths in only)."""
    os.makedirs(dst)
    if only is None:
        for entry in os.listdir(src):
            path = os.path.join(src, entry)
            if os.path.islink(path):  # build/, source/ point at headers
                continue
            if os.path.isdir(path):
                shutil.copytree(path, os.path.join(dst, entry),
                                symlinks=False)
            elif entry in _DEPMOD_INPUTS:
                shutil.copy2(path, os.path.join(dst, entry))
        return
    for rel in only:
        target = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(src, rel), target)
    for name in _DEPMOD_INPUTS:
        if os.path.exists(os.path.join(src, name)):
            shutil.copy2(os.path.join(src, name), os.path.join(dst, name))


def _depmod(root, version):
    _run('depmod', '-a', '-b', root, version)


class NewcWriter:
    """A minimal, deterministic writer of the newc cpio format."""

    def __init__(self, fileobj, mtime=0):
        self.f = fileobj
        self.mtime = mtime
        self.ino = 1

    def _entry(self, name, mode, data=b'', nlink=1):
        name_b = name.encode() + b'\0'
        header = '070701' + ''.join('%08X' % v for v in (
            self.ino, mode, 0, 0, nlink, self.mtime, len(data),
            0, 0, 0, 0, len(name_b), 0))
        self.ino += 1
        self.f.write(header.encode())
        self.f.write(name_b)
        self.f.write(b'\0' * ((4 - (110 + len(name_b)) % 4) % 4))
        self.f.write(data)
        self.f.write(b'\0' * ((4 - len(data) % 4) % 4))

    def add_dir(self, name, perm=0o755):
        self._entry(name, stat.S_IFDIR | perm, nlink=2)

    def add_file(self, name, data, perm=0o644):
        self._entry(name, stat.S_IFREG | perm, data)

    def close(self):
        self._entry('TRAILER!!!', 0)


def write_cpio(tree, prefix, out_path, mtime=0):
    """Write tree as prefix/... in a gzip'ed newc cpio (parents first).

    The parents of prefix (``lib``, ``lib/modules``) are deliberately not
    in the archive: when Linux unpacks a later initrd, an entry whose type
    differs from what an earlier one created replaces it, so a ``lib``
    directory entry would delete the ``/lib -> usr/lib`` symlink of a
    merged-/usr agent ramdisk (and with it the dynamic loader).  The
    initrd this one follows must provide ``/lib/modules`` (a directory,
    possibly through a symlink).
    """
    with open(out_path, 'wb') as raw, \
            gzip.GzipFile(fileobj=raw, mode='wb', mtime=mtime,
                          compresslevel=9, filename='') as gz:
        buf = io.BufferedWriter(gz, 1024 * 1024)
        cpio = NewcWriter(buf, mtime)
        cpio.add_dir(prefix.strip('/'))
        count = 0
        for dirpath, dirnames, filenames in os.walk(tree):
            dirnames.sort()
            rel = os.path.relpath(dirpath, tree)
            base = prefix if rel == '.' else '%s/%s' % (prefix, rel)
            for d in dirnames:
                cpio.add_dir('%s/%s' % (base, d))
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                with open(path, 'rb') as f:
                    cpio.add_file('%s/%s' % (base, name), f.read())
                count += 1
        cpio.close()
        buf.flush()
    return count


def build(out_dir, deb=None, installed=None, modules=None, root='/'):
    """Make the artifact in out_dir; return the manifest (dict).

    :param deb: path of a linux-image .deb, or
    :param installed: version of a kernel installed under root.
    :param modules: None for all modules, else an iterable of module names
        or preset names (``agent``) to keep, with their dependencies.
    """
    if bool(deb) == bool(installed):
        raise ArtifactError('give exactly one of deb or installed')
    names = None
    if modules is not None:
        names = []
        for item in modules:
            names.extend(PRESETS.get(item, (item,)))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix='bmc-kernel-') as tmp:
        if deb:
            if not os.path.isfile(deb):
                raise ArtifactError('no such file: %s' % deb)
            tree = os.path.join(tmp, 'deb')
            _run('dpkg-deb', '-x', deb, tree)
            version, vmlinuz, moddir = find_kernel(tree)
            source = 'deb:%s' % os.path.basename(deb)
        else:
            version, vmlinuz, moddir = find_kernel(root, installed)
            source = 'installed:%s' % installed
        deps_file = os.path.join(moddir, 'modules.dep')
        if not os.path.exists(deps_file):
            # A .deb ships no modules.dep (its postinst runs depmod).
            full = os.path.join(tmp, 'full')
            _copy_modules(moddir, os.path.join(full, 'lib', 'modules',
                                               version))
            _depmod(full, version)
            moddir = os.path.join(full, 'lib', 'modules', version)
            deps_file = os.path.join(moddir, 'modules.dep')
        missing = []
        only = None
        if names is not None:
            with open(deps_file) as f:
                deps = parse_modules_dep(f.read())
            only, missing = select_modules(
                deps, names,
                parse_softdeps(_read(os.path.join(moddir,
                                                  'modules.softdep'))),
                parse_aliases(_read(os.path.join(moddir, 'modules.alias'))))
            builtin = _builtin_names(moddir)
            missing = [n for n in missing if n not in builtin]
        stage = os.path.join(tmp, 'stage')
        _copy_modules(moddir, os.path.join(stage, 'lib', 'modules',
                                           version), only)
        _depmod(stage, version)
        out_vmlinuz = os.path.join(out_dir, VMLINUZ)
        shutil.copyfile(vmlinuz, out_vmlinuz)
        out_cpio = os.path.join(out_dir, MODULES_CPIO)
        count = write_cpio(os.path.join(stage, 'lib', 'modules', version),
                           'lib/modules/%s' % version, out_cpio)
        nmods = sum(1 for dp, dn, fn in os.walk(stage) for n in fn
                    if n.endswith(_KO_SUFFIXES))
    manifest = {
        'manifest_version': MANIFEST_VERSION,
        'version': version,
        'source': source,
        'modules': {'count': nmods, 'files': count,
                    'subset': sorted(set(names)) if names else None,
                    'missing': sorted(missing)},
        'files': {},
    }
    for name in (VMLINUZ, MODULES_CPIO):
        path = os.path.join(out_dir, name)
        manifest['files'][name] = {'sha256': sha256_file(path),
                                   'size': os.path.getsize(path)}
    with open(os.path.join(out_dir, MANIFEST), 'w') as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write('\n')
    return manifest


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ''


def _builtin_names(moddir):
    try:
        with open(os.path.join(moddir, 'modules.builtin')) as f:
            return {module_name(line.strip()) for line in f if line.strip()}
    except OSError:
        return set()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m ironic_bmc.kernel.artifact',
        description='Make a kernel artifact (vmlinuz, modules.cpio.gz, '
                    'manifest.json) for Bare-Metal Container.')
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument('--deb', help='a linux-image-*.deb file')
    src.add_argument('--installed', metavar='VERSION',
                     help='an installed kernel: /boot/vmlinuz-VERSION and '
                          '/lib/modules/VERSION')
    parser.add_argument('--out', required=True, help='output directory')
    parser.add_argument('--modules', default=None,
                        help='comma separated module names and/or presets '
                             '(%s) to keep with their dependencies; default:'
                             ' all modules' % ', '.join(sorted(PRESETS)))
    parser.add_argument('--root', default='/',
                        help='root of --installed (default /)')
    args = parser.parse_args(argv)
    modules = args.modules.split(',') if args.modules else None
    try:
        manifest = build(args.out, deb=args.deb, installed=args.installed,
                         modules=modules, root=args.root)
    except ArtifactError as exc:
        print('error: %s' % exc, file=sys.stderr)
        return 1
    if manifest['modules']['missing']:
        print('warning: modules not found: %s'
              % ', '.join(manifest['modules']['missing']), file=sys.stderr)
    json.dump(manifest, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
