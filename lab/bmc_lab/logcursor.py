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

"""Reading a log from a point in time onwards: what a boot printed, which
requests nginx served during a deploy.

libvirt hands a domain's file console to virtlogd, which rotates the file
once it reaches its ``max_size``: ``node.console.log`` is renamed to
``node.console.log.0`` (older backups move up to ``.1``, ``.2``, ...) and a
new, empty file takes its name.  A byte offset taken before a deploy is
then meaningless in the new file, and "read from the offset" returns
nothing even though the node printed plenty.  A :class:`Cursor` remembers
the file's inode with the offset and, on reading, follows the rotation
back to the file it was taken in.
"""

import os

#: More backups than any virtlogd configuration keeps by default (3).
MAX_BACKUPS = 16
#: Bytes from the start of the file that, with its inode, identify it (a
#: rotated-away file's inode number is free to be reused by the new log).
HEAD = 256


def _inode(path):
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def _read(path, offset=0, size=-1):
    try:
        with open(path, 'rb') as f:
            f.seek(offset)
            return f.read(size)
    except FileNotFoundError:
        return b''


class Cursor(object):
    """A position in a (possibly rotating) log file."""

    def __init__(self, path):
        self.path = path
        try:
            st = os.stat(path)
            self.inode, self.offset = st.st_ino, st.st_size
        except FileNotFoundError:
            self.inode, self.offset = None, 0
        self.head = _read(path, 0, min(self.offset, HEAD))
        # Backups that exist already hold nothing newer than the cursor.
        self.older = {_inode(p) for p in self._newest_first()
                      if p != path}

    def _newest_first(self):
        yield self.path
        for i in range(MAX_BACKUPS):
            backup = '%s.%d' % (self.path, i)
            if not os.path.exists(backup):
                return
            yield backup

    def read(self):
        """Everything written to the log since the cursor was taken."""
        chunks = []
        for path in self._newest_first():
            inode = _inode(path)
            if inode is None or inode in self.older:
                break
            if (inode == self.inode and
                    _read(path, 0, len(self.head)) == self.head):
                chunks.append(_read(path, self.offset))
                break
            chunks.append(_read(path))
        return b''.join(reversed(chunks))

    def text(self):
        return self.read().decode(errors='replace')
