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

"""Stage a container's root filesystem on the node, in one of the modes of
``bmc_common.protocol.ROOTFS_MODES``; a tmpfs at ``BASE`` holds it all.

* ``ramfs``: the artifact is downloaded whole (:mod:`.rootfs_download`),
  checked by its sha256 or, with a dm-verity tree, block by block when
  read (:mod:`.rootfs_verity`);
* ``stream``: only the hash tree is downloaded; the artifact's blocks
  arrive on demand and then in the background (:mod:`.rootfs_stream`),
  checked by dm-verity;
* ``nfs``: the image's tree is mounted from the conductor's read-only
  export (:mod:`.rootfs_nfs`).

An ``erofs`` / ``squashfs`` image is mounted read-only under an overlayfs
whose upper layer is on the tmpfs, giving a writable root; a ``tar`` is
unpacked into the tmpfs (the slow baseline).  ``/proc``, ``/sys``,
``/dev``, ``/dev/pts`` and ``/run`` of the agent are bound into the root.
Everything staged is undone on failure.
"""

import json
import os
import subprocess
import time

from oslo_log import log

from bmc_common import protocol
from ipa_hardware_manager import container_etc
from ipa_hardware_manager import rootfs_args
from ipa_hardware_manager import rootfs_download
from ipa_hardware_manager import rootfs_nfs
from ipa_hardware_manager import rootfs_stream
from ipa_hardware_manager import rootfs_verity

LOG = log.getLogger(__name__)

#: Where everything is staged; a tmpfs is mounted here.
BASE = '/var/lib/bmc'
STATE_FILE = 'rootfs.json'
#: tmpfs size limit, as tmpfs understands it.
TMPFS_SIZE = '90%'

_FS_FOR_FORMAT = rootfs_args.FS_FOR_FORMAT


#: (Defined with the arguments' checks, raised here too.)
StagingError = rootfs_args.StagingError
validate = rootfs_args.validate


def _run(*cmd):
    """Run a command, raise StagingError with its stderr on failure."""
    LOG.debug('Running %s', ' '.join(cmd))
    try:
        # argv list, no shell: mount tools with paths the agent chose.
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,  # noqa: S603
                              capture_output=True, text=True, check=False)
    except OSError as exc:
        raise StagingError('cannot run %s: %s' % (cmd[0], exc)) from exc
    if proc.returncode != 0:
        raise StagingError('%s failed (exit %d): %s' % (
            ' '.join(cmd), proc.returncode,
            (proc.stderr or proc.stdout).strip()[-500:]))
    return proc.stdout


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


