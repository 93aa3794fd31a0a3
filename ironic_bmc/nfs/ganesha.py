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


"""The NFS server's exports of container roots (``nfs`` rootfs mode).

The conductor host runs nfs-ganesha (NFSv4 only, FSAL VFS).  Its main
configuration, which the operator owns, includes one file this module
owns (``[container]nfs_exports_file``): one read-only ``EXPORT`` block per
image tree that at least one node uses, at the pseudo path
``/bmc/<cache key>``.  :meth:`ExportTable.sync` rewrites that file from the
set of trees wanted and sends SIGHUP to ganesha, which re-reads its
exports: an export appears when the first node needs the tree and goes
away with the last one.

Export ids must stay the same for a path across reloads; they are kept in
a small JSON file next to the exports file.  Several conductor processes
on one host share the file under a lock.
"""

import contextlib
import fcntl
import json
import os
import signal
import socket
import tempfile

from ironic.common import exception
from ironic.common.i18n import _
from oslo_log import log

LOG = log.getLogger(__name__)

PSEUDO_ROOT = '/bmc'
#: Export ids we hand out (0 is ganesha's pseudo root, small ids are
#: left to the operator's own exports).
FIRST_ID = 1000
LAST_ID = 65000
SQUASH = {'root_squash': 'Root_Squash', 'no_root_squash': 'No_Root_Squash',
          'all_squash': 'All_Squash'}
_UNSAFE = set('"\\\n\r;{}')

HEADER = """\
# Written by ironic-bmc (ironic_bmc.nfs.ganesha): the read-only exports of
# container roots that nodes use now.  Rewritten at every change; do not
# edit.  Include it from ganesha.conf with: %%include "%s"
"""

EXPORT = """\
EXPORT {{
    # cache entry {key}
    Export_Id = {id};
    Path = "{path}";
    Pseudo = "{pseudo}";
    Protocols = 4;
    Transports = TCP;
    SecType = sys;
    Squash = {squash};
    Access_Type = None;
    CLIENT {{
        Clients = {clients};
        Access_Type = RO;
    }}
    FSAL {{
        Name = VFS;
    }}
}}
"""


class NFSServerUnavailable(exception.IronicException):
    _msg_fmt = _('The NFS server for container roots is not usable: '
                 '%(reason)s')


def pseudo_path(key):
    """The path nodes mount for the cache entry ``key``."""
    return '%s/%s' % (PSEUDO_ROOT, key)


def _check_value(what, value):
    if not value or _UNSAFE & set(value):
        raise ValueError('%s %r is empty or has a character ganesha\'s '
                         'configuration cannot hold' % (what, value))
    return value


