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

"""What a run group member's container finds in its root.

Every member: :data:`protocol.GROUP_HOSTFILE`, the members' host names by
rank.  With the ``ssh`` launcher, the group's SSH files under
:data:`protocol.GROUP_DIR` (root's keys, the members' host keys, the
sshd configuration the other ranks run), a client configuration in
``/etc/ssh/ssh_config.d`` (which Debian's, Ubuntu's and Fedora's
``ssh_config`` include) so that rank 0's ``ssh``, and so ``mpirun``,
reaches every member by name or address without a question, and sshd's
privilege separation directory.

``/run`` is the image's own directory in the container (no tmpfs over
it, see :mod:`oci_spec`), so ``/run/sshd`` is made in the root like the
rest.  sshd refuses keys and directories others may write or read: the
files are made new (never through an image's symlink, paths resolved
inside the root), owned by root, the private keys 0600.
"""

import os

from ipa_hardware_manager import container_root
from ipa_hardware_manager import group_args
from bmc_common import protocol

GroupError = group_args.GroupError

USER_KEY = protocol.GROUP_DIR + '/id_ed25519'
AUTHORIZED_KEYS = protocol.GROUP_DIR + '/authorized_keys'
KNOWN_HOSTS = protocol.GROUP_DIR + '/known_hosts'
HOST_KEY = protocol.GROUP_DIR + '/ssh_host_ed25519_key'
SSH_CLIENT_CONFIG = '/etc/ssh/ssh_config.d/bmc-group.conf'
#: sshd's privilege separation directory (Debian's build).
PRIVSEP_DIR = '/run/sshd'


def _owned_by_root(path=None, fd=None):
    # The agent runs as root; a test does not, and its files stay its.
    if os.geteuid() != 0:
        return
    if fd is not None:
        os.fchown(fd, 0, 0)
    else:
        os.chown(path, 0, 0, follow_symlinks=False)


def make_dir(root, path, mode=0o755, own=False):
    """``path`` inside ``root`` as a directory (made where missing); the
    node's path of it.  One made, or ``own`` (the agent's, not the
    image's to arrange), gets ``mode`` and root as its owner."""
    if os.path.realpath(root) == '/':
        raise GroupError('not writing %s: the root given is the node\'s'
                         % path)
    try:
        real = container_root.resolve_in_root(root, path)
        if not os.path.isdir(real):
            if os.path.lexists(real):
                raise GroupError('%s in the image is not a directory'
                                 % path)
            os.makedirs(real, mode)
            own = True
        if own:
            os.chmod(real, mode)
            _owned_by_root(real)
    except (OSError, container_root.SpecError) as exc:
        raise GroupError('cannot make %s in the container\'s root: %s'
                         % (path, exc)) from None
    return real


def write(root, path, text, mode=0o644):
    """``text`` as the file ``path`` of the container, made new (what the
    image had there is replaced, a symlink too, never followed)."""
    parent = make_dir(root, os.path.dirname(path))
    dst = os.path.join(parent, os.path.basename(path))
    try:
        if os.path.isdir(dst) and not os.path.islink(dst):
            raise GroupError('%s is a directory in the image' % path)
        if os.path.lexists(dst):
            os.unlink(dst)
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                     | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        with os.fdopen(fd, 'w') as f:
            os.fchmod(f.fileno(), mode)     # (not the umask's)
            _owned_by_root(fd=f.fileno())
            f.write(text)
    except OSError as exc:
        raise GroupError('cannot write %s in the container\'s root: %s'
                         % (path, exc)) from None


def hostfile_text(members):
    return ''.join(m['hostname'] + '\n' for m in members)


def known_hosts_text(members):
    return ''.join('%s,%s %s\n' % (m['hostname'], m['address'],
                                   m['host_key']) for m in members)


def sshd_config_text(address, port=protocol.GROUP_SSH_PORT):
    """The other ranks' sshd: on the group address only, root by key
    only, none of what a launcher does not need."""
    listen = ('[%s]:%d' if ':' in address else '%s:%d') % (address, port)
    return ''.join('%s\n' % line for line in (
        '# The run group\'s sshd (written by the bare-metal container '
        'agent).',
        'ListenAddress %s' % listen,
        'HostKey %s' % HOST_KEY,
        'AuthorizedKeysFile %s' % AUTHORIZED_KEYS,
        'PermitRootLogin prohibit-password',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'UsePAM no',
        'PidFile none',
        'X11Forwarding no',
        'AllowTcpForwarding no',
        'PermitUserEnvironment no',
    ))


def ssh_config_text(members):
    """rank 0's ssh: the group's key and known hosts, no question."""
    names = [m['hostname'] for m in members] + [m['address']
                                                for m in members]
    return ''.join('%s\n' % line for line in (
        '# The run group\'s members (written by the bare-metal container '
        'agent).',
        'Host %s' % ' '.join(names),
        '    IdentityFile %s' % USER_KEY,
        '    UserKnownHostsFile %s' % KNOWN_HOSTS,
        '    StrictHostKeyChecking yes',
        '    User root',
        '    BatchMode yes',
    ))


def write_all(root, group, address):
    """The files of this member (``group``: group_args.validate's) into
    ``root``; ``address`` its group address.  The paths written."""
    members = group['members']
    files = [(protocol.GROUP_HOSTFILE, hostfile_text(members), 0o644)]
    ssh = group['ssh']
    if group['launcher'] == protocol.GROUP_LAUNCHER_SSH:
        rank = group['rank']
        files += [
            (USER_KEY, ssh['private_key'], 0o600),
            (USER_KEY + '.pub', ssh['public_key'] + '\n', 0o644),
            (AUTHORIZED_KEYS, ''.join(k + '\n' for k in
                                      ssh['authorized_keys']), 0o644),
            (KNOWN_HOSTS, known_hosts_text(members), 0o644),
            (HOST_KEY, ssh['host_key'], 0o600),
            (HOST_KEY + '.pub', members[rank]['host_key'] + '\n', 0o644),
            (protocol.GROUP_SSHD_CONFIG, sshd_config_text(address), 0o644),
            (SSH_CLIENT_CONFIG, ssh_config_text(members), 0o644),
        ]
    # sshd's StrictModes checks the directories of the authorized keys.
    make_dir(root, protocol.GROUP_DIR, 0o755, own=True)
    for path, text, mode in files:
        write(root, path, text, mode)
    written = [path for path, _text, _mode in files]
    if group['launcher'] == protocol.GROUP_LAUNCHER_SSH:
        make_dir(root, PRIVSEP_DIR, 0o755, own=True)
        written.append(PRIVSEP_DIR)
    return written
