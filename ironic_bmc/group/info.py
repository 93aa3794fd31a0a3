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

"""A run group member's keys (``container_group*``) and group network.

The keys are the node's ``instance_info`` (the operator's, or a lessee
deploying its nodes), or the properties of a Nova server (its config
drive's ``meta``).  The group is scoped by whom the run is for
(:func:`ironic_bmc.ownership.group_scope`, never a value the deployer
writes): the nodes of one project, or the operator's deploys, never
both, so no one can join another project's group and be handed its
keys; a Nova group is also scoped by the request its servers came
from.
"""

import dataclasses
import ipaddress
import re

from ironic.common import exception
from ironic.common.i18n import _

from bmc_common import protocol
from ironic_bmc.conf import CONF
from ironic_bmc import image_properties
from ironic_bmc import ownership

#: The port's extra key holding the node's group-network address.
ADDRESS_KEY = 'bmc_group_address'
KEYS = (protocol.II_GROUP, protocol.II_GROUP_SIZE,
        protocol.II_GROUP_LAUNCHER)
#: The scope of the operator's own deploys (no project).
OPERATOR_SCOPE = ownership.OPERATOR_SCOPE


@dataclasses.dataclass(frozen=True)
class GroupInfo:
    name: str
    size: int
    launcher: str
    #: The project the group belongs to, or OPERATOR_SCOPE.
    scope: str
    #: The Nova request the servers of the group came from (its
    #: reservation id), or None for a group set in instance_info.
    request: str = None

    @property
    def key(self):
        """What every member of the group has in common."""
        key = '%s/%s' % (self.scope, self.name)
        return '%s@%s' % (key, self.request) if self.request else key


def requested(node, info):
    """The run group a deploy joins, or None.

    :param info: the effective instance_info (with the image's keys).
    :raises: InvalidParameterValue naming the key and the reason.
    """
    present = [k for k in KEYS if info.get(k) not in (None, '')]
    if not present:
        return None
    for key in present:
        if image_properties.from_image(node, key):
            raise exception.InvalidParameterValue(
                _('%s: a run group is not an image\'s: set it in the '
                  'node\'s instance_info, or as a property of the Nova '
                  'servers (openstack server create --min N --max N '
                  '--config-drive true --property %s=...)')
                % (image_properties.where(node, key), key))
    return _parse(info, 'instance_info/%s', present,
                  ownership.group_scope(node))


def from_server(node, server):
    """The run group of a Nova server, from its properties (the config
    drive's ``meta``), or None.  The servers of one ``--min N --max N``
    request share its reservation id: that, not the name alone, makes
    them one group.

    :param server: ``bmc_common.configdrive.server`` of the deploy's
        config drive.
    :raises: InvalidParameterValue naming the property and the reason.
    """
    meta = (server or {}).get('meta') or {}
    present = [k for k in KEYS if meta.get(k) not in (None, '')]
    if not present or not node.instance_uuid or ownership.is_operators(node):
        return None
    if not server.get('reservation_id'):
        raise exception.InvalidParameterValue(
            _('server property %s: the config drive does not say which '
              'request the server came from (no reservation-id in its EC2 '
              'metadata), so its group cannot be told apart')
            % present[0])
    return _parse(meta, _('server property %s'), present,
                  ownership.group_scope(node, nova=True),
                  request=server['reservation_id'])


def _parse(values, where, present, scope, request=None):
    name = values.get(protocol.II_GROUP)
    if name in (None, ''):
        raise exception.MissingParameterValue(
            _('%(keys)s set, but not %(key)s, the name of the group')
            % {'keys': ', '.join(present),
               'key': where % protocol.II_GROUP})
    if (not isinstance(name, str) or len(name) > protocol.GROUP_NAME_MAX
            or not re.match(protocol.GROUP_NAME_PATTERN, name)):
        raise exception.InvalidParameterValue(
            _('%(where)s must be lowercase letters, digits and "-" (not '
              'first or last), at most %(max)d characters: the members\' '
              'host names are NAME-RANK; got %(value)r')
            % {'where': where % protocol.II_GROUP,
               'max': protocol.GROUP_NAME_MAX, 'value': name})
    size = values.get(protocol.II_GROUP_SIZE)
    try:
        size = int(str(size).strip())
    except ValueError:
        size = None
    if size is None or not 2 <= size <= CONF.container.group_max_size:
        raise exception.InvalidParameterValue(
            _('%(where)s must be the number of nodes in the group, from 2 '
              'to %(max)d ([container]group_max_size); got %(value)r')
            % {'where': where % protocol.II_GROUP_SIZE,
               'max': CONF.container.group_max_size,
               'value': values.get(protocol.II_GROUP_SIZE)})
    launcher = (values.get(protocol.II_GROUP_LAUNCHER)
                or protocol.GROUP_LAUNCHER_SSH)
    if launcher not in protocol.GROUP_LAUNCHERS:
        raise exception.InvalidParameterValue(
            _('%(where)s must be one of %(known)s; got %(value)r')
            % {'where': where % protocol.II_GROUP_LAUNCHER,
               'known': ', '.join(protocol.GROUP_LAUNCHERS),
               'value': launcher})
    return GroupInfo(name=name, size=size, launcher=launcher, scope=scope,
                     request=request)


def network_port(task):
    """The node's port on the group network: ``(mac, address)``, the
    address an ``ipaddress`` interface (with its prefix).

    :raises: InvalidParameterValue saying what the operator must add.
    """
    physnet = CONF.container.group_physical_network
    ports = [p for p in task.ports if p.physical_network == physnet]
    if len(ports) != 1:
        raise exception.InvalidParameterValue(
            _('Node %(node)s cannot join a run group (instance_info/'
              '%(key)s): it needs exactly one port with physical_network '
              '%(physnet)s ([container]group_physical_network), the NIC '
              'on the segment the group\'s members share; it has %(n)d')
            % {'node': task.node.uuid, 'key': protocol.II_GROUP,
               'physnet': physnet, 'n': len(ports)})
    port = ports[0]
    value = (port.extra or {}).get(ADDRESS_KEY)
    try:
        address = ipaddress.ip_interface(str(value))
        if address.network.prefixlen == address.max_prefixlen:
            raise ValueError(_('no prefix'))
    except ValueError:
        raise exception.InvalidParameterValue(
            _('Port %(port)s of node %(node)s (physical_network '
              '%(physnet)s) needs extra/%(key)s, the node\'s address on the '
              'group network with its prefix, e.g. 192.0.2.10/24; got '
              '%(value)r') % {'port': port.uuid, 'node': task.node.uuid,
                              'physnet': physnet, 'key': ADDRESS_KEY,
                              'value': value}) from None
    return port.address.lower(), address
