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

"""Reading an image layer, before the applier (:mod:`.layers`) writes it.

A verified layer blob opened as a decompressed stream (gzip, zstd, plain
tar), tar headers bounded before Python's tarfile reads them into
memory, the extended attributes a header may set (:func:`member_xattrs`),
the bounds a layer is held to (:class:`Limits`) and what the applier
learns about the tree (:class:`TreeInfo`).
"""

import collections
import dataclasses
import fnmatch
import gzip
import os
import stat
import subprocess
import tarfile

from oslo_log import log

LOG = log.getLogger(__name__)

#: A device node that could not be created (not running as root).
Device = collections.namedtuple(
    'Device', ['kind', 'mode', 'uid', 'gid', 'major', 'minor', 'mtime'])


@dataclasses.dataclass(frozen=True)
class Limits:
    """Bounds on what a layer may make the conductor do.

    Images come from whoever deploys; these hold whatever the image is.
    """

    #: Bytes of file content of the whole tree (None: unbounded).
    max_size: int = None
    #: Tar entries per layer.
    max_entries: int = 1000000
    #: Bytes of one PAX extended or GNU long-name/long-link header: Python's
    #: tarfile reads such a header into memory whole.
    max_header_bytes: int = 1024 * 1024
    #: Extended attributes kept (shell-style patterns); others are dropped.
    allowed_xattrs: tuple = ('user.*', 'security.capability')


_LONG_HEADERS = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK,
                 tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)


class HeaderTooLarge(Exception):
    """A tar header past the bound (before tarfile reads it)."""

    pass


def bounded_tarinfo(max_header_bytes):
    """A TarInfo class that refuses long headers above the bound before
    tarfile reads them into memory."""

    class BoundedTarInfo(tarfile.TarInfo):
        def _proc_member(self, tarfile_):
            if self.type in _LONG_HEADERS and self.size > max_header_bytes:
                raise HeaderTooLarge(
                    f'has a {self.size}-byte extended header (more than '
                    f'{max_header_bytes})')
            return super()._proc_member(tarfile_)

    return BoundedTarInfo


def member_xattrs(member, allowed, dropped, layer):
    """The extended attributes (PAX ``SCHILY.xattr.*``) of a tar member
    whose names match one of the ``allowed`` shell-style patterns, as
    ``{name: bytes}``.  Others are counted in ``dropped`` (a Counter) and
    logged once per name."""
    out = {}
    for key, value in (member.pax_headers or {}).items():
        if not key.startswith('SCHILY.xattr.'):
            continue
        name = key[len('SCHILY.xattr.'):]
        if not any(fnmatch.fnmatchcase(name, pattern)
                   for pattern in allowed):
            if not dropped[name]:
                LOG.warning('Layer %(l)s: dropping extended attribute '
                            '%(k)s (of %(p)s and any later file): not '
                            'in [container]allowed_xattrs',
                            {'l': layer, 'k': name, 'p': member.name})
            dropped[name] += 1
            continue
        out[name] = value.encode('utf-8', 'surrogateescape')
    return out


class TreeInfo:
    """What the applier learnt about the tree."""

    def __init__(self):
        #: Bytes of regular file content of the final tree (hard links
        #: counted once); while applying: bytes written so far.
        self.unpacked_size = 0
        #: Entries created (files, dirs, links, devices).
        self.entries = 0
        #: relpath -> (uid, gid, mode) not applied to the tree (non-root).
        self.owners = {}
        #: relpath -> Device not created in the tree (non-root).
        self.devices = {}


def open_stream(path):
    """Open a verified layer blob as a decompressed byte stream.

    gzip, zstd (through the ``zstd`` binary) and plain tar are recognised
    by their magic bytes.

    :returns: (stream, close_callable); close returns an error string or
        None.
    """
    with open(path, 'rb') as f:
        magic = f.read(4)
    if magic[:2] == b'\x1f\x8b':
        stream = gzip.open(path, 'rb')  # noqa: SIM115
        return stream, lambda: stream.close()
    if magic == b'\x28\xb5\x2f\xfd':
        # argv list, no shell; zstd from PATH as every tool here.
        proc = subprocess.Popen(['zstd', '-dcq', '--', path],  # noqa: S603, S607
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

        def _close():
            proc.stdout.close()
            err = proc.stderr.read().decode(errors='replace')
            proc.stderr.close()
            if proc.wait() != 0:
                return f'zstd failed: {err.strip()}'
        return proc.stdout, _close
    stream = open(path, 'rb')  # noqa: SIM115
    return stream, lambda: stream.close()


def tree_size(root):
    """Bytes of regular files under root, hard links counted once."""
    total = 0
    seen = set()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_nlink > 1:
                if st.st_ino in seen:
                    continue
                seen.add(st.st_ino)
            total += st.st_size
    return total
