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

"""Apply OCI image layers to a directory tree, safely.

Every path of a layer is resolved component by component from a directory
file descriptor of the tree root with ``O_NOFOLLOW``: nothing ever follows
a symbolic link, so nothing a layer contains can make us write outside the
tree.  The rules:

* absolute names and names with a ``..`` component are refused;
* a name whose parent goes through a symbolic link is refused (OCI layers
  produced by docker/buildah/umoci never write through a symlink: layer
  diffs record real paths), as is a name whose parent is not a directory;
* hard link targets are resolved the same way, must already exist in the
  tree and must not be directories;
* symbolic links are created verbatim and never followed;
* an existing entry is removed (not followed) before a new one is created
  in its place; directories merge.

Whiteouts follow the OCI image spec: ``.wh.<name>`` removes ``<name>`` of
the lower layers, ``.wh..wh..opq`` removes everything the lower layers put
in its directory.  A whiteout below a path that the same layer replaced by
a non-directory is a no-op: what it names went with the directory
(``umoci repack`` writes a directory that became a file or a symlink as
``d`` then ``d/.wh.<child>`` for each former child).  Nothing is opened
below such a path, nor is a symlink followed; a whiteout below a lower
layer's symlink or file is still refused.

Directory metadata (owner, mode, extended attributes, mtime; a later
layer's entry for the directory replaces it whole) is applied at the end,
deepest first, so that read-only directories can still be filled.

Every operation on a path of the tree is a method of :class:`LayerApplier`
(about 400 lines): the safety argument above is read in one place.
Reading the layer (decompression, bounded tar headers, the limits, the
extended attributes a header may set) is in :mod:`.layer_stream`.

Ownership and device nodes are applied when running as root.  Otherwise
they are recorded in :attr:`TreeInfo.owners` and :attr:`TreeInfo.devices`
for the artifact builder (squashfs pseudo files, tar headers).
"""

import collections
import errno
import gzip
import os
import shutil
import stat
import tarfile

from oslo_log import log

from ironic_bmc.image import exceptions as exc
from ironic_bmc.image import layer_stream

LOG = log.getLogger(__name__)

CHUNK = 1024 * 1024
#: Bytes an entry counts against the size bound besides its content (a
#: tar header's block): a layer of a million empty files or directories
#: is not free.
ENTRY_COST = 512
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
               | os.O_CLOEXEC)
WHITEOUT_PREFIX = '.wh.'
OPAQUE_MARKER = '.wh..wh..opq'

#: The bounds a layer is held to (callers build them from here).
Limits = layer_stream.Limits


