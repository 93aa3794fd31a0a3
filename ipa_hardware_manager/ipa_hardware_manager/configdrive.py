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

"""The deploy's configdrive on the node, as cloud images expect it.

Before the workload starts, the agent downloads the ISO the conductor
checked (its sha256 and size are in the start step's arguments) into
RAM, and:

* extracts its files under :data:`BASE` with the reader the conductor
  used (:mod:`bmc_common.configdrive`): regular files and directories
  only, each created new (``O_EXCL | O_NOFOLLOW``) under a directory made
  for them, names that are plain names; the container sees them
  read-only at :data:`bmc_common.protocol.CONFIGDRIVE_PATH`;
* attaches the ISO as a read-only loop device (label ``config-2``), which
  a privileged container sees as cloud-init's ConfigDrive datasource
  expects; best effort, the kernel's ISO 9660 driver only reads it if
  the container mounts it;
* with ``authorized_keys``, appends the public keys of its
  ``meta_data.json`` to ``/root/.ssh/authorized_keys`` in the container's
  root (directory 0700, file 0600, owned by root), paths resolved inside
  the root and the file opened without following a symlink, as
  cloud-init would for root.

The next start (or a new deploy's) removes what the last one left.
"""

import os
import re
import shutil
import subprocess
import time

from oslo_log import log

from ipa_hardware_manager import container_root
from ipa_hardware_manager import oci_spec
from ipa_hardware_manager import rootfs_download
from bmc_common import configdrive as reader
from bmc_common import protocol

LOG = log.getLogger(__name__)

BASE = '/run/bmc-configdrive'
ISO = 'config-2.iso'
FILES = 'files'
DEVICE_FILE = 'device'
#: The largest ISO the agent accepts (the conductor's bound is lower).
MAX_SIZE = 1024 * 1024 * 1024
CHUNK = 1024 * 1024
#: Bytes of an existing authorized_keys read to skip keys it holds.
MAX_AUTHORIZED_KEYS = 1024 * 1024
KEYS_PATH = '/root/.ssh/authorized_keys'
LOSETUP = 'losetup'
_SHA256 = re.compile(r'^[0-9a-f]{64}$')


class ConfigDriveError(Exception):
    """The configdrive could not be given to the container; says why."""


def validate(args):
    """The start step's ``configdrive`` argument, checked."""
    if not isinstance(args, dict):
        raise ConfigDriveError('configdrive must be an object, got %r'
                               % (args,))
    url, digest, size = args.get('url'), args.get('sha256'), args.get('size')
    if not isinstance(url, str) or not url.startswith(('http://',
                                                       'https://')):
        raise ConfigDriveError('configdrive url must be an HTTP(S) URL, '
                               'got %r' % (url,))
    if not isinstance(digest, str) or not _SHA256.match(digest):
        raise ConfigDriveError('configdrive sha256 must be 64 hex digits, '
                               'got %r' % (digest,))
    if (not isinstance(size, int) or isinstance(size, bool)
            or not 0 < size <= MAX_SIZE):
        raise ConfigDriveError('configdrive size must be 1 to %d bytes, '
                               'got %r' % (MAX_SIZE, size))
    if not isinstance(args.get('authorized_keys', False), bool):
        raise ConfigDriveError('configdrive authorized_keys must be true or '
                               'false')


def prepare(args, root, base=None):
    """Download, check and extract the configdrive; its keys into
    ``root``; the loop device.

    :returns: ``(the directory of its files, what was done)``.
    :raises ConfigDriveError: naming what went wrong.
    """
    validate(args)
    start = time.monotonic()
    base = base or BASE
    release(base)
    os.makedirs(base, mode=0o700)
    iso = os.path.join(base, ISO)
    try:
        rootfs_download.download(args['url'], iso, args['sha256'],
                                 args['size'])
    except rootfs_download.DownloadError as exc:
        raise ConfigDriveError('configdrive: %s' % exc) from None
    files = os.path.join(base, FILES)
    try:
        with open(iso, 'rb') as f:
            image, entries = reader.check(f, args['size'])
            keys = reader.public_keys(image, entries)
            extract(image, entries, files)
    except reader.ConfigDriveError as exc:
        raise ConfigDriveError('configdrive: %s' % exc) from None
    added = 0
    if keys and args.get('authorized_keys'):
        added = authorized_keys(root, keys)
    device = attach(iso, base)
    return files, {'files': sum(1 for e in entries if not e.is_dir),
                   'bytes': args['size'], 'device': device,
                   'authorized_keys': added,
                   'seconds': round(time.monotonic() - start, 3)}


