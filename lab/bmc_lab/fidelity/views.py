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

"""The process view Docker gives a case's image, the differences the
bare-metal container means to have, and the comparison with a probe's.

The reference is ``docker run IMAGE [ARGS]`` with no other option
(moby 25 under systemd on a Debian 12 host), as its documentation and
code say, field by field (:func:`docker_view`):

* user: runc's ``GetExecUser`` (moby/sys/user): ``name`` is the passwd
  entry's uid and gid and, as supplementary groups, every group of
  /etc/group that lists the name; ``name:group`` and ``uid:gid`` that
  group and no supplementary groups; a uid that /etc/passwd does not
  list gid 0 and HOME ``/``;
* env: the image's Env, then ``-e``; ``PATH`` (the default one) when
  the image sets none; ``HOSTNAME``; ``HOME`` from /etc/passwd (``/``
  when unknown) unless set; no ``TERM`` (there is no ``-t``);
* cwd: the WorkingDir, ``/`` without one;
* mounts: the root an overlayfs (rw); ``/tmp`` and ``/run`` no mounts
  (the image's directories); ``/dev/shm`` tmpfs
  ``nosuid,nodev,noexec,size=65536k``; ``/proc`` proc
  ``nosuid,nodev,noexec``; ``/sys`` sysfs read-only;
* rlimits: the daemon's, since Docker 25 no longer raises them
  (``LimitNOFILE`` left to systemd): open files soft 1024, hard 524288;
  locked memory 8 MiB (the kernel's default since 5.16);
* capabilities: Docker's default set (``00000000a80425fb``) for root;
  none for another user (no ambient capabilities);
* ``oom_score_adj`` 0 (dockerd's own is -500, containerd's -999);
* /run and /tmp hold what the image put there and what the container's
  programs made.

The bare-metal container differs where :data:`INTENDED_DIFFERENCES`
says; the expected view on a node is Docker's with those applied
(:func:`expected_view`), and :func:`compare` returns every field that
differs from it.
"""

import dataclasses

from bmc_lab.fidelity import probe

DOCKER_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
#: moby's oci/caps/defaults.go: CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD
#: NET_RAW SETGID SETUID SETFCAP SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL
#: AUDIT_WRITE.
DOCKER_CAPS = '00000000a80425fb'
NO_CAPS = '0000000000000000'
DOCKER_SHM = 'rw,nosuid,nodev,noexec,size=65536k'
#: Docker's values that depend on the container: they are replaced by
#: the node's where the bare-metal container shares the node's network.
CONTAINER_ID = '<the container id>'
CONTAINER_ADDRESS = '<the container address>'
#: /etc/hosts' answer for a hostname without an address of its own.
FALLBACK_ADDRESS = '127.0.1.1'


class _Any:
    def __eq__(self, other):
        return True

    def __hash__(self):
        return 0

    def __repr__(self):
        return '<any>'


ANY = _Any()


@dataclasses.dataclass(frozen=True)
class Node:
    """What the node's expected values depend on (the probe's facts)."""

    hostname: str = 'node'
    default_address: str = ''
    cap_last_cap: int = 40

    @classmethod
    def from_facts(cls, facts):
        last = facts.get('cap_last_cap', '')
        return cls(hostname=facts.get('uts_hostname') or 'node',
                   default_address=facts.get('default_address') or '',
                   cap_last_cap=int(last) if last.isdigit() else 40)

    @property
    def all_caps(self):
        return '%016x' % ((1 << (self.cap_last_cap + 1)) - 1)


def _db(data):
    return [line.split(':') for line in data.decode().splitlines()
            if line.strip() and not line.startswith('#')]


def docker_user(passwd, group, spec):
    """``(uid, gid, supplementary gids, home)`` of an image's USER, as
    runc's GetExecUser gives them (a name not found raises KeyError)."""
    user, _, grp = (spec or '').partition(':')
    entry = None
    for row in _db(passwd):
        if len(row) < 7:
            continue
        if (not user and row[2] == '0') or (user.isdigit()
                                           and row[2] == user) or (
                not user.isdigit() and row[0] == user):
            entry = row
            break
    if entry is None and user and not user.isdigit():
        raise KeyError('unable to find user %s' % user)
    uid = int(entry[2]) if entry else int(user or 0)
    gid = int(entry[3]) if entry else 0
    home = entry[5] if entry else '/'
    groups = _db(group)
    sgids = []
    if grp:
        for row in groups:
            if (grp.isdigit() and row[2] == grp) or row[0] == grp:
                gid = int(row[2])
                break
        else:
            if not grp.isdigit():
                raise KeyError('unable to find group %s' % grp)
            gid = int(grp)
    elif entry:
        sgids = [int(row[2]) for row in groups
                 if len(row) > 3 and entry[0] in row[3].split(',')]
    return uid, gid, sgids, home


