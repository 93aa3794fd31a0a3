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

"""A content-addressed, size-bounded cache of rootfs artifacts.

Layout of ``cache_dir``::

    entries/<key>/artifact     the finished artifact
    entries/<key>/meta.json    what the pipeline knows about it
    entries/<key>/last-used    touched on each use (LRU clock)
    locks/<key>.lock           flock: held while building/pinning/evicting
    pins/<key>/<holder>        one file per user of the entry
    work/<key>.<random>/       build directories (trees, blobs)
    evict.lock                 flock: one evictor at a time

Why not :class:`ironic.drivers.modules.image_cache.ImageCache`: it caches
*downloads* of one href into one master file per image, its locks are
in-process ``lockutils`` locks and it decides "in use" by hard-link counts
of master files linked into per-node directories.  Here the entry is
*derived* from many blobs by a build of minutes, must be built once across
conductor processes, and must stay pinned while a deploy serves it over
HTTP even when it is not hard linked.  The hard-link convention is kept:
an artifact with more than one link is never evicted either.

Concurrency: building a key takes its flock exclusively (processes and
threads alike, since each call opens its own file description); the
finished entry appears by an atomic ``rename`` of a complete directory, so
readers see all of it or nothing.  A failed build removes its work
directory; a crashed one is cleaned up by the next build of the key.
"""

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
import time

from oslo_log import log

from ironic_bmc.image import exceptions as exc

LOG = log.getLogger(__name__)

ARTIFACT_NAME = 'artifact'
#: The artifact's dm-verity hash tree, when it has one.
VERITY_NAME = 'artifact.verity'
META_NAME = 'meta.json'
STAMP_NAME = 'last-used'
_HOLDER_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$')


def rmtree(path):
    """shutil.rmtree that also removes read-only directories (non-root)."""
    def _onerror(func, failed, excinfo):
        parent = os.path.dirname(failed)
        try:
            os.chmod(parent, 0o700)
            if func is os.rmdir or func is os.unlink:
                func(failed)
            else:
                shutil.rmtree(failed, ignore_errors=True)
        except OSError:
            pass

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=_onerror)


@dataclasses.dataclass
class CacheEntry:
    key: str
    path: str
    meta: dict

    @property
    def artifact(self):
        return os.path.join(self.path, ARTIFACT_NAME)

    @property
    def verity(self):
        """Path of the hash tree, or None."""
        path = os.path.join(self.path, VERITY_NAME)
        return path if self.meta.get('verity') else None


@contextlib.contextmanager
def _flock(path, blocking=True):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(fd, flags)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                yield False
                return
            raise
        yield True
    finally:
        os.close(fd)


