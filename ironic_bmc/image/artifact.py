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

"""Build a rootfs artifact (erofs, squashfs or tar) from a directory tree.

Tools: ``mkfs.erofs`` (erofs-utils 1.5 builds from a directory only),
``mksquashfs`` (squashfs-tools 4.5.1) and Python's tarfile for the tar
baseline.

Ownership without root: the tree then belongs to the conductor's user and
the owners and device nodes of the image are in a
:class:`~ironic_bmc.image.layer_stream.TreeInfo`.  squashfs gets them through a
pseudo-file definition list (``-pf``, one ``m`` line per entry:
``-all-root`` would override them; paths with whitespace, quotes or
backslashes are refused there); tar through
its headers; erofs-utils 1.5 has no such mechanism, so an erofs build of a
tree that needs non-root owners or device nodes is refused with
:class:`ArtifactBuildError` unless running as root.
"""

import os
import stat
import subprocess
import tarfile
import time

from oslo_log import log

from bmc_common import protocol
from ironic_bmc.image import exceptions as exc

LOG = log.getLogger(__name__)

#: Compressions per format; None means uncompressed.
COMPRESSIONS = {
    protocol.FORMAT_EROFS: (None, 'lz4', 'lz4hc'),
    protocol.FORMAT_SQUASHFS: (None, 'lz4', 'gzip', 'lzo', 'xz', 'zstd'),
    protocol.FORMAT_TAR: (None,),
    protocol.FORMAT_TREE: (None,),
}
#: What benchmark() measures by default.
BENCHMARK_VARIANTS = (
    (protocol.FORMAT_EROFS, None), (protocol.FORMAT_EROFS, 'lz4'),
    (protocol.FORMAT_EROFS, 'lz4hc'), (protocol.FORMAT_SQUASHFS, None),
    (protocol.FORMAT_SQUASHFS, 'lz4'), (protocol.FORMAT_SQUASHFS, 'gzip'),
    (protocol.FORMAT_TAR, None),
)
_UNSAFE_PSEUDO_CHARS = set(' \t\n\r"\'\\')


def validate(fmt, compression=None):
    """Refuse unknown format/compression pairs (ValueError)."""
    if fmt not in COMPRESSIONS:
        formats = ', '.join(protocol.ARTIFACT_FORMATS
                            + (protocol.FORMAT_TREE,))
        raise ValueError(f'unknown artifact format {fmt!r} (one of '
                         f'{formats})')
    if compression not in COMPRESSIONS[fmt]:
        raise ValueError(f'compression {compression!r} is not supported '
                         f'for {fmt} (one of {COMPRESSIONS[fmt]})')


def _run(fmt, cmd):
    LOG.debug('Running %s', ' '.join(cmd))
    try:
        # argv list, no shell: mkfs.erofs/mksquashfs on our paths.
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,  # noqa: S603
                              stderr=subprocess.STDOUT, check=False)
    except OSError as e:
        raise exc.ArtifactBuildError(format=fmt,
                                     reason=f'cannot run {cmd[0]}: {e}')
    if proc.returncode != 0:
        output = proc.stdout.decode(errors='replace')[-2000:].strip()
        raise exc.ArtifactBuildError(
            format=fmt,
            reason=f'{cmd[0]} exited with {proc.returncode}: {output}')


def _needs_overrides(info):
    return bool(info is not None and (info.owners or info.devices))


def build_erofs(tree, out, info=None, compression=None, same_owner=None):
    same_owner = os.geteuid() == 0 if same_owner is None else same_owner
    if not same_owner and _needs_overrides(info):
        raise exc.ArtifactBuildError(
            format=protocol.FORMAT_EROFS,
            reason='the image has files owned by non-root users or device '
                   'nodes, which mkfs.erofs 1.5 can only take from the tree; '
                   'run the conductor as root or use the squashfs format')
    cmd = ['mkfs.erofs', '--quiet', '--preserve-mtime']
    if compression:
        cmd.append(f'-z{compression}')
    if not same_owner:
        cmd.append('--all-root')
    _run(protocol.FORMAT_EROFS, cmd + [out, tree])


def _pseudo_name(relpath):
    if _UNSAFE_PSEUDO_CHARS.intersection(relpath):
        raise exc.ArtifactBuildError(
            format=protocol.FORMAT_SQUASHFS,
            reason=f'path {relpath!r} needs a non-root owner or is a '
                   'device node and cannot be written to a pseudo file '
                   'list; run as root')
    return '/' + relpath


