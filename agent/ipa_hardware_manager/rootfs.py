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

"""Stage a container's root filesystem in RAM on the node.

The artifact (see ``bmc_common.protocol``) is downloaded over HTTP into a
tmpfs while its sha256 is computed (receiving in one thread, hashing and
writing in another), then:

* ``erofs`` / ``squashfs``: loop-mounted read-only, with an overlayfs whose
  upper layer is on the same tmpfs, giving a writable root;
* ``tar``: unpacked into the tmpfs (the slow baseline).

``/proc``, ``/sys``, ``/dev``, ``/dev/pts`` and ``/run`` of the agent are
bound into the root.  Everything staged is undone on failure.

Standard library only (plus ``mount``/``umount``/``tar``/``modprobe``), so
that any agent can use it.
"""

import hashlib
import http.client
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

from oslo_log import log

from bmc_common import protocol
from ipa_hardware_manager import rootfs_nfs
from ipa_hardware_manager import rootfs_verity

LOG = log.getLogger(__name__)

#: Where everything is staged; a tmpfs is mounted here.
BASE = '/var/lib/bmc'
STATE_FILE = 'rootfs.json'
CHUNK = 1024 * 1024
#: Chunks received ahead of hashing/writing (bounds the memory used).
QUEUE_CHUNKS = 16
#: tmpfs size limit, as tmpfs understands it.
TMPFS_SIZE = '90%'
HTTP_TIMEOUT = 60
#: Requests one artifact download may take (resuming), and the first pause.
DOWNLOAD_ATTEMPTS = 4
RETRY_DELAY = 1.0
BINDS = ('proc', 'sys', 'dev', 'dev/pts', 'run')

_DIGEST_RE = re.compile(r'^sha256:([0-9a-f]{64})$')
_FS_FOR_FORMAT = {protocol.FORMAT_EROFS: 'erofs',
                  protocol.FORMAT_SQUASHFS: 'squashfs'}


class StagingError(Exception):
    """The rootfs could not be staged; the message says why."""


def _run(*cmd):
    """Run a command, raise StagingError with its stderr on failure."""
    LOG.debug('Running %s', ' '.join(cmd))
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, check=False)
    except OSError as exc:
        raise StagingError('cannot run %s: %s' % (cmd[0], exc)) from exc
    if proc.returncode != 0:
        raise StagingError('%s failed (exit %d): %s' % (
            ' '.join(cmd), proc.returncode,
            (proc.stderr or proc.stdout).strip()[-500:]))
    return proc.stdout


def validate(url, digest, fmt, size=None, rootfs=protocol.ROOTFS_RAMFS,
             nfs=None, verity=None):
    """Check step arguments; return the hex sha256 expected (ramfs) or
    the checked ``nfs`` argument (nfs)."""
    if rootfs not in protocol.ROOTFS_MODES:
        raise StagingError('unknown rootfs mode %r (known: %s)' % (
            rootfs, ', '.join(protocol.ROOTFS_MODES)))
    if rootfs not in protocol.ROOTFS_MODES_SUPPORTED:
        raise StagingError('rootfs mode %r is not supported by this agent '
                           '(supported: %s)' % (
                               rootfs,
                               ', '.join(protocol.ROOTFS_MODES_SUPPORTED)))
    if rootfs == protocol.ROOTFS_NFS:
        if fmt != protocol.FORMAT_TREE:
            raise StagingError('rootfs mode nfs mounts a %r, not a %r' % (
                protocol.FORMAT_TREE, fmt))
        try:
            return rootfs_nfs.check(nfs)
        except rootfs_nfs.NFSError as exc:
            raise StagingError(str(exc)) from exc
    if fmt not in protocol.ARTIFACT_FORMATS:
        raise StagingError('unknown artifact format %r (known: %s)' % (
            fmt, ', '.join(protocol.ARTIFACT_FORMATS)))
    if not isinstance(url, str) or not url.startswith(('http://',
                                                       'https://')):
        raise StagingError('artifact url must be http(s), got %r' % (url,))
    match = _DIGEST_RE.match(digest or '')
    if not match:
        raise StagingError('digest must be "sha256:<64 hex digits>", got %r'
                           % (digest,))
    if size is not None:
        try:
            size = int(size)
        except (TypeError, ValueError):
            raise StagingError('size must be an integer, got %r'
                               % (size,)) from None
        if size < 0:
            raise StagingError('size must not be negative')
    if verity is not None:
        if fmt not in _FS_FOR_FORMAT:
            raise StagingError('verity: a %s artifact is not mounted from '
                               'a block device; only %s are checked by '
                               'dm-verity' % (fmt, ', '.join(_FS_FOR_FORMAT)))
        try:
            rootfs_verity.check(verity)
        except rootfs_verity.VerityError as exc:
            raise StagingError(str(exc)) from exc
    return match.group(1)