class ArtifactCache:
    """The cache.

    :param cache_dir: the cache root (created if missing).
    :param max_size: bytes; entries beyond it are evicted least recently
        used first, pinned ones never.  None: unbounded.
    """

    def __init__(self, cache_dir, max_size=None):
        self.cache_dir = os.path.abspath(cache_dir)
        self.max_size = max_size
        self.entries_dir = os.path.join(self.cache_dir, 'entries')
        self.locks_dir = os.path.join(self.cache_dir, 'locks')
        self.pins_dir = os.path.join(self.cache_dir, 'pins')
        self.work_dir = os.path.join(self.cache_dir, 'work')
        for d in (self.entries_dir, self.locks_dir, self.pins_dir,
                  self.work_dir):
            os.makedirs(d, mode=0o700, exist_ok=True)

    @staticmethod
    def make_key(manifest_digest, fmt, compression=None, version=1,
                 variant=None):
        """Key of an artifact: manifest digest + format + builder version
        (+ a variant, e.g. ``verity``: what else the entry holds)."""
        algo, _, hexd = manifest_digest.partition(':')
        if not re.match(r'^[a-f0-9]{32,128}$', hexd) or not algo.isalnum():
            raise ValueError(f'bad manifest digest {manifest_digest!r}')
        key = f'{algo}-{hexd}-{fmt}-{compression or "none"}-v{version}'
        return f'{key}-{variant}' if variant else key

    def _check_key(self, key):
        if not re.match(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$', key):
            raise ValueError(f'bad cache key {key!r}')
        return key

    def _lock_path(self, key):
        return os.path.join(self.locks_dir, self._check_key(key) + '.lock')

    def _entry_path(self, key):
        return os.path.join(self.entries_dir, self._check_key(key))

    # --- lookup / build ------------------------------------------------

    def lookup(self, key, touch=True):
        """Return the :class:`CacheEntry` for ``key`` or None."""
        path = self._entry_path(key)
        try:
            with open(os.path.join(path, META_NAME)) as f:
                meta = json.load(f)
        except FileNotFoundError:
            return None
        if touch:
            self._touch(path)
        return CacheEntry(key=key, path=path, meta=meta)

    @staticmethod
    def _touch(path):
        stamp = os.path.join(path, STAMP_NAME)
        try:
            with open(stamp, 'a'):
                pass
            os.utime(stamp)
        except FileNotFoundError:
            pass

    def _clean_work(self, key):
        prefix = key + '.'
        for name in os.listdir(self.work_dir):
            if name.startswith(prefix):
                LOG.info('Removing leftover work directory %s of %s',
                         name, key)
                rmtree(os.path.join(self.work_dir, name))

    def clean_stale_work(self):
        """Remove work directories no build holds (a build that crashed,
        or a conductor killed mid-build); returns their names.

        A build holds its key's lock for its whole life, so a work
        directory whose key lock can be taken is nobody's.
        """
        removed = []
        for name in sorted(os.listdir(self.work_dir)):
            key = name.rsplit('.', 1)[0]
            try:
                lock = self._lock_path(key)
            except ValueError:
                lock = None
            if lock is None:
                continue
            with _flock(lock, blocking=False) as locked:
                if locked:
                    LOG.info('Removing stale work directory %s of the '
                             'rootfs cache', name)
                    rmtree(os.path.join(self.work_dir, name))
                    removed.append(name)
        return removed

    def get_or_build(self, key, build, pin=None):
        """Return the entry for ``key``, building it once if missing.

        :param build: ``build(workdir) -> meta dict``; must write the
            artifact to ``os.path.join(workdir, 'artifact')``.  It may use
            ``workdir`` for anything else (its other contents are deleted).
        :param pin: a holder name to pin the entry for, atomically with
            the lookup/build (so no eviction can come in between).
        :returns: (CacheEntry, built) where built tells whether this call
            built it.
        """
        if pin:
            self._check_holder(pin)
        entry = None
        built = False
        with _flock(self._lock_path(key)):
            entry = self.lookup(key)
            if entry is None:
                entry = self._build_locked(key, build)
                built = True
            if pin:
                self._pin_locked(key, pin)
        if built:
            # Make room, but not by evicting what the caller just asked
            # for (it may not be pinned).
            self.evict(keep=(key,))
        return entry, built

    def _build_locked(self, key, build):
        self._clean_work(key)
        work = tempfile.mkdtemp(prefix=key + '.', dir=self.work_dir)
        try:
            stage = os.path.join(work, 'entry')
            os.mkdir(stage)
            start = time.monotonic()
            meta = build(stage)
            # A file, or a directory tree (the ``tree`` format).
            if not os.path.exists(os.path.join(stage, ARTIFACT_NAME)):
                raise exc.CacheError(path=self.cache_dir,
                                     reason=f'build of {key} produced no '
                                            'artifact')
            for name in os.listdir(stage):
                if name not in (ARTIFACT_NAME, VERITY_NAME):
                    full = os.path.join(stage, name)
                    if os.path.isdir(full) and not os.path.islink(full):
                        rmtree(full)
                    else:
                        os.unlink(full)
            meta = dict(meta or {})
            meta.setdefault('key', key)
            meta.setdefault('build_seconds',
                            round(time.monotonic() - start, 3))
            meta.setdefault('created_at', time.time())
            with open(os.path.join(stage, META_NAME), 'w') as f:
                json.dump(meta, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            self._touch(stage)
            # artifacts are published read-only to the HTTP server.
            os.chmod(stage, 0o755)  # noqa: S103
            os.rename(stage, self._entry_path(key))
        finally:
            rmtree(work)
        LOG.info('Built rootfs artifact %s', key)
        return self.lookup(key)

    # --- pins ------------------------------------------------------------

    def _pin_dir(self, key):
        return os.path.join(self.pins_dir, self._check_key(key))

    @staticmethod
    def _check_holder(holder):
        if not _HOLDER_RE.match(holder or ''):
            raise ValueError(f'bad pin holder {holder!r}')
        return holder

    def _pin_locked(self, key, holder):
        self._check_holder(holder)
        if self.lookup(key, touch=False) is None:
            raise exc.CacheError(path=self.cache_dir,
                                 reason=f'cannot pin {key}: not in the cache')
        os.makedirs(self._pin_dir(key), exist_ok=True)
        with open(os.path.join(self._pin_dir(key), holder), 'w') as f:
            f.write(f'{time.time():f}\n')

    def pin(self, key, holder):
        """Keep ``key`` from eviction until ``unpin(key, holder)``.

        Pins are files, so they survive conductor restarts; a deploy pins
        its artifact for the node (holder = node UUID) and unpins it when
        torn down.
        """
        with _flock(self._lock_path(key)):
            self._pin_locked(key, holder)

    def unpin(self, key, holder):
        try:
            os.unlink(os.path.join(self._pin_dir(key),
                                   self._check_holder(holder)))
        except FileNotFoundError:
            pass

    def unpin_all(self, holder):
        """Drop every pin of ``holder`` (e.g. a node being torn down)."""
        self._check_holder(holder)
        for key in os.listdir(self.pins_dir):
            self.unpin(key, holder)

    def holders(self):
        """Every holder with at least one pin."""
        found = set()
        for key in os.listdir(self.pins_dir):
            found.update(self.pins(key))
        return found

    def pins(self, key):
        try:
            return sorted(os.listdir(self._pin_dir(key)))
        except FileNotFoundError:
            return []

    @contextlib.contextmanager
    def pinned(self, key, holder):
        self.pin(key, holder)
        try:
            yield self.lookup(key)
        finally:
            self.unpin(key, holder)

    # --- size and eviction -----------------------------------------------

    @staticmethod
    def _entry_size(path):
        total = 0
        for name in os.listdir(path):
            full = os.path.join(path, name)
            try:
                st = os.stat(full, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if name == ARTIFACT_NAME and stat.S_ISDIR(st.st_mode):
                # A tree: its build recorded what its files hold (walking
                # thousands of files at every eviction would be slow).
                try:
                    with open(os.path.join(path, META_NAME)) as f:
                        total += int(json.load(f).get('size') or 0)
                except (OSError, ValueError, TypeError):
                    pass
            else:
                total += st.st_size
        return total

    def list_entries(self):
        """[(key, size, last_used)] of finished entries."""
        out = []
        for key in os.listdir(self.entries_dir):
            path = os.path.join(self.entries_dir, key)
            try:
                last = os.stat(os.path.join(path, STAMP_NAME)).st_mtime
                size = self._entry_size(path)
            except FileNotFoundError:
                continue
            out.append((key, size, last))
        return out

    def total_size(self):
        return sum(size for _, size, _ in self.list_entries())

    def _in_use(self, key):
        if self.pins(key):
            return True
        try:
            st = os.stat(os.path.join(self._entry_path(key), ARTIFACT_NAME))
        except FileNotFoundError:
            return False
        # A file hard-linked into an HTTP root is in use; a directory
        # (a tree) always has several links and is held by pins only.
        return stat.S_ISREG(st.st_mode) and st.st_nlink > 1

    def remove(self, key):
        """Remove an entry now unless it is in use; True when removed."""
        with _flock(self._lock_path(key), blocking=False) as locked:
            if not locked or self._in_use(key):
                return False
            path = self._entry_path(key)
            if not os.path.isdir(path):
                return False
            trash = tempfile.mkdtemp(prefix=key + '.evict.',
                                     dir=self.work_dir)
            os.rename(path, os.path.join(trash, 'entry'))
        rmtree(trash)
        rmtree(self._pin_dir(key))
        return True

    def evict(self, max_size=None, keep=()):
        """Evict least recently used, unpinned entries down to max_size.

        :param keep: keys not to evict this time.
        :returns: the list of evicted keys.
        """
        limit = self.max_size if max_size is None else max_size
        if limit is None:
            return []
        evicted = []
        with _flock(os.path.join(self.cache_dir, 'evict.lock')):
            entries = sorted(self.list_entries(), key=lambda e: e[2])
            total = sum(e[1] for e in entries)
            for key, size, _ in entries:
                if total <= limit:
                    break
                if key not in keep and self.remove(key):
                    LOG.info('Evicted rootfs artifact %s (%d bytes)',
                             key, size)
                    evicted.append(key)
                    total -= size
            if total > limit:
                LOG.warning('Rootfs artifact cache %(d)s holds %(t)d bytes, '
                            'over its %(l)d byte limit, in entries in use',
                            {'d': self.cache_dir, 't': total, 'l': limit})
        return evicted
