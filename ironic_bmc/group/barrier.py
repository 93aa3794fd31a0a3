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

"""The run group's barrier: no member's workload starts until every
member has staged its root, and then all start.

* ``join`` (the deploy step): the member's record, its keys, its
  group-network port.
* ``arrive`` (the ``bmc_group_barrier`` step, between staging and the
  start): the member is staged.  When every member is, the plan (ranks,
  addresses, keys) is made, the waiting members are woken (under their
  own lock, once: :data:`members.RELEASED`) and this one goes on;
  otherwise the step waits (DEPLOYWAIT, re-entered when woken).
* ``poll`` (a periodic task): wakes a waiting member whose group is
  complete (a lost wake-up), failed, or past
  ``[container]group_barrier_timeout``; the step then decides.

A member that cannot go on fails its own deploy with a message naming
the members at fault; its clean-up (:mod:`lifecycle`) makes the others
fail too.
"""

import time

from ironic.common import exception
from ironic.common import async_steps
from ironic.common.i18n import _
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils
from oslo_log import log

from bmc_common import protocol
from ironic_bmc import deploy_record
from ironic_bmc.conf import CONF
from ironic_bmc.group import keys
from ironic_bmc.group import members
from ironic_bmc import report as run_report

LOG = log.getLogger(__name__)

STEP = 'bmc_group_barrier'
#: Private keys: apart from the record the other members read.
SECRETS = 'group_secrets'


def join(task, group, deploy_id, port):
    """Record the node as a member of ``group`` for deploy ``deploy_id``
    (the ``deploy`` step; the deploy record exists); ``port``: its
    group-network port's ``(mac, address)`` (:func:`info.network_port`)."""
    node = task.node
    mac, address = port
    made = keys.member_keys(node.name or node.uuid)
    node.del_driver_internal_info(members.LEFT_KEY)
    members.save_record(node, {
        'key': group.key, 'name': group.name, 'size': group.size,
        'launcher': group.launcher, 'state': members.JOINED,
        'joined_at': time.time(), 'deploy_id': deploy_id,
        'mac': mac, 'address': str(address),
        # Public keys only: the other members' conductors read them.
        'user_key': made['user'][1],
        'host_key': ' '.join(made['host'][1].split()[:2]),
    })
    deploy_record.update(node, **{SECRETS: {'user': made['user'][0],
                                            'host': made['host'][0]}})


class Outcome:
    def __init__(self, complete=False, error=None, waiting_for=None,
                 found=None):
        self.complete = complete
        self.error = error
        self.waiting_for = waiting_for or []
        self.members = found or []


def _describe(member):
    return '%s (%s%s)' % (member.label, member.provision_state,
                          ', root staged' if member.rec.get('state')
                          in members.WAITING[1:] else '')


def evaluate(context, node, now=None):
    """Whether ``node``'s group can start, must fail, or waits."""
    rec = members.record(node)
    name = '%s (%d nodes)' % (rec['name'], rec['size'])
    seen = members.view(context, node)
    if seen.running:
        return Outcome(error=_(
            'run group %(name)s is running already on %(nodes)s: choose '
            'another instance_info/container_group, or undeploy it')
            % {'name': name,
               'nodes': ', '.join(m.label for m in seen.running)})
    if seen.left:
        return Outcome(error=_('run group %(name)s failed: %(why)s') % {
            'name': name,
            'why': '; '.join(_('member %(m)s failed: %(r)s')
                             % {'m': m, 'r': r or _('no reason recorded')}
                             for m, r in seen.left)})
    found = seen.members
    if len(found) > rec['size']:
        return Outcome(error=_(
            'run group %(name)s has %(n)d nodes deploying: %(nodes)s; '
            'undeploy the extra ones or give them another group name')
            % {'name': name, 'n': len(found),
               'nodes': ', '.join(m.label for m in found)})
    ready = [m for m in found
             if m.rec.get('state') in (members.STAGED, members.RELEASED,
                                       members.STARTED)]
    started = {m.rec['plan']['id'] for m in ready
               if m.rec.get('state') == members.STARTED}
    if len(ready) == rec['size']:
        if started and started != {members.plan_id(ready)}:
            return Outcome(error=_(
                'run group %(name)s: its members disagree on who is in '
                'it (%(nodes)s); undeploy them all and deploy again')
                % {'name': name,
                   'nodes': ', '.join(m.label for m in ready)})
        return Outcome(complete=True, found=ready)
    pending = [m for m in found if m not in ready]
    waiting_for = [_describe(m) for m in pending]
    missing = rec['size'] - len(found)
    if missing:
        waiting_for.append(_('%d more node(s) not deploying with this '
                             'group name') % missing)
    staged_at = rec.get('staged_at')
    now = time.time() if now is None else now
    timeout = CONF.container.group_barrier_timeout
    if staged_at is not None and now - staged_at > timeout:
        return Outcome(error=_(
            'run group %(name)s did not come together: this node waited '
            '%(secs)d s ([container]group_barrier_timeout) with its root '
            'staged for %(missing)s') % {
                'name': name, 'secs': timeout,
                'missing': '; '.join(waiting_for)})
    return Outcome(waiting_for=waiting_for, found=found)