class LayerApplier:
    """Apply layers, in order, to ``root`` (an existing empty directory).

    :param root: the tree root; must be private to the caller.
    :param same_owner: apply ownership and create device nodes; defaults
        to "running as root".
    :param max_size: refuse a tree whose file content grows beyond this
        (overrides ``limits.max_size``).
    :param limits: :class:`Limits`; the defaults when None.
    """

    def __init__(self, root, same_owner=None, max_size=None, limits=None):
        self.root = root
        self.same_owner = (os.geteuid() == 0 if same_owner is None
                           else same_owner)
        self.limits = limits or Limits()
        self.max_size = (max_size if max_size is not None
                         else self.limits.max_size)
        self._tarinfo = layer_stream.bounded_tarinfo(
            self.limits.max_header_bytes)
        #: xattr name -> times dropped (not in limits.allowed_xattrs).
        self.dropped_xattrs = collections.Counter()
        self.info = layer_stream.TreeInfo()
        self._root_fd = os.open(root, _DIR_FLAGS)
        self._dir_meta = {}
        self._layer = None
        self._layer_paths = set()

    def close(self):
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.close()

    # --- public ---------------------------------------------------------

    def apply_file(self, path, layer_id):
        """Apply a layer blob (gzip/zstd/plain tar) from a local file."""
        stream, close = layer_stream.open_stream(path)
        error = None
        try:
            self.apply_stream(stream, layer_id)
        finally:
            error = close()
        if error:
            raise exc.UnsafeLayer(layer=layer_id, path='-',
                                  reason=f'cannot be decompressed: {error}')

    def apply_stream(self, stream, layer_id):
        """Apply an uncompressed tar stream."""
        self._layer = layer_id
        self._layer_paths = set()
        name = '-'
        count = 0
        try:
            with tarfile.open(fileobj=stream, mode='r|',
                              tarinfo=self._tarinfo) as tar:
                for member in tar:
                    name = member.name
                    count += 1
                    if count > self.limits.max_entries:
                        raise self._unsafe(
                            name, f'is beyond the limit of '
                            f'{self.limits.max_entries} entries per layer')
                    self._apply_member(tar, member)
                    tar.members = []
        except layer_stream.HeaderTooLarge as e:
            raise exc.UnsafeLayer(layer=layer_id, path=name,
                                  reason=f'(the entry after it) {e}')
        except (tarfile.TarError, EOFError, gzip.BadGzipFile,
                ValueError, UnicodeError) as e:
            raise exc.UnsafeLayer(layer=layer_id, path=name,
                                  reason=f'is not valid: {e}')
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise
            raise exc.UnsafeLayer(layer=layer_id, path=name,
                                  reason=f'cannot be applied: {e}')

    def finish(self):
        """Apply deferred directory metadata; return :class:`TreeInfo`."""
        for relpath in sorted(self._dir_meta, key=lambda p: -p.count('/')):
            uid, gid, mode, mtime, xattrs = self._dir_meta[relpath]
            parts = relpath.split('/') if relpath else []
            try:
                fd = self._open_dir(parts)
            except exc.UnsafeLayer:
                fd = None
            if fd is None:
                continue
            try:
                self._set_meta_fd(fd, relpath, uid, gid, mode, mtime,
                                  xattrs)
            finally:
                os.close(fd)
        for relpath in list(self.info.owners):
            parts = relpath.split('/')
            pfd = None
            try:
                pfd = self._open_dir(parts[:-1])
                if pfd is None:
                    raise FileNotFoundError
                os.stat(parts[-1], dir_fd=pfd, follow_symlinks=False)
            except (FileNotFoundError, exc.UnsafeLayer):
                del self.info.owners[relpath]
            finally:
                if pfd is not None:
                    os.close(pfd)
        self.info.unpacked_size = layer_stream.tree_size(self.root)
        return self.info

    def _count_entry(self):
        """One more entry (a directory, a link, a device, an empty file
        too): each costs an inode and its metadata, so each counts
        :data:`ENTRY_COST` bytes against the size bound."""
        self.info.entries += 1
        self._check_size()

    def _check_size(self):
        used = self.info.unpacked_size + self.info.entries * ENTRY_COST
        if self.max_size and used > self.max_size:
            raise exc.ImageTooLarge(
                ref=self._layer, what='the unpacked root filesystem '
                '(file bytes, and %d bytes per entry)' % ENTRY_COST,
                size=f'more than {self.max_size}', limit=self.max_size)

    # --- path handling ---------------------------------------------------

    def _unsafe(self, path, reason):
        return exc.UnsafeLayer(layer=self._layer, path=path, reason=reason)

    def _split(self, name, what='entry'):
        if '\x00' in name:
            raise self._unsafe(name, 'contains a NUL byte')
        if name.startswith('/'):
            raise self._unsafe(name, f'is an absolute path ({what})')
        parts = [p for p in name.split('/') if p not in ('', '.')]
        if '..' in parts:
            raise self._unsafe(name, f'has a ".." component ({what})')
        return parts

    def _open_dir(self, parts, create=False, name=None, whiteout=False):
        """Open the directory ``parts`` below the root, never following a
        symlink.  Returns None when missing and not ``create``, and for a
        ``whiteout`` below a non-directory this layer wrote."""
        fd = os.dup(self._root_fd)
        try:
            for i, comp in enumerate(parts):
                try:
                    nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    os.mkdir(comp, 0o755, dir_fd=fd)
                    self._layer_paths.add('/'.join(parts[:i + 1]))
                    self._count_entry()
                    nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    sub = '/'.join(parts[:i + 1])
                    if whiteout and sub in self._layer_paths:
                        os.close(fd)
                        return None
                    st = os.stat(comp, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode):
                        raise self._unsafe(
                            name or sub, 'goes through the symbolic link '
                            f'"{sub}"')
                    raise self._unsafe(name or sub, f'has a parent "{sub}" '
                                       'that is not a directory')
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _forget(self, relpath):
        prefix = relpath + '/'
        for key in [k for k in self.info.devices
                    if k == relpath or k.startswith(prefix)]:
            del self.info.devices[key]

    def _remove(self, pfd, base, relpath):
        """Remove whatever is at ``base`` in ``pfd`` (not following)."""
        try:
            st = os.stat(base, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            self._forget(relpath)
            return False
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(base, dir_fd=pfd)
            prefix = relpath + '/'
            for key in [k for k in self._dir_meta
                        if k == relpath or k.startswith(prefix)]:
                del self._dir_meta[key]
        else:
            os.unlink(base, dir_fd=pfd)
        self._forget(relpath)
        return True

    # --- metadata ----------------------------------------------------------

    def _set_meta_fd(self, fd, relpath, uid, gid, mode, mtime, xattrs=None):
        if self.same_owner:
            os.fchown(fd, uid, gid)
        elif uid or gid:
            self.info.owners[relpath] = (uid, gid, mode)
        os.fchmod(fd, mode)
        for key, value in (xattrs or {}).items():
            try:
                os.setxattr(fd, key, value)
            except OSError as e:
                LOG.warning('Layer %(l)s: cannot set xattr %(k)s on %(p)s: '
                            '%(e)s', {'l': self._layer, 'k': key,
                                      'p': relpath, 'e': e})
        os.utime(fd, ns=(mtime, mtime))

    @staticmethod
    def _mtime_ns(member):
        try:
            return int(float(member.mtime) * 1e9)
        except (TypeError, ValueError, OverflowError):
            return 0

    def _xattrs(self, member):
        return layer_stream.member_xattrs(
            member, self.limits.allowed_xattrs, self.dropped_xattrs,
            self._layer)

    # --- entries -------------------------------------------------------------

    def _apply_member(self, tar, m):
        parts = self._split(m.name)
        relpath = '/'.join(parts)
        mode = m.mode & 0o7777
        mtime = self._mtime_ns(m)
        if not parts:
            if not m.isdir():
                raise self._unsafe(m.name, 'replaces the root directory')
            self._dir_meta[''] = (m.uid, m.gid, mode, mtime,
                                  self._xattrs(m))
            return
        base = parts[-1]
        if base.startswith(WHITEOUT_PREFIX):
            self._whiteout(parts, m.name)
            return
        pfd = self._open_dir(parts[:-1], create=True, name=m.name)
        try:
            if m.isdir():
                try:
                    st = os.stat(base, dir_fd=pfd, follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode):
                        self._remove(pfd, base, relpath)
                        raise FileNotFoundError
                except FileNotFoundError:
                    os.mkdir(base, 0o700, dir_fd=pfd)
                    self._count_entry()
                self._dir_meta[relpath] = (m.uid, m.gid, mode, mtime,
                                           self._xattrs(m))
            elif m.islnk():
                self._hardlink(pfd, base, relpath, m)
            else:
                self._remove(pfd, base, relpath)
                self._create(tar, pfd, base, relpath, m, mode, mtime)
                self._count_entry()
            self._layer_paths.add(relpath)
        finally:
            os.close(pfd)

    def _create(self, tar, pfd, base, relpath, m, mode, mtime):
        if m.isreg():
            fd = os.open(base, _FILE_FLAGS, 0o600, dir_fd=pfd)
            with os.fdopen(fd, 'wb') as out:
                src = tar.extractfile(m)
                while True:
                    chunk = src.read(CHUNK)
                    if not chunk:
                        break
                    self.info.unpacked_size += len(chunk)
                    self._check_size()
                    out.write(chunk)
                out.flush()
                self._set_meta_fd(out.fileno(), relpath, m.uid, m.gid,
                                  mode, mtime, self._xattrs(m))
        elif m.issym():
            if not m.linkname:
                raise self._unsafe(m.name, 'is a symbolic link with an '
                                   'empty target')
            os.symlink(m.linkname, base, dir_fd=pfd)
            if self.same_owner:
                os.chown(base, m.uid, m.gid, dir_fd=pfd,
                         follow_symlinks=False)
            elif m.uid or m.gid:
                self.info.owners[relpath] = (m.uid, m.gid, 0o777)
            os.utime(base, ns=(mtime, mtime), dir_fd=pfd,
                     follow_symlinks=False)
        elif m.ischr() or m.isblk() or m.isfifo():
            kind = 'c' if m.ischr() else 'b' if m.isblk() else 'f'
            if self.same_owner or kind == 'f':
                fmt = {'c': stat.S_IFCHR, 'b': stat.S_IFBLK,
                       'f': stat.S_IFIFO}[kind]
                os.mknod(base, mode | fmt,
                         os.makedev(m.devmajor, m.devminor), dir_fd=pfd)
                fd = os.open(base, os.O_PATH | os.O_NOFOLLOW, dir_fd=pfd)
                try:
                    fdpath = f'/proc/self/fd/{fd}'
                    if self.same_owner:
                        os.chown(fdpath, m.uid, m.gid)
                    elif m.uid or m.gid:
                        self.info.owners[relpath] = (m.uid, m.gid, mode)
                    os.chmod(fdpath, mode)
                    os.utime(fdpath, ns=(mtime, mtime))
                finally:
                    os.close(fd)
            else:
                self.info.devices[relpath] = layer_stream.Device(
                    kind, mode, m.uid, m.gid, m.devmajor, m.devminor,
                    mtime // 10**9)
        else:
            LOG.warning('Layer %(l)s: skipping %(p)s of unsupported tar '
                        'type %(t)r', {'l': self._layer, 'p': m.name,
                                       't': m.type})

    def _hardlink(self, pfd, base, relpath, m):
        tparts = self._split(m.linkname, what='hard link target')
        if not tparts:
            raise self._unsafe(m.name, 'is a hard link to the root')
        tpath = '/'.join(tparts)
        if tpath == relpath:
            return
        tfd = self._open_dir(tparts[:-1], name=m.name)
        if tfd is None:
            raise self._unsafe(m.name, f'is a hard link to "{m.linkname}" '
                               'which is not in the tree')
        try:
            try:
                st = os.stat(tparts[-1], dir_fd=tfd, follow_symlinks=False)
            except FileNotFoundError:
                raise self._unsafe(m.name, f'is a hard link to '
                                   f'"{m.linkname}" which is not in the '
                                   'tree')
            if stat.S_ISDIR(st.st_mode):
                raise self._unsafe(m.name, 'is a hard link to a directory')
            self._remove(pfd, base, relpath)
            os.link(tparts[-1], base, src_dir_fd=tfd, dst_dir_fd=pfd,
                    follow_symlinks=False)
            if tpath in self.info.owners:
                self.info.owners[relpath] = self.info.owners[tpath]
            if tpath in self.info.devices:
                self.info.devices[relpath] = self.info.devices[tpath]
            self._count_entry()
        finally:
            os.close(tfd)

    def _whiteout(self, parts, name):
        base = parts[-1]
        pfd = self._open_dir(parts[:-1], create=(base == OPAQUE_MARKER),
                             name=name, whiteout=True)
        if pfd is None:
            return
        try:
            if base == OPAQUE_MARKER:
                self._clear_lower(pfd, '/'.join(parts[:-1]))
                return
            target = base[len(WHITEOUT_PREFIX):]
            if target in ('', '.', '..'):
                raise self._unsafe(name, 'is a malformed whiteout')
            tpath = '/'.join(parts[:-1] + [target])
            if tpath not in self._layer_paths:
                self._remove(pfd, target, tpath)
        finally:
            os.close(pfd)

    def _clear_lower(self, dfd, prefix):
        for child in os.listdir(dfd):
            path = prefix + '/' + child if prefix else child
            if path not in self._layer_paths:
                self._remove(dfd, child, path)
                continue
            st = os.stat(child, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                cfd = os.open(child, _DIR_FLAGS, dir_fd=dfd)
                try:
                    self._clear_lower(cfd, path)
                finally:
                    os.close(cfd)