def _inside(target, path):
    full = os.path.normpath(os.path.join(target, path))
    if not full.startswith(target + os.sep):
        raise ConfigDriveError('configdrive: %r leads out of its directory'
                               % path)
    for part in path.split('/'):
        if part in ('', '.', '..') or '\0' in part:
            raise ConfigDriveError('configdrive: %r is not a plain path'
                                   % path)
    return full


def extract(image, entries, target):
    """The files of ``entries`` under ``target`` (made new): directories
    0755, files 0644, nothing followed or replaced."""
    os.mkdir(target, 0o755)
    for entry in entries:
        path = _inside(target, entry.path)
        if entry.is_dir:
            os.mkdir(path, 0o755)
            continue
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                     | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, 'wb') as out:
            done = 0
            while done < entry.size:
                n = min(CHUNK, entry.size - done)
                out.write(image.read_file(
                    reader.Entry(entry.path, False, entry.offset + done, n)))
                done += n


def _dir_in_root(root, path):
    """``path`` inside ``root``, a directory owned by root, mode 0700
    (made if missing)."""
    # (Resolved: each component that exists is a directory of the root,
    # not a symlink; those that do not are made.)
    real = container_root.resolve_in_root(root, path)
    if not os.path.isdir(real):
        if os.path.lexists(real):
            raise ConfigDriveError('%s in the image is not a directory'
                                   % path)
        os.makedirs(real, 0o700)
    os.chown(real, 0, 0, follow_symlinks=False)
    os.chmod(real, 0o700)
    return real


def authorized_keys(root, keys):
    """Append ``keys`` not yet there to /root/.ssh/authorized_keys in
    ``root``; how many were added."""
    try:
        _dir_in_root(root, '/root')
        ssh = _dir_in_root(root, '/root/.ssh')
        # A symlink there is refused (ELOOP), not followed.
        fd = os.open(os.path.join(ssh, 'authorized_keys'),
                     os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
                     0o600)
    except (OSError, oci_spec.SpecError) as exc:
        raise ConfigDriveError('cannot write %s in the container\'s root: '
                               '%s' % (KEYS_PATH, exc)) from None
    with os.fdopen(fd, 'r+b') as f:
        os.fchown(f.fileno(), 0, 0)
        os.fchmod(f.fileno(), 0o600)
        f.seek(0)
        present = f.read(MAX_AUTHORIZED_KEYS)
        have = {line.strip() for line in present.decode(
            'utf-8', 'replace').splitlines()}
        new = [k for k in keys if k not in have]
        if new:
            text = ''.join(k + '\n' for k in new)
            if present and not present.endswith(b'\n'):
                text = '\n' + text
            f.write(text.encode())
    return len(new)


def _losetup(*args):
    cmd = [LOSETUP, *args]
    # argv list, no shell: losetup with the agent's own paths.
    return subprocess.run(cmd, stdin=subprocess.DEVNULL,  # noqa: S603
                          capture_output=True, text=True, timeout=30,
                          check=False)


def attach(iso, base):
    """A read-only loop device of ``iso``, or None (logged)."""
    try:
        done = _losetup('--find', '--show', '--read-only', iso)
    except (OSError, subprocess.SubprocessError) as exc:
        LOG.warning('The configdrive is not attached as a block device: %s',
                    exc)
        return None
    device = done.stdout.strip()
    if done.returncode != 0 or not device.startswith('/dev/'):
        LOG.warning('The configdrive is not attached as a block device: '
                    'losetup failed (exit %d): %s', done.returncode,
                    done.stderr.strip()[-300:])
        return None
    with open(os.path.join(base, DEVICE_FILE), 'w') as f:
        f.write(device)
    return device


def release(base=None):
    """Detach and remove what the last start left."""
    base = base or BASE
    try:
        with open(os.path.join(base, DEVICE_FILE)) as f:
            device = f.read().strip()
    except OSError:
        device = None
    if device and device.startswith('/dev/loop'):
        try:
            _losetup('--detach', device)
        except (OSError, subprocess.SubprocessError) as exc:
            LOG.warning('Cannot detach %s: %s', device, exc)
    shutil.rmtree(base, ignore_errors=True)


def mount(files):
    """The OCI mount of the files, read-only."""
    return {'destination': protocol.CONFIGDRIVE_PATH, 'type': 'bind',
            'source': files,
            'options': ['bind', 'ro', 'nosuid', 'nodev', 'noexec']}