def docker_env(case, home):
    """The environment Docker gives the case's process (a dict)."""
    env = {}
    for item in tuple(case.env) + tuple(case.run_env):
        name, _, value = item.partition('=')
        env[name] = value
    env.setdefault('PATH', DOCKER_PATH)
    env.setdefault('HOSTNAME', CONTAINER_ID)
    env.setdefault('HOME', home)
    return env


def _image_path(name):
    path = '/' + name.strip('/')
    if path.startswith('/var/run/'):
        path = path[len('/var'):]
    return path


def docker_files(case):
    """What the probe lists under /run and /tmp: the image's entries
    there (three levels deep) and what the case's programs make."""
    found = {}
    for entry in case.entries():
        path = _image_path(entry.name)
        for top in ('/run/', '/tmp/'):
            if path.startswith(top) and path.count('/') <= 4:
                found[path] = '%d:%d' % (entry.uid, entry.gid)
    for path, uid, gid in case.creates:
        found[path] = '%d:%d' % (uid, gid)
    return tuple(sorted('%s %s' % kv for kv in found.items()))


def docker_view(case):
    """The fields of :func:`probe.parse` as ``docker run`` gives them."""
    passwd, group = case.passwd_group()
    uid, gid, sgids, home = docker_user(passwd, group, case.user)
    if case.switches_to:
        uid, gid, sgids = case.switches_to
    view = {
        'uid': str(uid), 'gid': str(gid),
        'groups': ' '.join(str(g) for g in sorted(set(sgids))),
        'args': tuple(case.probe_args),
        'cwd': case.workdir or '/',
        'hostname': CONTAINER_ID, 'etc_hostname': CONTAINER_ID,
        'host_lookup': CONTAINER_ADDRESS,
        'fstype:/': 'overlay', 'mount:/': 'rw',
        'fstype:/tmp': '-', 'mount:/tmp': '-',
        'fstype:/run': '-', 'mount:/run': '-',
        'fstype:/dev/shm': 'tmpfs', 'mount:/dev/shm': DOCKER_SHM,
        'fstype:/proc': 'proc', 'mount:/proc': 'rw,nosuid,nodev,noexec',
        'fstype:/sys': 'sysfs', 'mount:/sys': 'ro,nosuid,nodev,noexec',
        'rlimit:nofile:soft': '1024', 'rlimit:nofile:hard': '524288',
        'rlimit:memlock:soft': '8388608', 'rlimit:memlock:hard': '8388608',
        'cap_eff': DOCKER_CAPS if uid == 0 else NO_CAPS,
        'cap_bnd': DOCKER_CAPS,
        'oom_score_adj': '0',
        'files': docker_files(case),
    }
    for name, value in docker_env(case, home).items():
        view['env:' + name] = value
    return view


@dataclasses.dataclass(frozen=True)
class Intended:
    """A field where the bare-metal container means to differ from
    Docker: why, and its value on the node (``value(view, node)``)."""

    field: str
    reason: str
    value: object


_HOST_NETWORK = ('host network: the node\'s hostname (the container shares '
                 'the node\'s UTS namespace), as under docker run --network '
                 'host')