def _ensure_nbd():
    """Make sure the kernel has NBD devices, loading ``nbd`` if needed."""
    if os.path.exists('/sys/block/nbd0'):
        return
    try:
        _run('modprobe', 'nbd')
    except StagingError as exc:
        raise StagingError(
            'the running kernel has no NBD support and the module could '
            'not be loaded (is the modules initrd of this kernel '
            'attached?): %s' % exc) from exc


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
    """One staged root and what it took to stage it.

    Undone in the reverse order of its layers: the mounts of the root,
    then the dm-verity device, then the stream feeding it, then the
    tmpfs that held it all (``outer``).
    """

    def __init__(self, base=BASE):
        self.base = base
        self.outer = []  # tmpfs mounts that hold the artifact and cache
        self.stream = None  # rootfs_stream.Stream feeding the device
        self.devices = []  # dm-verity devices
        self.mounts = []  # mount points of the root, in mount order
        self.root = os.path.join(base, 'root')

    def _mount(self, target, *args, outer=False):
        os.makedirs(target, exist_ok=True)
        _run('mount', *args, target)
        (self.outer if outer else self.mounts).append(target)

    def stage(self, url, digest, fmt, size=None,
              rootfs=protocol.ROOTFS_RAMFS, nfs=None, verity=None,
              stream=None):
        checked = validate(url, digest, fmt, size, rootfs, nfs, verity,
                           stream)
        if verity is not None:
            verity = rootfs_verity.check(verity)
        if rootfs == protocol.ROOTFS_STREAM:
            stream = rootfs_stream.check(stream)
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
            if rootfs == protocol.ROOTFS_STREAM:
                _ensure_nbd()
            if fstype or rootfs == protocol.ROOTFS_NFS:
                _ensure_filesystem('overlay')
            self._mount(self.base, '-t', 'tmpfs', '-o',
                        'mode=0755,size=%s' % TMPFS_SIZE, 'bmc-rootfs',
                        outer=True)
            lower = os.path.join(self.base, 'lower')
            artifact = os.path.join(self.base, 'artifact.' + fmt)
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
            elif rootfs == protocol.ROOTFS_STREAM:
                # Only the hash tree is fetched whole; the artifact's
                # blocks come when read.
                tree = artifact + '.verity'
                nbytes = rootfs_download.download(
                    verity['url'], tree, None, verity['size'])
                artifact = self._start_stream(url, int(size), stream)
            else:
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
            # No binds of the agent's /proc, /sys, /dev or /run into the
            # root: crun mounts the container's own, resolving their
            # places inside the root.  (A bind made here followed the
            # image's symlinks in the agent's namespace: an image whose
            # /proc pointed into its own tree got the node's procfs
            # there, unmasked.)
            self._copy_resolv_conf()
            if self.stream:
                # What the mount read on demand crossed the wire too.
                nbytes += rootfs_stream.cached_bytes(self.base)
                extra['stream'] = self._start_background(stream)
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

    def _start_stream(self, url, size, stream):
        """The artifact as a block device fed on demand; its path."""
        cache = os.path.join(self.base, rootfs_stream.CACHE_DIR)
        self._mount(cache, '-t', 'tmpfs', '-o', 'mode=0700,size=%d' %
                    rootfs_stream.cache_tmpfs_size(size, stream['cache_max']),
                    'bmc-stream-cache', outer=True)
        self.stream = rootfs_stream.Stream(self.base, url, size,
                                           stream['cache_max'])
        try:
            return self.stream.start()
        except rootfs_stream.StreamError as exc:
            self.stream = None
            raise StagingError('cannot stream %s: %s' % (url, exc)) from exc

    def _start_background(self, stream):
        """Fetch the rest in the background, unless the cache cannot hold
        it all; return the report's ``stream`` section so far."""
        size = self.stream.size
        local = not stream['cache_max'] or stream['cache_max'] >= size
        section = {'device': self.stream.device,
                   'cache_max': stream['cache_max'],
                   'background_rate': stream['rate'],
                   'fully_local': False}
        if local:
            rootfs_stream.start_hydrator(self.base, self.stream.device,
                                         size, stream['rate'])
        else:
            section['not_local_reason'] = (
                'the block cache is bounded to %d bytes, less than the '
                'image (%d bytes): cold blocks are read from the network'
                % (stream['cache_max'], size))
            rootfs_stream.record_no_background(
                self.base, size, section['not_local_reason'])
        return section

    def _copy_resolv_conf(self):
        container_etc.copy_resolv_conf(self.root)

    def _save(self, result):
        record = dict(result, outer=self.outer, mounts=self.mounts,
                      devices=self.devices,
                      stream_device=self.stream.record()
                      if self.stream else None)
        with open(os.path.join(self.base, STATE_FILE), 'w') as f:
            json.dump(record, f)

    def teardown(self):
        """Undo everything staged, innermost first; forget it."""
        errors = []
        rootfs_stream.stop_hydrator()

        def unmount(targets):
            for target in reversed(targets):
                try:
                    _run('umount', target)
                except StagingError:
                    try:
                        _run('umount', '-l', target)
                    except StagingError as exc:
                        errors.append(str(exc))

        unmount(self.mounts)
        self.mounts = []
        for name in reversed(self.devices):
            try:
                rootfs_verity.close(name)
            except rootfs_verity.VerityError as exc:
                errors.append(str(exc))
        self.devices = []
        if self.stream:
            try:
                self.stream.stop()
            except rootfs_stream.StreamError as exc:
                errors.append(str(exc))
            self.stream = None
        unmount(self.outer)
        self.outer = []
        if errors:
            raise StagingError('could not undo the staging: %s'
                               % '; '.join(errors))


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
    staging.outer = list(record.get('outer', []))
    staging.mounts = list(record.get('mounts', []))
    staging.devices = list(record.get('devices', []))
    stream = record.get('stream_device')
    if stream:
        staging.stream = rootfs_stream.Stream(base, stream['url'],
                                              stream['size'],
                                              stream.get('cache_max'))
        staging.stream.device = stream['device']
    staging.teardown()
    return True
