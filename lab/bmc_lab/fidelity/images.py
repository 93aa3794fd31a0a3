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

"""The case images: what common images do that a runtime may get wrong.

Each :class:`Case` is a Debian-like root (static busybox and its
applets, ``/var/run -> /run``, the probe at :data:`probe.PATH`) with a
few files of its own and an image config, built in Python
(:mod:`bmc_lab.ociimage`), nothing pulled.  :func:`combine` lays cases
over each other, for an e2e boot that covers several at once.

The cases (:data:`CASES`) stand in for:

a. ``entrypoint_switches_user``: Postgres' ``docker-entrypoint.sh``,
   root at first, it chowns its directories and execs the CMD (passed on
   as ``"$@"``) as ``postgres`` (busybox's ``su``, which has no
   ``setpriv --reuid``); STOPSIGNAL SIGINT;
b. ``daemon_run_dir``: a daemon whose ``/var/run/appd`` the image made
   and gave to its user (``/var/run`` a link to ``/run``, as in Debian);
c. ``workdir_in_tmp``: a WORKDIR under ``/tmp``, with files in it;
d. ``hostname_lookup``: resolving the own hostname (Java's
   ``InetAddress.getLocalHost()``), with the host's glibc ``getent`` and
   an ``nsswitch.conf`` ``hosts: files dns``;
e. ``numeric_user``: ``USER 1000:1000``;
f. ``named_user_group``: ``USER app:app`` where /etc/group lists ``app``
   in other groups (none apply), and ``named_user``: ``USER app`` (they
   do).

and, at the spec level only, the corners of the same rules:
``unknown_uid`` (a uid /etc/passwd does not list), ``own_group_member``
(Alpine's ``adduser -G app app`` lists the user in its primary group),
``args_replace_cmd`` (``container_args`` with an ENTRYPOINT, ``docker
run IMAGE ARGS``).
"""

import dataclasses
import json
import os
import shutil
import subprocess

from bmc_lab import ociimage
from bmc_lab.fidelity import probe

E = ociimage.Entry

PASSWD = (b'root:x:0:0:root:/root:/bin/sh\n'
          b'postgres:x:999:999::/var/lib/postgresql:/bin/sh\n'
          b'app:x:1000:1000::/home/app:/bin/sh\n')
#: ``app`` is in ``video`` and ``audio``; ``staff`` lists someone else.
GROUP = (b'root:x:0:\n'
         b'audio:x:29:app\n'
         b'video:x:44:app\n'
         b'staff:x:50:other\n'
         b'ssl-cert:x:101:postgres\n'
         b'postgres:x:999:\n'
         b'app:x:1000:\n')
NSSWITCH = b'passwd: files\ngroup: files\nhosts: files dns\n'
APPLETS = ('sh', 'awk', 'cat', 'chmod', 'chown', 'echo', 'env', 'find',
           'grep', 'head', 'hostname', 'id', 'ip', 'ls', 'mkdir', 'readlink',
           'sed', 'sleep', 'sort', 'stat', 'su', 'tail', 'tr', 'true',
           'uname', 'wc')
DEFAULT_PATH = ('PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:'
                '/sbin:/bin')

ENTRYPOINT_SH = b"""#!/bin/sh
# As Postgres' docker-entrypoint.sh: options alone mean the server's.
set -e
if [ "${1#-}" != "$1" ]; then
    set -- postgres "$@"
fi
if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown -R postgres:postgres "$PGDATA"
    find /var/run/postgresql ! -user postgres -exec chown postgres:postgres \\
        '{}' +
    # (gosu in the real image; busybox's su here: initgroups, setgid,
    # setuid, the environment kept; "--" before the user, or su would
    # take the server's options for its own.)
    exec su -p -s /bin/sh -c 'exec "$0" "$@"' -- postgres "$0" "$@"
fi
exec "$@"
"""

POSTGRES = b"""#!/bin/sh
# A stand-in for the server: its lock file, the probe, then it serves
# until SIGINT (its STOPSIGNAL: a fast shutdown).
trap 'echo "shutting down cleanly on INT"; exit 0' INT
echo "$$" > /var/run/postgresql/postmaster.pid
bmc-probe "$@"
echo serving
while :; do sleep 1 & wait $!; done
"""

APPD = b"""#!/bin/sh
# A daemon that writes its pid file where its package said.
echo "$$" > /var/run/appd/appd.pid && echo "appd: pid file written"
exec bmc-probe "$@"
"""


