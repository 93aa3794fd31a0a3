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

"""Paths and users inside a container's root, as the runtime sees them.

The agent reads the image's root on the node before the runtime starts:
a path resolved as if the root were ``/`` (symlinks never leave it), the
image's ``User`` from its own /etc/passwd and /etc/group, the working
directory made where the image has none, mount points resolved inside
the root.  :mod:`.oci_spec` builds the runtime spec from them.
"""

import os

_MAX_SYMLINKS = 40


class SpecError(Exception):
    """The image or the arguments cannot make a runtime spec; says why."""


def resolve_in_root(root, path):
    """The node's path of ``path`` inside ``root``, symlinks resolved as
    if ``root`` were ``/`` (an absolute link or ``..`` never leaves it),
    like openat2's RESOLVE_IN_ROOT.  The last component may not exist."""
    parts = [p for p in path.split('/') if p]
    done = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == '.':
            continue
        if part == '..':
            if done:
                done.pop()
            continue
        candidate = os.path.join(root, *done, part)
        if os.path.islink(candidate):
            links += 1
            if links > _MAX_SYMLINKS:
                raise SpecError('too many levels of symbolic links in %s'
                                % path)
            target = os.readlink(candidate)
            if target.startswith('/'):
                done = []
            parts = [p for p in target.split('/') if p] + parts
            continue
        done.append(part)
    return os.path.join(root, *done)


def _read_db(root, name):
    try:
        with open(resolve_in_root(root, '/etc/' + name)) as f:
            return [line.rstrip('\n').split(':') for line in f
                    if line.strip() and not line.startswith('#')]
    except (OSError, UnicodeDecodeError):
        return []


def resolve_user(root, user):
    """``(uid, gid, additional gids, home)`` of an image's ``User``.

    As OCI runtimes do: ``uid``, ``name``, ``uid:gid``, ``name:group``
    (and mixed); names from the image's /etc/passwd and /etc/group.  A
    numeric user that /etc/passwd does not list runs with gid 0 and home
    ``/``.  The supplementary groups are those /etc/group lists the user
    in, unless the group is given: ``app:app`` runs with that group only
    (as runc and Docker do).

    :raises SpecError: a name the image does not know.
    """
    text = '0' if user in (None, '') else str(user)
    name, _sep, group = text.partition(':')
    passwd = _read_db(root, 'passwd')
    entry = None
    for row in passwd:
        if len(row) >= 6 and (row[0] == name or (name.isdigit()
                                                 and row[2] == name)):
            entry = row
            break
    if entry is None and not name.isdigit():
        raise SpecError('user %r is not in the image\'s /etc/passwd' % name)
    try:
        uid = int(name) if name.isdigit() else int(entry[2])
        gid = int(entry[3]) if entry is not None else 0
    except ValueError:
        raise SpecError('the image\'s /etc/passwd entry of %r is not '
                        'numeric' % name) from None
    home = (entry[5] if entry is not None else '') or '/'
    groups = _read_db(root, 'group')
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            for row in groups:
                if len(row) >= 3 and row[0] == group and row[2].isdigit():
                    gid = int(row[2])
                    break
            else:
                raise SpecError('group %r is not in the image\'s /etc/group'
                                % group)
    additional = []
    if entry is not None and not group:
        # Every group /etc/group lists the user in, its primary one too
        # (as runc: an image made with "adduser -G" lists it).
        for row in groups:
            if (len(row) >= 4 and entry[0] in row[3].split(',')
                    and row[2].isdigit()
                    and int(row[2]) not in additional):
                additional.append(int(row[2]))
    return uid, gid, additional, home


def make_workdir(root, workdir):
    """Create the working directory where the image has none, as runc
    and Docker do (0755, root's), inside the root.

    :raises SpecError: a part of it is a file of the image.
    """
    path = resolve_in_root(root, workdir or '/')
    if os.path.lexists(path) or os.path.realpath(root) == '/':
        return      # (never on the node's own root)
    try:
        os.makedirs(path, 0o755)
    except OSError as exc:
        raise SpecError('cannot create the workdir %s in the image: %s'
                        % (workdir, exc.strerror or exc)) from None


def resolve_mount_points(root, mounts):
    """The mounts with each destination resolved inside the root.

    A destination that is a symlink in the image, even one aiming out of
    the root (``/tmp -> /../../run/x``), is replaced by where it leads
    inside the root (``/run/x``), as runc does; the mounts are ordered so
    that one inside another's destination comes after it (the runtime
    then makes the missing directory inside that mount).

    :raises SpecError: naming the mount point that cannot be used.
    """
    resolved = []
    for mount in mounts:
        path = '/' + os.path.relpath(
            resolve_in_root(root, mount['destination']), root)
        if path in ('/', '/.'):
            raise SpecError('the image\'s %s leads to its root, which '
                            'cannot be a mount point'
                            % mount['destination'])
        resolved.append(dict(mount, destination=path))
    return sorted(resolved, key=lambda m: m['destination'].count('/'))
