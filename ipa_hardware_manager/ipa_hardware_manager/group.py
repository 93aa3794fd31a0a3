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

"""This node as a member of a run group: one job across several nodes.

The start step's ``group`` argument (see
:data:`bmc_common.protocol.STEP_START_WORKLOAD`) makes a :class:`Member`,
checked before anything is touched (:mod:`.group_args`).  Then, in the
step, before the runtime starts:

1. :meth:`Member.check_image`: with the ``ssh`` launcher the image has
   an sshd, the workload runs as root, the container is privileged;
2. :meth:`Member.setup`: the group network's NIC gets the member's
   address (:mod:`.group_net`), the node its host name (privileged; a
   confined container gets it in its spec), the root the group's files
   (:mod:`.group_files`);
3. :meth:`Member.wait_for_peers`: rank 0 of the ``ssh`` launcher waits
   for every other member's sshd.

The supervisor then takes the member's host name, ``/etc/hosts`` lines,
environment and command (sshd instead of the command on the other
ranks of the ``ssh`` launcher).
"""

import os

from oslo_log import log

from ipa_hardware_manager import container_root
from ipa_hardware_manager import group_args
from ipa_hardware_manager import group_files
from ipa_hardware_manager import group_net
from bmc_common import protocol

LOG = log.getLogger(__name__)

GroupError = group_args.GroupError

#: What the other ranks of the ``ssh`` launcher run: in the foreground
#: (the container's process), logging to its output, with the group's
#: configuration only (not the image's /etc/ssh/sshd_config).
SSHD_COMMAND = [protocol.GROUP_SSHD, '-D', '-e', '-f',
                protocol.GROUP_SSHD_CONFIG]


def validate(args):
    """The start step's ``group`` argument as a :class:`Member`.

    :raises GroupError: naming the field that is wrong.
    """
    return Member(group_args.validate(args))


class Member:
    """This node in its group (from :func:`validate`)."""

    def __init__(self, fields):
        self.fields = fields
        self.rank = fields['rank']
        self.interface = fields['interface']
        #: The group network's interface on the node, once set up.
        self.interface_name = None

    @property
    def ssh_launcher(self):
        return self.fields['launcher'] == protocol.GROUP_LAUNCHER_SSH

    @property
    def hostname(self):
        return self.fields['members'][self.rank]['hostname']

    @property
    def address(self):
        """The member's group address, without its prefix."""
        return str(self.interface.ip)

    @property
    def hostnames(self):
        return [m['hostname'] for m in self.fields['members']]

    # -- before the runtime starts ----------------------------------------

    def check_image(self, root, user, privileged):
        """What the launcher needs of the image and the arguments.

        On every rank (rank 0 runs no sshd, but its image is the
        others'): a rank 0 that would only fail later, after waiting for
        peers that all failed, fails at once.

        :raises GroupError: naming what to change.
        """
        if not self.ssh_launcher:
            return
        if not privileged:
            raise GroupError(
                'container_group_launcher=ssh needs a privileged container '
                '(container_privileged true): sshd\'s privilege separation '
                'chroots, which a confined container may not; or use '
                'container_group_launcher=none')
        try:
            uid = container_root.resolve_user(root, user)[0]
        except container_root.SpecError as exc:
            raise GroupError(str(exc)) from None
        if uid != 0:
            raise GroupError(
                'container_group_launcher=ssh runs the workload as root '
                '(sshd on the other ranks, root\'s keys on rank 0); the '
                'user %r is uid %d: leave the user unset or use '
                'container_group_launcher=none' % (user, uid))
        try:
            sshd = container_root.resolve_in_root(root, protocol.GROUP_SSHD)
        except container_root.SpecError:
            sshd = None
        if not (sshd and os.path.isfile(sshd) and os.access(sshd, os.X_OK)):
            raise GroupError(
                'the image has no %s: container_group_launcher=ssh needs '
                'openssh-server in the image, or use none'
                % protocol.GROUP_SSHD)

    def setup(self, root, privileged, run=None, sysfs=None,
              sethostname=None):
        """The network, the host name and the files of this member; again
        is harmless (an agent restarted mid-run may do it twice).

        :param run: runs ``ip`` with a list of arguments, returns its
            stdout (:func:`group_net.run_ip`).
        :param sysfs: where the interfaces are (``/sys/class/net``).
        :param sethostname: sets the node's host name.
        """
        name = group_net.find_interface(
            self.fields['mac'], sysfs or group_net.SYS_CLASS_NET)
        group_net.configure(name, self.interface, run)
        self.interface_name = name
        if privileged:
            # The container shares the node's UTS namespace; a confined
            # one gets the name in its spec.
            group_net.set_hostname(self.hostname, sethostname)
        written = group_files.write_all(root, self.fields, self.address)
        LOG.info('Run group %s: rank %d of %d, %s at %s on %s; wrote %s',
                 self.fields['name'], self.rank, self.fields['size'],
                 self.hostname, self.interface, name, ', '.join(written))

    def wait_for_peers(self, connect=None, clock=None, sleep=None):
        """Rank 0 of the ``ssh`` launcher: the seconds until every other
        member's sshd accepted a connection; None on the others.

        :raises GroupError: not all were ready within ``peer_wait``.
        """
        if not self.ssh_launcher or self.rank != 0:
            return None
        peers = [m for m in self.fields['members'] if m['rank'] != 0]
        seconds = group_net.wait_for_peers(
            peers, protocol.GROUP_SSH_PORT, self.fields['peer_wait'],
            connect=connect, clock=clock, sleep=sleep)
        LOG.info('Run group %s: the %d other members\' sshd ready after '
                 '%.1f s', self.fields['name'], len(peers), seconds)
        return round(seconds, 3)

    # -- what the supervisor takes -----------------------------------------

    def variables(self):
        """The ENV_GROUP* variables."""
        return {
            protocol.ENV_GROUP: self.fields['name'],
            protocol.ENV_GROUP_ID: self.fields['id'],
            protocol.ENV_RANK: str(self.rank),
            protocol.ENV_SIZE: str(self.fields['size']),
            protocol.ENV_HOSTFILE: protocol.GROUP_HOSTFILE,
            protocol.ENV_GROUP_IFACE: self.interface_name or '',
            protocol.ENV_GROUP_ADDRESS: self.address,
            protocol.ENV_GROUP_HOSTS: ' '.join(self.hostnames),
        }

    def env(self, env):
        """``env`` (the user's) with the group's variables over it: a
        launcher relies on them being the group's."""
        merged = dict(env or {})
        merged.update(self.variables())
        return merged

    def command(self, command):
        """What this member runs: sshd on the other ranks of the ``ssh``
        launcher (rank 0's command reaches them), else ``command``."""
        if self.ssh_launcher and self.rank != 0:
            return list(SSHD_COMMAND)
        return command

    def hosts_lines(self):
        """``/etc/hosts`` lines naming every member at its address."""
        return ['%s\t%s' % (m['address'], m['hostname'])
                for m in self.fields['members']]

    def result(self, peers_ready):
        """The start result's ``group`` section."""
        return {'interface': self.interface_name,
                'address': str(self.interface),
                'peers_ready': peers_ready}