def write_pseudo_file(info, path, tree):
    """Write mksquashfs pseudo definitions for owners and devices.

    ``-all-root`` would override ``m`` (modify) definitions, so every
    entry of the tree gets one: its recorded owner, else root.
    """
    owners = info.owners if info is not None else {}
    devices = info.devices if info is not None else {}
    lines = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            relpath = os.path.relpath(full, tree)
            mode = stat.S_IMODE(os.lstat(full).st_mode)
            uid, gid, mode = owners.get(relpath, (0, 0, mode))
            lines.append(f'{_pseudo_name(relpath)} m {mode & 0o7777:o} '
                         f'{uid} {gid}\n')
    for relpath, dev in sorted(devices.items()):
        name = _pseudo_name(relpath)
        attrs = f'{dev.mtime} {dev.mode & 0o7777:o} {dev.uid} {dev.gid}'
        if dev.kind == 'f':
            lines.append(f'{name} I {attrs} f\n')
        else:
            lines.append(f'{name} {dev.kind.upper()} {attrs} '
                         f'{dev.major} {dev.minor}\n')
    with open(path, 'w') as f:
        f.writelines(lines)


def build_squashfs(tree, out, info=None, compression=None, same_owner=None):
    same_owner = os.geteuid() == 0 if same_owner is None else same_owner
    cmd = ['mksquashfs', tree, out, '-noappend', '-quiet', '-no-progress']
    if compression is None:
        cmd += ['-noI', '-noD', '-noF', '-noX']
    else:
        cmd += ['-comp', compression]
    if not same_owner:
        cmd += ['-root-uid', '0', '-root-gid', '0']
        if _needs_overrides(info):
            pseudo = out + '.pseudo'
            write_pseudo_file(info, pseudo, tree)
            cmd += ['-pf', pseudo]
        else:
            cmd.append('-all-root')
    try:
        _run(protocol.FORMAT_SQUASHFS, cmd)
    finally:
        if not same_owner and _needs_overrides(info):
            os.unlink(out + '.pseudo')


def build_tar(tree, out, info=None, compression=None, same_owner=None):
    """An uncompressed PAX tar of the tree, numeric owners, sorted."""
    same_owner = os.geteuid() == 0 if same_owner is None else same_owner
    owners = info.owners if info is not None else {}

    def _filter(ti):
        rel = ti.name.removeprefix('./')
        ti.uname = ti.gname = ''
        if not same_owner:
            ti.uid, ti.gid = owners.get(rel, (0, 0, 0))[:2]
        return ti

    with tarfile.open(out, 'w', format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(tree):
            dirnames.sort()
            rel = os.path.relpath(dirpath, tree)
            arc = '.' if rel == '.' else './' + rel
            tar.add(dirpath, arcname=arc, recursive=False, filter=_filter)
            for name in sorted(filenames) + [
                    d for d in dirnames
                    if os.path.islink(os.path.join(dirpath, d))]:
                tar.add(os.path.join(dirpath, name),
                        arcname=arc + '/' + name, recursive=False,
                        filter=_filter)
        for relpath, dev in sorted((info.devices if info else {}).items()):
            ti = tarfile.TarInfo('./' + relpath)
            ti.type = {'c': tarfile.CHRTYPE, 'b': tarfile.BLKTYPE,
                       'f': tarfile.FIFOTYPE}[dev.kind]
            ti.mode, ti.uid, ti.gid = dev.mode, dev.uid, dev.gid
            ti.devmajor, ti.devminor, ti.mtime = dev.major, dev.minor, \
                dev.mtime
            tar.addfile(ti)


_BUILDERS = {
    protocol.FORMAT_EROFS: build_erofs,
    protocol.FORMAT_SQUASHFS: build_squashfs,
    protocol.FORMAT_TAR: build_tar,
}


def build(tree, out, fmt, info=None, compression=None, same_owner=None):
    """Build the artifact ``out`` (must not exist) from ``tree``.

    The ``tree`` format is the tree itself, moved to ``out``: its size is
    what its files hold (``info.unpacked_size``).

    :returns: the artifact size in bytes.
    :raises: ArtifactBuildError, ValueError for a bad format/compression.
    """
    validate(fmt, compression)
    if fmt == protocol.FORMAT_TREE:
        owned = os.geteuid() == 0 if same_owner is None else same_owner
        if not owned and _needs_overrides(info):
            raise exc.ArtifactBuildError(
                format=fmt,
                reason='the image has files owned by other users or device '
                       'nodes, which an exported tree can only hold when '
                       'the conductor runs as root')
        os.rename(tree, out)
        return info.unpacked_size if info is not None else 0
    _BUILDERS[fmt](tree, out, info=info, compression=compression,
                   same_owner=same_owner)
    return os.path.getsize(out)


def benchmark(tree, workdir, variants=BENCHMARK_VARIANTS):
    """Time each (format, compression) build of ``tree``.

    For the lead's comparison, not for tests: returns a list of dicts
    ``{format, compression, seconds, size}``.  Artifacts are written in
    ``workdir`` and removed.
    """
    results = []
    for fmt, compression in variants:
        out = os.path.join(workdir, f'bench.{fmt}.{compression}')
        start = time.monotonic()
        size = build(tree, out, fmt, compression=compression)
        results.append({'format': fmt, 'compression': compression,
                        'seconds': round(time.monotonic() - start, 3),
                        'size': size})
        os.unlink(out)
    return results
