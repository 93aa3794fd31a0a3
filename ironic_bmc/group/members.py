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

"""Who is in a run group, and which rank each member has.

There is no group object in Ironic's database: each member carries its
own record (``driver_internal_info/bmc_deploy/group``), and any
conductor finds the others by listing the deploying and active nodes
whose record has the same key.  Every member computes the same plan
from the same records (ranks by node name, then UUID), so the members'
conductors need not talk to agree on it.

A member whose deploy failed keeps a short record of why
(:data:`LEFT_KEY`, outside the deploy's own record, which its clean-up
removes) while it is in DEPLOYFAIL, so the members still waiting learn
it.
"""

import dataclasses
import hashlib

from ironic.common import states
from ironic import objects

from bmc_common import protocol
from ironic_bmc import deploy_record

RECORD = 'group'
#: driver_internal_info key of a member that left a group (its deploy
#: failed or was aborted): ``{"key", "at", "reason", "node_name"}``.
LEFT_KEY = 'bmc_group_left'

#: A member's record states.
JOINED = 'joined'        # deploying
STAGED = 'staged'        # its root is staged: at the barrier
RELEASED = 'released'    # woken by the member that completed the group
STARTED = 'started'      # the group's plan is its own; workload started
ENDED = 'ended'          # its run ended (or the group's did)
WAITING = (JOINED, STAGED, RELEASED)

#: Where members (and members that left) are looked for.
LIVE_STATES = (states.DEPLOYING, states.DEPLOYWAIT, states.ACTIVE)
LISTED_STATES = LIVE_STATES + (states.DEPLOYFAIL,)
#: (driver and conductor_group: enough for the RPC topic of a member;
#: instance_uuid: whether Nova holds it.)
FIELDS = ['id', 'uuid', 'name', 'provision_state', 'driver_internal_info',
          'last_error', 'power_state', 'driver', 'conductor_group',
          'instance_uuid']


def record(node):
    """The node's group record, or None."""
    return ((node.driver_internal_info or {}).get(deploy_record.KEY)
            or {}).get(RECORD)


def save_record(node, rec):
    deploy_record.update(node, **{RECORD: rec})


def label(node):
    return node.name or node.uuid


@dataclasses.dataclass
class Member:
    uuid: str
    name: str
    provision_state: str
    rec: dict

    @property
    def label(self):
        return self.name or self.uuid


@dataclasses.dataclass
class View:
    """What the database says of a group, seen by one member."""
    #: Live members with the key, this member included, by plan order.
    members: list
    #: Members that left after this member's deploy began: (label, why).
    left: list
    #: Members of a started group with this key this member is not in.
    running: list


def _order(member):
    return (member.name or '', member.uuid)


def listed(context, key):
    """The nodes with group ``key`` in their record or in the record of
    a group they left (:data:`LEFT_KEY`): ``(node, record, left)``."""
    found = objects.Node.list(
        context, filters={'provision_state_in': list(LISTED_STATES)},
        fields=FIELDS)
    for other in found:
        rec = record(other)
        gone = (other.driver_internal_info or {}).get(LEFT_KEY)
        if (rec or {}).get('key') == key or (gone or {}).get('key') == key:
            yield other, rec, gone


def view(context, node):
    """The group of ``node`` (which has a record) as the database has
    it now."""
    mine = record(node)
    members, left, running = [], [], []
    for other, rec, gone in listed(context, mine['key']):
        # (Its failed deploy's clean-up records it before the node is
        # DEPLOYFAIL.)
        if (gone and gone.get('key') == mine['key']
                and gone.get('at', 0) >= mine['joined_at']):
            left.append((label(other), gone.get('reason') or ''))
            continue
        if (other.provision_state not in LIVE_STATES or not rec
                or rec.get('key') != mine['key']):
            continue
        member = Member(other.uuid, other.name, other.provision_state, rec)
        if other.uuid == node.uuid:
            member.rec = mine
        if rec.get('state') == ENDED and other.uuid != node.uuid:
            continue
        if (rec.get('state') == STARTED and other.uuid != node.uuid
                and node.uuid not in (rec.get('plan') or {}).get(
                    'nodes', ())):
            running.append(member)
            continue
        members.append(member)
    members.sort(key=_order)
    return View(members=members, left=left, running=running)


def plan_id(members):
    """The group run's id: the same for every member's conductor."""
    text = ' '.join('%s:%s' % (m.uuid, m.rec.get('deploy_id'))
                    for m in members)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan(members, name):
    """Ranks and addresses: ``{"id", "nodes", "members": [...]}``."""
    return {
        'id': plan_id(members),
        'nodes': [m.uuid for m in members],
        'members': [{'rank': rank, 'node': m.uuid, 'node_name': m.name,
                     'deploy_id': m.rec.get('deploy_id'),
                     'hostname': protocol.group_hostname(name, rank),
                     'address': m.rec['address'].split('/')[0],
                     'host_key': m.rec['host_key']}
                    for rank, m in enumerate(members)],
    }
