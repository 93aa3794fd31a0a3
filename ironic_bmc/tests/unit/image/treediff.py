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

"""Compare two directory trees path by path, field by field.

:func:`differences` returns one line per path and field that differs, so
that a failing assertion names each of them: the type, the mode (with the
setuid, setgid and sticky bits), the owner, the size, a hash of the
content, a symlink's target, a device's numbers, the extended attributes,
the hard link group (the other paths sharing the inode) and the mtime.
The root of each tree is compared too, as ``.``.
"""

import collections
import hashlib
import os
import stat

FIELDS = ('type', 'mode', 'uid', 'gid', 'size', 'sha256', 'target',
          'rdev', 'xattrs', 'links', 'mtime')

_TYPES = {stat.S_IFREG: 'file', stat.S_IFDIR: 'dir', stat.S_IFLNK: 'symlink',
          stat.S_IFCHR: 'chr', stat.S_IFBLK: 'blk', stat.S_IFIFO: 'fifo',
          stat.S_IFSOCK: 'socket'}


def _xattrs(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return {}
    return {name: os.getxattr(path, name, follow_symlinks=False)
            for name in sorted(names)}


def describe(root):
    """``{relpath: {field: value}}`` for every path under ``root``."""
    out = {}
    inodes = collections.defaultdict(list)
    for dirpath, dirnames, filenames in os.walk(root):
        entries = [dirpath] if dirpath == root else []
        entries += [os.path.join(dirpath, n) for n in dirnames + filenames]
        for full in entries:
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            kind = _TYPES.get(stat.S_IFMT(st.st_mode), 'other')
            rec = {'type': kind, 'uid': st.st_uid, 'gid': st.st_gid,
                   'xattrs': _xattrs(full), 'mtime': int(st.st_mtime)}
            if kind != 'symlink':
                rec['mode'] = oct(stat.S_IMODE(st.st_mode))
            if kind == 'file':
                with open(full, 'rb') as f:
                    rec['sha256'] = hashlib.sha256(f.read()).hexdigest()
                rec['size'] = st.st_size
            elif kind == 'symlink':
                rec['target'] = os.readlink(full)
                rec['size'] = st.st_size
            elif kind in ('chr', 'blk'):
                rec['rdev'] = (os.major(st.st_rdev), os.minor(st.st_rdev))
            if kind != 'dir':
                inodes[st.st_ino].append(rel)
            out[rel] = rec
    for group in inodes.values():
        for rel in group:
            out[rel]['links'] = sorted(p for p in group if p != rel)
    return out


def differences(expected, actual, fields=FIELDS, ignore=()):
    """Lines ``path: field: expected != actual``, and paths only in one.

    :param expected: a tree's root or the result of :func:`describe`.
    :param actual: the same, for the tree under test.
    :param fields: the fields compared.
    :param ignore: relpaths left out (and everything below them).
    """
    want = expected if isinstance(expected, dict) else describe(expected)
    got = actual if isinstance(actual, dict) else describe(actual)

    def kept(rel):
        return not any(rel == i or rel.startswith(i + '/') for i in ignore)

    out = []
    for rel in sorted(set(want) | set(got), key=os.fsencode):
        if not kept(rel):
            continue
        if rel not in got:
            out.append(f'{rel!r}: missing ({want[rel]["type"]} expected)')
            continue
        if rel not in want:
            out.append(f'{rel!r}: unexpected {got[rel]["type"]}')
            continue
        for field in fields:
            a, b = want[rel].get(field), got[rel].get(field)
            if field == 'links':
                a = [p for p in a or () if kept(p)]
                b = [p for p in b or () if kept(p)]
            if a != b:
                out.append(f'{rel!r}: {field}: {a!r} != {b!r}')
    return out