def arrive(task):
    """The barrier step: None to go on, DEPLOYWAIT to wait.

    :raises: InstanceDeployFailure naming why the group cannot start.
    """
    node = task.node
    rec = members.record(node)
    if rec is None:
        return None
    now = time.time()
    if rec['state'] == members.JOINED:
        rec.update(state=members.STAGED, staged_at=now)
        members.save_record(node, rec)
        node.save()
    if rec['state'] == members.STARTED:
        return None
    outcome = evaluate(task.context, node, now)
    if outcome.error:
        raise exception.InstanceDeployFailure(outcome.error)
    if not outcome.complete:
        if rec['state'] == members.RELEASED:
            # Woken, but a member has gone since: wait (and be woken,
            # and polled) again.
            rec['state'] = members.STAGED
            members.save_record(node, rec)
        LOG.info('Node %(node)s waits at the barrier of run group '
                 '%(group)s for %(who)s', {
                     'node': node.uuid, 'group': rec['key'],
                     'who': '; '.join(outcome.waiting_for)})
        async_steps.set_node_flags(node, skip_current_step=False,
                                   polling=True)
        return states.DEPLOYWAIT
    _start(task, rec, outcome.members, now)
    for member in outcome.members:
        if member.uuid != node.uuid and member.rec.get(
                'state') == members.STAGED:
            wake(task.context, member.uuid)
    return None


def _start(task, rec, found, now):
    node = task.node
    plan = members.plan(found, rec['name'])
    plan['authorized_keys'] = [m.rec['user_key'] for m in found]
    rank = plan['nodes'].index(node.uuid)
    rec.update(state=members.STARTED, plan=plan, rank=rank,
               released_at=now)
    members.save_record(node, rec)
    report = run_report.get(node)
    run_report.update(node, report, group={
        'name': rec['name'], 'id': plan['id'], 'rank': rank,
        'size': rec['size'], 'launcher': rec['launcher'],
        'members': [{k: m[k] for k in ('rank', 'node', 'node_name',
                                       'deploy_id', 'hostname',
                                       'address')}
                    for m in plan['members']],
        'barrier': {'staged_at': round(rec['staged_at'], 3),
                    'released_at': round(now, 3),
                    'waited_s': round(now - rec['staged_at'], 3)},
        'state': protocol.RUN_RUNNING})
    LOG.info('Run group %(group)s (%(id)s) complete: node %(node)s is '
             'rank %(rank)d of %(size)d', {
                 'group': rec['key'], 'id': plan['id'], 'node': node.uuid,
                 'rank': rank, 'size': rec['size']})


def wake(context, node_uuid):
    """Resume a member waiting at the barrier, once (under its lock)."""
    try:
        with task_manager.acquire(context, node_uuid,
                                  purpose='waking a run group member') as t:
            rec = members.record(t.node)
            if not (rec and rec.get('state') == members.STAGED
                    and t.node.provision_state == states.DEPLOYWAIT
                    and (t.node.deploy_step or {}).get('step') == STEP):
                return False
            rec['state'] = members.RELEASED
            members.save_record(t.node, rec)
            t.node.save()
            manager_utils.notify_conductor_resume_deploy(t)
            return True
    except (exception.NodeLocked, exception.NodeNotFound) as exc:
        # The member's own poll wakes it.
        LOG.info('Could not wake run group member %(node)s now: %(err)s',
                 {'node': node_uuid, 'err': exc})
        return False


def waiting(node):
    """Whether the node waits at the barrier (the periodic's predicate)."""
    rec = members.record(node)
    return bool(rec and rec.get('state') == members.STAGED
                and (node.deploy_step or {}).get('step') == STEP)


def poll(task):
    """The periodic's look at a waiting member (shared lock)."""
    outcome = evaluate(task.context, task.node)
    if outcome.complete or outcome.error:
        wake(task.context, task.node.uuid)


def start_args(node):
    """The start step's ``group`` argument (see the protocol)."""
    rec = members.record(node)
    if not rec:
        return None
    secrets = node.driver_internal_info[deploy_record.KEY][SECRETS]
    plan = rec['plan']
    return {
        'name': rec['name'], 'id': plan['id'], 'rank': rec['rank'],
        'size': rec['size'], 'launcher': rec['launcher'],
        'interface': {'mac': rec['mac'], 'address': rec['address']},
        'members': [{k: m[k] for k in ('rank', 'hostname', 'address',
                                       'host_key')}
                    for m in plan['members']],
        'ssh': {'private_key': secrets['user'], 'host_key': secrets['host'],
                'authorized_keys': plan['authorized_keys']},
        'peer_wait': CONF.container.group_peer_wait,
    }
