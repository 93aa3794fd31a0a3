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

"""Several initrds joined into one lz4 archive (what a kexec boots).

The kernel unpacks an initrd made of several archives one after the
other, as iPXE lays out several initrds, each compressed or not.  The
agent ramdisk is the largest part, and Ironic's image cache keeps it
unpacked (a few hundred MB for the node to fetch and check); compressed
again, the kexec'd kernel must unpack it before ``/init``: under QEMU TCG
zstd took 7.3 s for the agent ramdisk, lz4 5.0 to 5.7 s.

But lz4's legacy format, the only lz4 format the kernel reads, has no
end mark: the kernel's decoder reads it to the end of the initrd and
fails on any archive after it ("Initramfs unpacking failed: Decoding
failed"; the modules initrd was lost that way).  So every part is
unpacked (plain cpio, gzip or zstd) and the whole is compressed as ONE
lz4 stream, each cpio archive starting 4-byte aligned in it.

A compressed part may be the tenant's (the modules initrd of a kernel
named by a Glance image), and unpacking it is the conductor's work now,
not the node's: a part that unpacks past :data:`MAX_RATIO` times its
size is refused, and so are parts that unpack past :data:`MAX_UNPACKED`
bytes together (a decompression bomb would hold a conductor worker and
the node's lock; the ratio alone lets a 1 GiB part unpack to 50 GiB).
The deploy then boots the node through its firmware, whose kernel
unpacks the files itself.
"""

import gzip
import os
import subprocess

from ironic.common import exception
from ironic.common.i18n import _

#: lz4's legacy format (the kernel's), high compression: the agent
#: ramdisk, 230 MB, to 94 MB in 2.5 s (once per ramdisk and modules).
LZ4 = ('lz4', '-l', '-4', '-q', '-f')
MAGIC_CPIO = (b'070701', b'070702')
MAGIC_GZIP = b'\x1f\x8b'
MAGIC_ZSTD = b'\x28\xb5\x2f\xfd'
CHUNK = 1 << 20
#: The most a gzip or zstd part may unpack to, in times its own size: a
#: cpio of kernel modules or an agent ramdisk unpacks to 3 to 4 times.
MAX_RATIO = 50
#: ... but any part may unpack to this much (a small part's ratio says
#: little, and 64 MiB cost the conductor nothing).
MIN_LIMIT = 64 << 20
#: The most all parts together (plain ones too) may unpack to, whatever
#: their ratio: lz4 packs about 90 MB a second (above), so this bounds
#: the work under the node's lock to about a minute, where the ratio
#: alone allowed 50 GiB for a 1 GiB part.  An honest pack is far below:
#: the agent ramdisk unpacks to about 230 MB and a kernel's modules to a
#: few hundred MB, and the kexec'd kernel must hold all of it in the
#: node's RAM before ``/init``.
MAX_UNPACKED = 4 << 30


class PackError(exception.IronicException):
    _msg_fmt = _('Cannot pack the initrds for a kexec: %(reason)s')


def _stream_of(cmd, path):
    """Chunks of what ``cmd`` prints for ``path`` (argv list, no shell)."""
    proc = subprocess.Popen([*cmd, path], stdout=subprocess.PIPE,  # noqa: S603
                            stderr=subprocess.PIPE)
    try:
        yield from iter(lambda: proc.stdout.read(CHUNK), b'')
    except GeneratorExit:
        proc.kill()         # not read to its end (_bounded): not a failure
        raise
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode(errors='replace').strip()
        proc.stderr.close()
        status = proc.wait()
    if status != 0:
        raise PackError(reason=_('%(cmd)s %(path)s failed: %(err)s')
                        % {'cmd': cmd[0], 'path': path, 'err': err})


def _gzip_stream(path):
    try:
        with gzip.open(path, 'rb') as f:
            yield from iter(lambda: f.read(CHUNK), b'')
    except (OSError, EOFError) as exc:
        raise PackError(reason=_('%(path)s: %(err)s')
                        % {'path': path, 'err': exc}) from exc


def _plain_stream(path):
    with open(path, 'rb') as f:
        yield from iter(lambda: f.read(CHUNK), b'')


def _bounded(chunks, path):
    """``chunks`` of a compressed part, up to :data:`MAX_RATIO` times the
    part's size."""
    limit = max(os.path.getsize(path) * MAX_RATIO, MIN_LIMIT)
    seen = 0
    for chunk in chunks:
        seen += len(chunk)
        if seen > limit:
            chunks.close()
            raise PackError(reason=_(
                '%(path)s unpacks to more than %(ratio)d times its size '
                '(past %(limit)d bytes): refused') % {
                    'path': path, 'ratio': MAX_RATIO, 'limit': limit})
        yield chunk


def unpacked(path):
    """The cpio archive(s) in ``path`` (plain, gzip or zstd), in chunks.

    :raises: PackError for any other content (an xz, lz4 or bzip2
        initrd): it cannot be joined with the others; or, while the
        chunks are read, for a compressed part that unpacks past
        :data:`MAX_RATIO` times its size.
    """
    with open(path, 'rb') as f:
        head = f.read(6)
    if head.startswith(MAGIC_CPIO):
        return _plain_stream(path)
    if head.startswith(MAGIC_GZIP):
        return _bounded(_gzip_stream(path), path)
    if head.startswith(MAGIC_ZSTD):
        return _bounded(_stream_of(('zstd', '-dcq', '--'), path), path)
    raise PackError(reason=_('%(path)s is neither a cpio archive nor a '
                             'gzip or zstd one (it starts with %(head)r)')
                    % {'path': path, 'head': head})


def pack(paths, out):
    """Write the initrds ``paths``, in order, as one lz4 archive ``out``.

    :returns: the bytes of the cpio stream packed (unpacked size).
    :raises: PackError (a part that is not cpio, gzip or zstd; parts
        that unpack past :data:`MAX_UNPACKED` bytes together; lz4 missing
        or failing).
    """
    try:
        proc = subprocess.Popen([*LZ4, '-', out],  # noqa: S603
                                stdin=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        raise PackError(reason=_('cannot run lz4 (Debian package lz4 on '
                                 'the conductor host): %s') % exc) from exc
    written = 0
    try:
        for path in paths:
            pad = -written % 4
            proc.stdin.write(b'\0' * pad)
            written += pad
            chunks = unpacked(path)
            try:
                for chunk in chunks:
                    written += len(chunk)
                    if written > MAX_UNPACKED:
                        raise PackError(reason=_(
                            'the initrds unpack to more than %(limit)d '
                            'bytes together (past it in %(path)s): '
                            'refused') % {'limit': MAX_UNPACKED,
                                          'path': path})
                    proc.stdin.write(chunk)
            finally:
                chunks.close()      # (a zstd part's process ends)
    except BrokenPipeError:
        pass        # lz4 died: its exit status and message tell why
    except BaseException:
        proc.kill()
        raise
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        err = proc.stderr.read().decode(errors='replace').strip()
        proc.stderr.close()
        status = proc.wait()
    if status != 0:
        raise PackError(reason=_('lz4 exited %(status)d: %(err)s')
                        % {'status': status, 'err': err})
    return written
