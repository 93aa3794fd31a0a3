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

"""A kernel's gcov profile, as a node returns it and a build consumes it.

The node's agent reads every ``.gcda`` file under
``/sys/kernel/debug/gcov`` (with ``read`` until EOF, as ``cat`` does: the
files report size 0) into a tar whose member names are their paths under
that directory: ``<object tree of the build>/kernel/fork.gcda``.  Nothing
in it is trusted: :func:`check` refuses anything but regular ``.gcda``
files under one object tree, within bounds, before a byte is written,
and :func:`extract` puts them at their paths relative to the new object
tree, where ``gcc -fprofile-use`` looks for them.
"""

import io
import os
import posixpath
import re
import tarfile

#: The profile of one run holds at most this many files ...
MAX_FILES = 50000
#: ... of at most this size each (a .gcda of the biggest object of a
#: kernel is a few hundred KiB).
MAX_FILE_BYTES = 16 * 1024 * 1024

#: The object tree of a build this service made, as the kernel names it.
_OBJTREE = re.compile(r'^(?P<prefix>(?:[^/]+/)*builds/'
                      r'(?P<build>[0-9a-f]{16,64})/obj)/(?P<rel>.+\.gcda)$')


class ProfileError(Exception):
    """The profile cannot be used; the message says why."""


def check(tar, max_bytes):
    """Check a profile tar; return ``(build id, files, bytes)``.

    :param tar: an open :class:`tarfile.TarFile`.
    :raises: ProfileError naming the first member that is refused.
    """
    builds, files, total = set(), 0, 0
    for member in tar:
        name = member.name
        if not member.isfile():
            raise ProfileError('%r is not a regular file' % name[:200])
        norm = posixpath.normpath(name)
        if (name.startswith('/') or norm != name
                or '..' in name.split('/')):
            raise ProfileError('%r is not a plain relative path' % name[:200])
        match = _OBJTREE.match(name)
        if not match:
            raise ProfileError(
                '%r is not the .gcda file of an object of a kernel this '
                'service built (builds/<id>/obj/...)' % name[:200])
        if member.size > MAX_FILE_BYTES:
            raise ProfileError('%r is %d bytes, more than a .gcda file can '
                               'be (%d)' % (name[:200], member.size,
                                            MAX_FILE_BYTES))
        builds.add(match.group('build'))
        files += 1
        total += member.size
        if files > MAX_FILES or total > max_bytes:
            raise ProfileError('the profile holds more than %d files or %d '
                               'bytes' % (MAX_FILES, max_bytes))
    if not files:
        raise ProfileError('the profile holds no .gcda file: the kernel '
                           'counted nothing (was it built with the gcov '
                           'variant?)')
    if len(builds) != 1:
        raise ProfileError('the profile mixes the objects of several '
                           'kernel builds: %s' % ', '.join(sorted(builds)))
    return builds.pop(), files, total


def extract(tar, objtree, max_bytes=2 ** 31):
    """Write the ``.gcda`` files at their paths under ``objtree``.

    :returns: the number of files written.
    :raises: ProfileError (see :func:`check`); nothing is written then.
    """
    check(tar, max_bytes)
    written = 0
    for member in tar.getmembers():
        rel = _OBJTREE.match(member.name).group('rel')
        dest = os.path.join(objtree, *rel.split('/'))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        source = tar.extractfile(member)
        with open(dest, 'wb') as f:
            f.write(source.read(MAX_FILE_BYTES + 1))
        written += 1
    return written


def open_tar(path):
    """Open a profile tar (plain or compressed).

    :raises: ProfileError if it is not a tar.
    """
    try:
        return tarfile.open(path)
    except (tarfile.TarError, OSError) as exc:
        raise ProfileError('%s is not a profile tar: %s' % (path, exc)) \
            from None


def open_tar_bytes(data):
    """Open a profile tar held in memory.

    :raises: ProfileError if it is not a tar.
    """
    try:
        return tarfile.open(fileobj=io.BytesIO(data))
    except tarfile.TarError as exc:
        raise ProfileError('the profile is not a tar: %s' % exc) from None