def _ensure_target(target, module):
    """Make sure device-mapper knows ``target``, loading its module."""
    try:
        with open('/proc/devices') as f:
            has_dm = any(line.split()[-1:] == ['device-mapper'] for line in f)
    except OSError:
        has_dm = True
    if has_dm and os.path.exists('/sys/module/' + module):
        return
    try:
        _run('modprobe', module)
    except StagingError as exc:
        raise StagingError(
            'the running kernel has no dm-%s support and the module could '
            'not be loaded (is the modules initrd of this kernel '
            'attached?): %s' % (target, exc)) from exc


def _ensure_filesystem(fstype, module=None):
    """Make sure the kernel knows fstype, loading its module (named
    ``module``, default the type's name) if needed."""
    def known():
        try:
            with open('/proc/filesystems') as f:
                return any(line.split()[-1] == fstype
                           for line in f if line.strip())
        except OSError:
            return True  # cannot tell; let mount say
    if known():
        return
    try:
        _run('modprobe', module or fstype)
    except StagingError as exc:
        raise StagingError(
            'the running kernel has no %s support and the module could not '
            'be loaded (is the modules initrd of this kernel attached?): %s'
            % (fstype, exc)) from exc


class _Reader(threading.Thread):
    """Read an HTTP response in chunks into a bounded queue.

    Receiving runs beside hashing and writing (both release the GIL), so
    the network transfer overlaps the verification instead of adding to
    it.  ``None`` marks the end; an exception is passed on as it is.
    """

    def __init__(self, resp, chunks):
        super().__init__(name='bmc-rootfs-reader', daemon=True)
        self.resp = resp
        self.chunks = chunks
        self.stopped = threading.Event()

    def run(self):
        try:
            while not self.stopped.is_set():
                chunk = self.resp.read(CHUNK)
                if not chunk:
                    missing = getattr(self.resp, 'length', None)
                    if missing:
                        raise ConnectionError(
                            'connection closed with %d bytes of the '
                            'response missing' % missing)
                    self.chunks.put(None)
                    return
                self.chunks.put(chunk)
        except Exception as exc:  # noqa: BLE001 - handed to the consumer
            self.chunks.put(exc)


class _Transfer:
    """What a download has received so far, across resumed requests."""

    def __init__(self, out, sha256=True):
        self.out = out
        self.sha256 = sha256
        self.hasher = hashlib.sha256() if sha256 else None
        self.total = 0
        self.spent = {'hash': 0.0, 'write': 0.0}

    def restart(self):
        self.out.seek(0)
        self.out.truncate()
        self.hasher = hashlib.sha256() if self.sha256 else None
        self.total = 0


def _fetch(url, transfer):
    """One request: from ``transfer.total`` on (a Range request) to the
    end.  Raises what the network raised."""
    request = urllib.request.Request(url)
    if transfer.total:
        request.add_header('Range', 'bytes=%d-' % transfer.total)
    reader = None
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as resp:
            if transfer.total and resp.status != 206:
                LOG.warning('%s does not resume (HTTP %s to a Range '
                            'request): downloading it again from the start',
                            url, resp.status)
                transfer.restart()
            chunks = queue.Queue(maxsize=QUEUE_CHUNKS)
            reader = _Reader(resp, chunks)
            reader.start()
            while True:
                chunk = chunks.get()
                if isinstance(chunk, Exception):
                    raise chunk
                if chunk is None:
                    break
                t = time.monotonic()
                if transfer.hasher is not None:
                    transfer.hasher.update(chunk)
                t2 = time.monotonic()
                transfer.out.write(chunk)
                transfer.spent['hash'] += t2 - t
                transfer.spent['write'] += time.monotonic() - t2
                transfer.total += len(chunk)
    finally:
        if reader is not None:
            reader.stopped.set()
            # Unblock a reader waiting on a full queue, then let it end.
            while reader.is_alive():
                try:
                    chunks.get(timeout=0.1)
                except queue.Empty:
                    pass


