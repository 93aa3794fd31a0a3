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


"""dm-verity on the node: every block of the rootfs checked when read.

The conductor builds the artifact's hash tree (``veritysetup format``,
superblock included) and passes its root hash in the staging step's
arguments.  ``veritysetup open`` maps the downloaded artifact through the
kernel's dm-verity target; the root is mounted from the mapped device.
A block whose hash does not match fails its read with EIO and the device
is marked corrupted, which :func:`status` reports.

Needs ``veritysetup`` (cryptsetup-bin) and the ``dm_verity`` module.
"""

import os
import re
import subprocess

from oslo_log import log

LOG = log.getLogger(__name__)

#: The device-mapper name of the staged root.
DEVICE_NAME = 'bmc-rootfs'
_HEX64 = re.compile(r'^[0-9a-f]{64}$')


class VerityError(Exception):
    """dm-verity could not be set up; the message says why."""


def check(verity, artifact_url=None):
    """Validate the step's ``verity`` argument; return it normalized."""
    if not isinstance(verity, dict):
        raise VerityError('verity must be an object with root_hash, url '
                          'and size, got %r' % (verity,))
    root_hash = verity.get('root_hash')
    if not isinstance(root_hash, str) or not _HEX64.match(root_hash):
        raise VerityError('verity.root_hash must be 64 hex digits (a '
                          'sha256 root hash), got %r' % (root_hash,))
    url = verity.get('url')
    if not isinstance(url, str) or not url.startswith(('http://',
                                                       'https://')):
        raise VerityError('verity.url must be http(s), got %r' % (url,))
    try:
        size = int(verity.get('size'))
    except (TypeError, ValueError):
        raise VerityError('verity.size must be an integer, got %r'
                          % (verity.get('size'),)) from None
    if size <= 0:
        raise VerityError('verity.size must be positive, got %d' % size)
    return {'root_hash': root_hash, 'url': url, 'size': size}


def _run(*cmd):
    LOG.debug('Running %s', ' '.join(cmd))
    # libdevmapper creates the device node itself instead of waiting for
    # udev to confirm it: a ramdisk without device-mapper's udev rules
    # would otherwise leave veritysetup waiting forever.
    env = dict(os.environ, DM_DISABLE_UDEV='1')
    try:
        # argv list, no shell: veritysetup with the conductor's hash.
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, env=env,  # noqa: S603
                              capture_output=True, text=True, check=False)
    except OSError as exc:
        raise VerityError('cannot run %s (is cryptsetup-bin in the agent '
                          'ramdisk?): %s' % (cmd[0], exc)) from exc
    return proc


def open_device(data, hash_tree, root_hash, name=DEVICE_NAME):
    """Map ``data`` through dm-verity; return the device path.

    ``veritysetup`` attaches read-only loop devices for the files itself
    (and frees them when the mapping is closed).  A tree that does not
    match the root hash is refused here.
    """
    proc = _run('veritysetup', 'open', data, name, hash_tree, root_hash)
    if proc.returncode != 0:
        raise VerityError(
            'dm-verity refused the rootfs artifact (root hash %s): %s'
            % (root_hash, (proc.stderr or proc.stdout).strip()[-500:]))
    return '/dev/mapper/' + name


def close(name=DEVICE_NAME):
    proc = _run('veritysetup', 'close', name)
    if proc.returncode != 0:
        raise VerityError('cannot close dm-verity device %s: %s' % (
            name, (proc.stderr or proc.stdout).strip()[-500:]))


def status(name=DEVICE_NAME):
    """``verified``, ``corrupted``, or None when there is no such device
    (or no veritysetup)."""
    try:
        proc = _run('veritysetup', 'status', name)
    except VerityError:
        return None
    if proc.returncode != 0:
        return None
    match = re.search(r'^\s*status:\s*(\S+)', proc.stdout, re.M)
    if not match:
        return None
    # "verified" or "corrupted" (cryptsetup 2.x).
    return match.group(1)


def integrity_problem(name=DEVICE_NAME):
    """A sentence for the run report if the root had a corrupted block."""
    if status(name) == 'corrupted':
        return ('integrity: dm-verity found a corrupted block of the rootfs '
                'artifact (it does not match the root hash the conductor '
                'gave); the read failed and nothing of it was served')
    return None