@dataclasses.dataclass(frozen=True)
class Case:
    """An image and how it is run.

    ``files`` are laid over the base root; ``creates`` the (path, uid,
    gid) its programs make or chown under /run and /tmp when they run,
    as they would under Docker (the probe lists them with the image's
    own).  ``switches_to`` is the (uid, gid, groups) an entrypoint
    switches to before the probe runs, None when it runs as the image's
    user.  The probe's
    arguments are the command's words from ``probe_offset`` on (the
    words before it are the programs that lead to it).  ``run_args`` is
    ``container_args`` (``docker run IMAGE ARGS``), ``run_env``
    ``container_env`` (``docker run -e``)."""

    name: str
    title: str
    files: tuple = ()
    entrypoint: tuple = ()
    cmd: tuple = (probe.PATH,)
    env: tuple = (DEFAULT_PATH,)
    workdir: str = ''
    user: str = ''
    stop_signal: str = ''
    group: bytes = GROUP
    creates: tuple = ()
    switches_to: tuple = None
    probe_offset: int = 1
    run_args: tuple = None
    run_env: tuple = ()

    @property
    def command(self):
        """What Docker runs: ENTRYPOINT + CMD, or + ``run_args``."""
        args = self.cmd if self.run_args is None else self.run_args
        return tuple(self.entrypoint) + tuple(args)

    @property
    def probe_args(self):
        return self.command[self.probe_offset:]

    def entries(self):
        """The root's tar entries, one per path (the case's last)."""
        by_name = {}
        for entry in base_entries(self.group) + list(self.files):
            by_name[entry.name] = entry
        return list(by_name.values())

    def image(self, compression='gzip'):
        return ociimage.build_image(
            [self.entries()], entrypoint=list(self.entrypoint) or None,
            cmd=list(self.cmd) or None, env=list(self.env),
            workdir=self.workdir or None, user=self.user or None,
            stop_signal=self.stop_signal or None, compression=compression)

    def passwd_group(self):
        """(/etc/passwd, /etc/group) of the image, as bytes."""
        found = {e.name: e.data for e in self.entries()}
        return found['etc/passwd'], found['etc/group']


def _dirs(path):
    parts = path.split('/')[:-1]
    return ['/'.join(parts[:i + 1]) for i in range(len(parts))]