class ExportTable:
    """The exports file, its export ids, and the server to reload.

    :param exports_file: the file ganesha includes; written here.
    :param pid_file: ganesha's pid file, to send SIGHUP to.
    :param clients: who may mount every export (ganesha ``Clients``:
        addresses, networks, ``*``), besides each export's own.
    :param squash: a key of :data:`SQUASH`.
    """

    def __init__(self, exports_file, pid_file, clients=(),
                 squash='root_squash'):
        self.exports_file = os.path.abspath(exports_file)
        self.ids_file = self.exports_file + '.ids.json'
        self.lock_file = self.exports_file + '.lock'
        self.pid_file = pid_file
        self.clients = [_check_value('NFS client', c) for c in clients]
        if squash not in SQUASH:
            raise ValueError('unknown squash %r (one of %s)'
                             % (squash, ', '.join(SQUASH)))
        self.squash = SQUASH[squash]

    @contextlib.contextmanager
    def _locked(self):
        os.makedirs(os.path.dirname(self.exports_file), exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read_ids(self):
        try:
            with open(self.ids_file) as f:
                ids = json.load(f)
        except (OSError, ValueError):
            return {}
        return {k: int(v) for k, v in ids.items()
                if isinstance(v, int) and FIRST_ID <= v <= LAST_ID}

    @staticmethod
    def _write_atomic(path, text):
        fd, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path),
                                   dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, 'w') as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.rename(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def exported(self):
        """``{cache key: export id}`` of what the file exports now."""
        with self._locked():
            return self._read_ids()

    def render(self, wanted, ids):
        """The exports file of ``{cache key: (tree path, clients)}``."""
        parts = [HEADER % self.exports_file]
        for key in sorted(wanted):
            path, clients = wanted[key]
            parts.append(EXPORT.format(
                key=key, id=ids[key],
                path=_check_value('export path', path),
                pseudo=pseudo_path(_check_value('cache key', key)),
                squash=self.squash, clients=', '.join(clients)))
        return '\n'.join(parts)

    def _entry(self, value):
        """(tree path, clients) of a ``wanted`` value: a path (mountable
        by the table's clients) or a (path, clients) pair, whose clients
        are added to the table's."""
        if isinstance(value, str):
            return value, list(self.clients)
        path, extra = value
        clients = list(self.clients) + [
            _check_value('NFS client', c) for c in extra
            if c not in self.clients]
        return path, clients

    def sync(self, wanted):
        """Export exactly ``wanted`` (``{cache key: tree path}``, or
        ``{cache key: (tree path, client addresses)}``); an entry that no
        client may mount is not exported.

        :returns: True when the exports changed and ganesha was told.
        :raises: NFSServerUnavailable when ganesha could not be told (the
            file is written all the same: a server started later reads
            it).
        """
        wanted = {k: entry for k, entry in (
            (k, self._entry(v)) for k, v in wanted.items()) if entry[1]}
        with self._locked():
            ids = self._read_ids()
            old = dict(ids)
            ids = {k: v for k, v in ids.items() if k in wanted}
            used = set(ids.values())
            free = (i for i in range(FIRST_ID, LAST_ID + 1)
                    if i not in used)
            for key in sorted(wanted):
                if key not in ids:
                    ids[key] = next(free)
            text = self.render(wanted, ids)
            try:
                with open(self.exports_file) as f:
                    current = f.read()
            except FileNotFoundError:
                current = None
            if current == text and ids == old:
                return False
            self._write_atomic(self.exports_file, text)
            if current is None and not ids:
                return False    # the server had none of ours either
            self._write_atomic(self.ids_file, json.dumps(ids, indent=1,
                                                          sort_keys=True))
            added = sorted(set(ids) - set(old))
            removed = sorted(set(old) - set(ids))
            LOG.info('NFS exports of container roots: %(n)d (added: '
                     '%(added)s; removed: %(removed)s)',
                     {'n': len(ids), 'added': ', '.join(added) or '-',
                      'removed': ', '.join(removed) or '-'})
            self.reload()
            return True

    def server_pid(self):
        """ganesha's pid, from its pid file, if that process lives."""
        try:
            with open(self.pid_file) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass    # alive, another user's: reload will say
        return pid

    def require_server(self):
        """ganesha's pid; NFSServerUnavailable when it does not run."""
        pid = self.server_pid()
        if pid is None:
            raise NFSServerUnavailable(reason=_(
                'no running nfs-ganesha found through its pid file %s '
                '([container]nfs_pid_file)') % self.pid_file)
        return pid

    def reload(self):
        pid = self.require_server()
        try:
            os.kill(pid, signal.SIGHUP)
        except OSError as exc:
            raise NFSServerUnavailable(reason=_(
                'cannot signal nfs-ganesha (pid %(pid)d) to re-read its '
                'exports: %(err)s') % {'pid': pid, 'err': exc})


def check_server(address, port, timeout=5.0):
    """Refuse (NFSServerUnavailable) a server that does not accept TCP."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            pass
    except OSError as exc:
        raise NFSServerUnavailable(reason=_(
            'nothing answers at %(addr)s:%(port)d '
            '([container]nfs_check_address, nfs_port): %(err)s')
            % {'addr': address, 'port': port, 'err': exc})