#: The bare-metal defaults of a privileged (default) container.
INTENDED_DIFFERENCES = (
    Intended('hostname', _HOST_NETWORK, lambda v, n: n.hostname),
    Intended('env:HOSTNAME', _HOST_NETWORK, lambda v, n: n.hostname),
    Intended('etc_hostname', _HOST_NETWORK, lambda v, n: n.hostname),
    Intended('host_lookup',
             'host network: /etc/hosts gives the hostname the node\'s '
             'address (of the default route\'s interface, else 127.0.1.1), '
             'where Docker gives the container\'s own',
             lambda v, n: n.default_address or FALLBACK_ADDRESS),
    Intended('cap_eff',
             'privileged: root has every capability of the node\'s kernel '
             '(another user has none, as under Docker)',
             lambda v, n: n.all_caps if v['uid'] == '0' else NO_CAPS),
    Intended('cap_bnd', 'privileged: every capability of the node\'s '
             'kernel in the bounding set', lambda v, n: n.all_caps),
    Intended('mount:/sys', 'privileged: /sys is writable, as under docker '
             'run --privileged', lambda v, n: 'rw,nosuid,nodev,noexec'),
    Intended('mount:/dev/shm',
             'no 64 MiB size: MPI\'s shared-memory transport may use all of '
             'it', lambda v, n: 'rw,nosuid,nodev,noexec'),
    Intended('fstype:/', 'the root is the run\'s own copy on the node (in '
             'RAM, or an overlay over a stream or NFS), not an overlayfs of '
             'the image\'s layers', lambda v, n: ANY),
    Intended('env:container', 'container=bmc: programs can tell they run in '
             'a container (systemd\'s convention)', lambda v, n: 'bmc'),
    Intended('rlimit:nofile:hard',
             'the kernel\'s fs.nr_open: MPI opens a socket or queue pair per '
             'peer (Docker\'s is the daemon\'s: 524288 under systemd)',
             lambda v, n: '1048576'),
    Intended('rlimit:memlock:soft', 'unlimited: MPI and RDMA pin memory '
             '(Docker\'s is the daemon\'s: 8 MiB)',
             lambda v, n: 'unlimited'),
    Intended('rlimit:memlock:hard', 'unlimited: MPI and RDMA pin memory',
             lambda v, n: 'unlimited'),
)

#: Fields where the node still differs from Docker without meaning to:
#: (field, what the node gives, why it is not fixed yet).  A test fails
#: when one of them is gone (then it is removed here), as when a new one
#: appears.  (The first run on a node found two, fixed since: /dev/shm
#: without noexec, and the workload at the agent's oom_score_adj.)
KNOWN_DIVERGENCES = ()


def expected_view(case, node, intended=INTENDED_DIFFERENCES):
    """``(expected, docker, reasons)``: the case's view on ``node``,
    Docker's, and the reason of each intended difference, by field."""
    docker = docker_view(case)
    expected = dict(docker)
    reasons = {}
    for item in intended:
        expected[item.field] = item.value(docker, node)
        reasons[item.field] = item.reason
    return expected, docker, reasons


@dataclasses.dataclass(frozen=True)
class Mismatch:
    field: str
    expected: object
    got: object
    docker: object = None
    reason: str = None

    def __str__(self):
        text = '%s: expected %r, got %r' % (self.field, self.expected,
                                            self.got)
        if self.field == 'files':
            exp, got = set(self.expected or ()), set(self.got or ())
            text = 'files: missing %s, unexpected %s' % (
                sorted(exp - got), sorted(got - exp))
        if self.reason:
            text += ' (Docker: %r; intended: %s)' % (self.docker,
                                                      self.reason)
        return text


def compare(expected, got, docker=None, reasons=None):
    """Every field where ``got`` (:func:`probe.parse`'s fields) differs
    from ``expected``; an absent field is None."""
    docker = docker or {}
    reasons = reasons or {}
    found = []
    for field in sorted(set(expected) | set(got)):
        want, have = expected.get(field), got.get(field)
        if want == have:
            continue
        found.append(Mismatch(field, want, have, docker.get(field),
                              reasons.get(field)))
    return found


def check(case, output, known=KNOWN_DIVERGENCES):
    """Compare the probe in ``output`` with the case's expected view;
    ``(mismatches, fields, node)``: the mismatches not in ``known``,
    then the known ones that did not show (as Mismatch of field None)."""
    fields, facts = probe.parse(output)
    node = Node.from_facts(facts)
    expected, docker, reasons = expected_view(case, node)
    found = compare(expected, fields, docker, reasons)
    known = {field: value for field, value, _why in known}
    left = [m for m in found if known.get(m.field, object()) != m.got]
    shown = {m.field for m in found}
    for field in known:
        if field not in shown:
            left.append(Mismatch(field, known[field], expected.get(field),
                                 reason='a known divergence that is gone: '
                                 'remove it from KNOWN_DIVERGENCES'))
    return left, fields, node


def format_mismatches(case, mismatches):
    return '%s (%s): %d field(s) differ:\n%s' % (
        case.name, case.title, len(mismatches),
        '\n'.join('  ' + str(m) for m in mismatches))