def _retryable(exc):
    """A dropped link or a restarting server, not an answer to act on."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in (502, 503, 504)
    return isinstance(exc, (urllib.error.URLError, ConnectionError,
                            TimeoutError, http.client.HTTPException))


def download(url, dest, expected_hex, size=None, timings=None):
    """Stream url to dest, checking sha256 (and size); return bytes read.

    ``expected_hex`` None: no whole-file hash (the artifact is checked
    block by block by dm-verity when read); the size is still checked.

    A link that drops or a server that restarts midway costs a retry, not
    the deploy: the transfer resumes where it stopped with a Range request
    (from the start if the server ignores ranges), up to
    ``DOWNLOAD_ATTEMPTS`` requests, ``RETRY_DELAY`` seconds apart and
    doubling.

    :param timings: if a dict, gets ``hash`` and ``write``: seconds spent
        hashing and writing (the verification's share of the download).
    """
    failures = []
    transfer = None
    try:
        with open(dest, 'wb') as out:
            transfer = _Transfer(out, sha256=expected_hex is not None)
            for attempt in range(DOWNLOAD_ATTEMPTS):
                try:
                    _fetch(url, transfer)
                    break
                except Exception as exc:  # noqa: BLE001 - sorted below
                    if not _retryable(exc):
                        raise
                    failures.append('%s after %d bytes' % (exc,
                                                           transfer.total))
                    if attempt + 1 == DOWNLOAD_ATTEMPTS:
                        raise
                    LOG.warning('Download of %s interrupted after %d bytes '
                                '(%s); resuming', url, transfer.total, exc)
                    time.sleep(RETRY_DELAY * 2 ** attempt)
    except (urllib.error.URLError, OSError,
            http.client.HTTPException) as exc:
        what = ('; earlier attempts: %s' % '; '.join(failures[:-1])
                if len(failures) > 1 else '')
        raise StagingError('download of %s failed after %d bytes: %s%s' % (
            url, transfer.total if transfer else 0, exc, what)) from exc
    if timings is not None:
        timings.update({k: round(v, 3) for k, v in transfer.spent.items()})
    if failures:
        LOG.info('Downloaded %s after %d interrupted attempt(s): %s', url,
                 len(failures), '; '.join(failures))
    total = transfer.total
    if size is not None and total != int(size):
        raise StagingError('artifact %s has %d bytes, expected %d' % (
            url, total, int(size)))
    if expected_hex is None:
        return total
    actual = transfer.hasher.hexdigest()
    if actual != expected_hex:
        raise StagingError('artifact %s has digest sha256:%s, expected '
                           'sha256:%s' % (url, actual, expected_hex))
    return total


def measure_raw_transfer(url):
    """Seconds to fetch ``url`` and throw the bytes away: the link's limit.

    A diagnostic for the run report (``staging.raw_transfer``): what the
    same bytes cost when nothing but the network and HTTP is involved.
    """
    start = time.monotonic()
    total = 0
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as resp:
            while True:
                chunk = resp.read(CHUNK)
                if not chunk:
                    break
                total += len(chunk)
    except (urllib.error.URLError, OSError) as exc:
        raise StagingError('raw transfer of %s failed after %d bytes: %s'
                           % (url, total, exc)) from exc
    return round(time.monotonic() - start, 3), total


class Staging:
    """One staged root and what it took to stage it."""

    def __init__(self, base=BASE):
        self.base = base
        self.mounts = []  # mount points, in the order they were mounted
        self.devices = []  # dm-verity devices, closed after the mounts
        self.root = os.path.join(base, 'root')

    def _mount(self, target, *args):
        os.makedirs(target, exist_ok=True)
        _run('mount', *args, target)
        self.mounts.append(target)

    def stage(self, url, digest, fmt, size=None,
              rootfs=protocol.ROOTFS_RAMFS, nfs=None, verity=None):
        checked = validate(url, digest, fmt, size, rootfs, nfs, verity)
        if verity is not None:
            verity = rootfs_verity.check(verity)
        fstype = _FS_FOR_FORMAT.get(fmt)
        start = time.time()
        verify = {}
        extra = {}
        try:
            if fstype:
                _ensure_filesystem(fstype)
            if verity:
                _ensure_target('verity', 'dm_verity')
            if rootfs == protocol.ROOTFS_NFS:
                _ensure_filesystem('nfs4', module='nfsv4')
            if fstype or rootfs == protocol.ROOTFS_NFS:
                _ensure_filesystem('overlay')
            self._mount(self.base, '-t', 'tmpfs', '-o',
                        'mode=0755,size=%s' % TMPFS_SIZE, 'bmc-rootfs')
            lower = os.path.join(self.base, 'lower')
            if rootfs == protocol.ROOTFS_NFS:
                # Nothing crosses the wire before the workload starts but
                # what the mount itself reads.
                nbytes = 0
                os.makedirs(lower, exist_ok=True)
                try:
                    seconds = rootfs_nfs.mount(checked, lower)
                except rootfs_nfs.NFSError as exc:
                    raise StagingError(str(exc)) from exc
                self.mounts.append(lower)
                extra['nfs'] = {'export': '%s:%s' % (checked['server'],
                                                     checked['export']),
                                'mount': seconds}
            else:
                artifact = os.path.join(self.base, 'artifact.' + fmt)
                # With dm-verity, no whole-file hash: blocks are checked
                # when read.
                nbytes = download(url, artifact,
                                  None if verity else checked, size,
                                  timings=verify)
                if verity:
                    tree = artifact + '.verity'
                    nbytes += download(verity['url'], tree, None,
                                       verity['size'])
            downloaded = time.time()
            if fstype or rootfs == protocol.ROOTFS_NFS:
                upper = os.path.join(self.base, 'upper')
                work = os.path.join(self.base, 'work')
                if verity:
                    try:
                        device = rootfs_verity.open_device(
                            artifact, tree, verity['root_hash'])
                    except rootfs_verity.VerityError as exc:
                        raise StagingError(str(exc)) from exc
                    self.devices.append(rootfs_verity.DEVICE_NAME)
                    self._mount(lower, '-t', fstype, '-o', 'ro', device)
                    extra['verify'] = 'dm-verity'
                elif fstype:
                    self._mount(lower, '-t', fstype, '-o', 'ro,loop',
                                artifact)
                    extra['verify'] = 'sha256'
                os.makedirs(upper, exist_ok=True)
                os.makedirs(work, exist_ok=True)
                self._mount(self.root, '-t', 'overlay', '-o',
                            'lowerdir=%s,upperdir=%s,workdir=%s'
                            % (lower, upper, work), 'bmc-root')
            else:
                extra['verify'] = 'sha256'
                os.makedirs(self.root, exist_ok=True)
                _run('tar', '-x', '--numeric-owner', '-p',
                     '-f', artifact, '-C', self.root)
                os.unlink(artifact)  # its content now lives in the root
            for name in BINDS:
                self._mount(os.path.join(self.root, name), '--bind',
                            '/' + name)
            self._copy_resolv_conf()
            mounted = time.time()
        except Exception:
            LOG.exception('Staging %s failed, undoing', url)
            self.teardown()
            raise
        result = {
            'root': self.root,
            'format': fmt,
            'rootfs': rootfs,
            'digest': digest,
            'bytes': nbytes,
            'timings': {'download': round(downloaded - start, 3),
                        'mount': round(mounted - downloaded, 3),
                        'hash': verify.get('hash'),
                        'write': verify.get('write')},
            'stages': [protocol.stage(protocol.STAGE_ROOTFS_STAGED,
                                      start, mounted)],
        }
        result.update(extra)
        self._save(result)
        LOG.info('Staged %(fmt)s rootfs %(digest)s at %(root)s: %(bytes)d '
                 'bytes, download %(dl).2fs, mount %(mnt).2fs',
                 {'fmt': fmt, 'digest': digest, 'root': self.root,
                  'bytes': nbytes, 'dl': result['timings']['download'],
                  'mnt': result['timings']['mount']})
        return result

    def _copy_resolv_conf(self):
        src = '/etc/resolv.conf'
        dst = os.path.join(self.root, 'etc', 'resolv.conf')
        if not os.path.isfile(src) or not os.path.isdir(os.path.dirname(
                dst)):
            return
        try:
            if os.path.islink(dst) or os.path.exists(dst):
                os.unlink(dst)
            shutil.copyfile(src, dst)
        except OSError as exc:
            LOG.warning('Could not copy resolv.conf into the root: %s', exc)

    def _save(self, result):
        record = dict(result, mounts=self.mounts, devices=self.devices)
        with open(os.path.join(self.base, STATE_FILE), 'w') as f:
            json.dump(record, f)

    def teardown(self):
        """Unmount everything staged, in reverse order; forget it."""
        errors = []
        for target in reversed(self.mounts):
            try:
                _run('umount', target)
            except StagingError:
                try:
                    _run('umount', '-l', target)
                except StagingError as exc:
                    errors.append(str(exc))
        self.mounts = []
        for name in reversed(self.devices):
            try:
                rootfs_verity.close(name)
            except rootfs_verity.VerityError as exc:
                errors.append(str(exc))
        self.devices = []
        if errors:
            raise StagingError('could not unmount: %s' % '; '.join(errors))


def load(base=BASE):
    """Return the record of the staged root (dict) or None."""
    try:
        with open(os.path.join(base, STATE_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def teardown(base=BASE):
    """Undo a previous staging recorded under base (if any)."""
    record = load(base)
    if not record:
        return False
    staging = Staging(base)
    staging.mounts = list(record.get('mounts', []))
    staging.devices = list(record.get('devices', []))
    staging.teardown()
    return True
