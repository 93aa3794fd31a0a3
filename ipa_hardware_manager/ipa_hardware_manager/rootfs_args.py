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

"""The arguments of the staging step, checked before anything is staged.

What the conductor sends (``bmc_stage_rootfs``): the rootfs mode, the
artifact's URL, digest, format and size, and the mode's own section
(nfs, stream, verity).  Each is checked against the protocol; a bad one
is a :class:`StagingError` naming it, and nothing is mounted or
downloaded.
"""

import re

from bmc_common import protocol
from ipa_hardware_manager import rootfs_nfs
from ipa_hardware_manager import rootfs_stream
from ipa_hardware_manager import rootfs_verity

_DIGEST_RE = re.compile(r'^sha256:([0-9a-f]{64})$')
#: Artifact formats mounted from a block device, and their filesystems.
FS_FOR_FORMAT = {protocol.FORMAT_EROFS: 'erofs',
                 protocol.FORMAT_SQUASHFS: 'squashfs'}


class StagingError(Exception):
    """The rootfs could not be staged; the message says why."""


def validate(url, digest, fmt, size=None, rootfs=protocol.ROOTFS_RAMFS,
             nfs=None, verity=None, stream=None):
    """Check step arguments; return the hex sha256 expected (ramfs,
    stream) or the checked ``nfs`` argument (nfs)."""
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
    if rootfs == protocol.ROOTFS_STREAM:
        if fmt not in FS_FOR_FORMAT or verity is None or size is None:
            raise StagingError(
                'rootfs mode stream needs a %s artifact, its size and its '
                'dm-verity tree (the blocks cannot be hashed before they '
                'are used)' % ' or '.join(FS_FOR_FORMAT))
        try:
            rootfs_stream.check(stream)
        except rootfs_stream.StreamError as exc:
            raise StagingError(str(exc)) from exc
    if verity is not None:
        if fmt not in FS_FOR_FORMAT:
            raise StagingError('verity: a %s artifact is not mounted from '
                               'a block device; only %s are checked by '
                               'dm-verity' % (fmt, ', '.join(FS_FOR_FORMAT)))
        try:
            rootfs_verity.check(verity)
        except rootfs_verity.VerityError as exc:
            raise StagingError(str(exc)) from exc
    return match.group(1)
