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
tmpfs (:mod:`.rootfs_download`), checked by its sha256 or, with a
dm-verity tree, block by block when read (:mod:`.rootfs_verity`), then:

* ``erofs`` / ``squashfs``: loop-mounted read-only, with an overlayfs whose
  upper layer is on the same tmpfs, giving a writable root;
* ``tar``: unpacked into the tmpfs (the slow baseline).

``/proc``, ``/sys``, ``/dev``, ``/dev/pts`` and ``/run`` of the agent are
bound into the root.  Everything staged is undone on failure.

Standard library only (plus ``mount``/``umount``/``tar``/``modprobe``), so
that any agent can use it.
"""

import json
import os
import re
import shutil
import subprocess
import time

from oslo_log import log

from bmc_common import protocol
from ipa_hardware_manager import rootfs_download
from ipa_hardware_manager import rootfs_nfs
from ipa_hardware_manager import rootfs_verity

LOG = log.getLogger(__name__)

#: Where everything is staged; a tmpfs is mounted here.
BASE = '/var/lib/bmc'
STATE_FILE = 'rootfs.json'
#: tmpfs size limit, as tmpfs understands it.
TMPFS_SIZE = '90%'
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
                nbytes = rootfs_download.download(
                    url, artifact, None if verity else checked, size,
                    timings=verify)
                if verity:
                    tree = artifact + '.verity'
                    nbytes += rootfs_download.download(
                        verity['url'], tree, None, verity['size'])
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
        except rootfs_download.DownloadError as exc:
            LOG.error('Staging %s failed, undoing: %s', url, exc)
            self.teardown()
            raise StagingError(str(exc)) from exc
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