def _host_program(path):
    """Entries of a host's dynamically linked program and the libraries
    ``ldd`` names (symlinks kept as links), or [] without it."""
    if not os.path.isfile(path) or not shutil.which('ldd'):
        return []
    done = subprocess.run(['ldd', path], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        return []
    files = [path]
    for line in done.stdout.splitlines():
        words = line.split()
        for word in words:
            if word.startswith('/') and os.path.exists(word):
                files.append(word)
                break
    entries = {}
    for name in files:
        chain = [name]
        while os.path.islink(chain[-1]):
            target = os.path.join(os.path.dirname(chain[-1]),
                                  os.readlink(chain[-1]))
            chain.append(os.path.normpath(target))
        for link in chain[:-1]:
            entries[link] = E(link.lstrip('/'), 'symlink',
                              linkname=os.readlink(link))
        with open(chain[-1], 'rb') as f:
            entries[chain[-1]] = E(chain[-1].lstrip('/'), data=f.read(),
                                   mode=0o755)
    out = []
    for name, entry in sorted(entries.items()):
        out += [E(d.lstrip('/'), 'dir') for d in _dirs(name) if d]
        out.append(entry)
    return out


def base_entries(group=GROUP):
    """A Debian-like root: busybox, passwd and group, ``/var/run ->
    /run``, /tmp (1777), the probe."""
    dirs = ['bin', 'dev', 'etc', 'home', 'proc', 'run', 'sys', 'usr',
            'usr/bin', 'usr/local', 'usr/local/bin', 'var', 'var/lib']
    out = [E(d, 'dir') for d in dirs]
    out += [E('root', 'dir', mode=0o700), E('tmp', 'dir', mode=0o1777),
            E('home/app', 'dir', uid=1000, gid=1000),
            E('var/run', 'symlink', linkname='/run')]
    with open('/bin/busybox', 'rb') as f:
        out.append(E('bin/busybox', data=f.read(), mode=0o755))
    out += [E('bin/' + a, 'symlink', linkname='busybox') for a in APPLETS]
    out += [E('etc/passwd', data=PASSWD), E('etc/group', data=group),
            E('etc/nsswitch.conf', data=NSSWITCH),
            E(probe.PATH.lstrip('/'), data=probe.SCRIPT.encode(),
              mode=0o755)]
    return out


def _script(path, data):
    return E(path.lstrip('/'), data=data, mode=0o755)


CASES = {}


def _case(**kwargs):
    case = Case(**kwargs)
    CASES[case.name] = case
    return case


ENTRYPOINT_SWITCHES_USER = _case(
    name='entrypoint_switches_user',
    title='a: an entrypoint that chowns as root, then execs the CMD as '
          'postgres (su), "$@" passed on',
    files=(_script('/usr/local/bin/docker-entrypoint.sh', ENTRYPOINT_SH),
           _script('/usr/local/bin/postgres', POSTGRES),
           E('var/lib/postgresql', 'dir', uid=999, gid=999),
           E('run/postgresql', 'dir', mode=0o2777)),
    entrypoint=('docker-entrypoint.sh',),
    cmd=('postgres', '-c', 'shared_buffers=16MB'),
    env=(DEFAULT_PATH, 'PGDATA=/var/lib/postgresql/data'),
    stop_signal='SIGINT',
    # The entrypoint's chown, the server's lock file.
    creates=(('/run/postgresql', 999, 999),
             ('/run/postgresql/postmaster.pid', 999, 999)),
    # su's initgroups: its group and those listing it.
    switches_to=(999, 999, (101, 999)),
    probe_offset=2)
DAEMON_RUN_DIR = _case(
    name='daemon_run_dir',
    title='b: a daemon writes its pid file into /var/run/appd, which the '
          'image made and gave to it',
    files=(_script('/usr/local/bin/appd', APPD),
           E('run/appd', 'dir', mode=0o750, uid=1000, gid=1000)),
    cmd=('appd', '--foreground'), user='app',
    creates=(('/run/appd', 1000, 1000),
             ('/run/appd/appd.pid', 1000, 1000)))
WORKDIR_IN_TMP = _case(
    name='workdir_in_tmp',
    title='c: a WORKDIR under /tmp, with files in it',
    files=(E('tmp/work', 'dir', uid=1000, gid=1000),
           E('tmp/work/input.txt', data=b'42\n', uid=1000, gid=1000),
           E('tmp/work/conf', 'dir'),
           E('tmp/work/conf/settings.ini', data=b'[main]\n')),
    workdir='/tmp/work')
HOSTNAME_LOOKUP = _case(
    name='hostname_lookup',
    title='d: the own hostname resolves (glibc getent, hosts: files dns), '
          'as Java\'s InetAddress.getLocalHost() needs',
    files=tuple(_host_program('/usr/bin/getent')))
NUMERIC_USER = _case(
    name='numeric_user',
    title='e: USER 1000:1000',
    # No PATH in the image: Docker's default applies.
    env=('NODE_VERSION=20.11.0',), user='1000:1000')
NAMED_USER_GROUP = _case(
    name='named_user_group',
    title='f: USER app:app: the group given, no supplementary groups',
    user='app:app')
NAMED_USER = _case(
    name='named_user',
    title='f: USER app: its group and the supplementary groups /etc/group '
          'lists it in',
    user='app')
# The spec level's corners.
UNKNOWN_UID = _case(
    name='unknown_uid',
    title='a uid /etc/passwd does not list: gid 0, HOME /',
    user='4242')
OWN_GROUP_MEMBER = _case(
    name='own_group_member',
    title='USER app, /etc/group listing app in its own group too '
          '(Alpine\'s adduser -G)',
    user='app', group=GROUP.replace(b'app:x:1000:\n', b'app:x:1000:app\n'))
ARGS_REPLACE_CMD = dataclasses.replace(
    ENTRYPOINT_SWITCHES_USER, name='args_replace_cmd',
    title='container_args: the CMD replaced, the ENTRYPOINT kept',
    run_args=('postgres', '-c', 'max_connections=7'),
    run_env=('POSTGRES_DB=probe',))
CASES[ARGS_REPLACE_CMD.name] = ARGS_REPLACE_CMD


def combine(name, *cases, **config):
    """The cases' files over each other (a later case's last), with the
    config of ``config`` (Case's fields), the ``creates`` of all."""
    files = []
    creates = []
    for case in cases:
        files += case.files
        creates += [c for c in case.creates if c not in creates]
    fields = dict(name=name, title=' + '.join(c.title.split(':')[0]
                                              for c in cases),
                  files=tuple(files), creates=tuple(creates))
    fields.update(config)
    return Case(**fields)


def write_layout(image, path, ref='latest'):
    """``image`` as an OCI image layout in directory ``path`` (what
    ``umoci unpack --image PATH:REF`` reads)."""
    blobs = os.path.join(path, 'blobs', 'sha256')
    os.makedirs(blobs, exist_ok=True)
    for digest, data in list(image.blobs.items()) + [(image.digest,
                                                       image.manifest)]:
        with open(os.path.join(blobs, digest.split(':', 1)[1]), 'wb') as f:
            f.write(data)
    with open(os.path.join(path, 'oci-layout'), 'w') as f:
        json.dump({'imageLayoutVersion': '1.0.0'}, f)
    index = {'schemaVersion': 2, 'manifests': [{
        'mediaType': ociimage.MEDIA_MANIFEST, 'digest': image.digest,
        'size': len(image.manifest),
        'annotations': {'org.opencontainers.image.ref.name': ref}}]}
    with open(os.path.join(path, 'index.json'), 'w') as f:
        json.dump(index, f)


def push(settings, case, repo=None, tag='1'):
    """Build ``case`` and push it to the lab registry; its reference."""
    repo = repo or 'fidelity/' + case.name.replace('_', '-')
    ociimage.Pusher(settings.registry_address).push_image(
        repo, tag, case.image())
    return '%s/%s:%s' % (settings.registry_address, repo, tag)
