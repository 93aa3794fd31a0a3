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


"""dm-verity hash trees of rootfs artifacts.

``veritysetup format`` (cryptsetup-bin) builds the hash tree of an erofs
or squashfs artifact into a file beside it, with a superblock that
records the salt and block sizes.  The node needs the tree and the root
hash only: the kernel checks every block it reads against the tree, and
the tree against the root hash, so neither the artifact nor the tree has
to be hashed whole before use, and a corrupted block fails its read.

The root hash is the trust anchor: it travels in the staging step's
arguments (the authenticated agent API), never next to the files.
"""

import os
import re
import subprocess

from oslo_log import log

from ironic_bmc.image import exceptions as exc

LOG = log.getLogger(__name__)

ALGORITHM = 'sha256'
BLOCK_SIZE = 4096
VERITYSETUP = 'veritysetup'
_FIELD_RE = re.compile(r'^(Root hash|Salt|Hash algorithm|Data blocks|'
                       r'Data block size|Hash block size):\s*(\S+)\s*$',
                       re.M)


def build(data, out):
    """Write the hash tree of ``data`` to ``out``; return its parameters.

    :returns: ``{"root_hash", "salt", "algorithm", "data_blocks",
        "data_block_size", "hash_block_size", "size"}``
    :raises: ArtifactBuildError naming the tool or the reason.
    """
    size = os.path.getsize(data)
    if size % BLOCK_SIZE:
        raise exc.ArtifactBuildError(
            format='verity', reason=f'{data} has {size} bytes, not a '
                                    f'multiple of {BLOCK_SIZE}')
    cmd = [VERITYSETUP, 'format', f'--hash={ALGORITHM}',
           f'--data-block-size={BLOCK_SIZE}',
           f'--hash-block-size={BLOCK_SIZE}', data, out]
    LOG.debug('Running %s', ' '.join(cmd))
    try:
        # argv list, no shell: veritysetup format on our paths.
        proc = subprocess.run(cmd, capture_output=True, text=True,  # noqa: S603
                              stdin=subprocess.DEVNULL, check=False)
    except OSError as e:
        raise exc.ArtifactBuildError(
            format='verity',
            reason=f'cannot run {VERITYSETUP} (Debian package '
                   f'cryptsetup-bin), needed for [container]rootfs_verity: '
                   f'{e}')
    if proc.returncode != 0:
        raise exc.ArtifactBuildError(
            format='verity', reason=f'{VERITYSETUP} format exited with '
                                    f'{proc.returncode}: '
                                    f'{proc.stderr.strip()[-1000:]}')
    fields = dict(_FIELD_RE.findall(proc.stdout))
    if not re.match(r'^[0-9a-f]{64}$', fields.get('Root hash', '')):
        raise exc.ArtifactBuildError(
            format='verity', reason=f'{VERITYSETUP} format printed no root '
                                    f'hash: {proc.stdout[-500:]!r}')
    os.chmod(out, 0o644)
    return {
        'root_hash': fields['Root hash'],
        'salt': fields.get('Salt'),
        'algorithm': fields.get('Hash algorithm', ALGORITHM),
        'data_blocks': int(fields.get('Data blocks', size // BLOCK_SIZE)),
        'data_block_size': int(fields.get('Data block size', BLOCK_SIZE)),
        'hash_block_size': int(fields.get('Hash block size', BLOCK_SIZE)),
        'size': os.path.getsize(out),
    }
