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

"""A run group lives and ends as one.

* A member whose deploy fails (or is aborted) leaves a short record of
  why (:data:`members.LEFT_KEY`) and wakes the members waiting at the
  barrier: they fail too, naming it (:mod:`barrier`).
* A member whose run ends (its workload exited, its agent was lost, its
  power went) marks its record ended; every other member's next
  workload poll (:func:`group_end`) stops its workload, and its report
  says which member ended the group and why.  With the ``ssh`` launcher
  rank 0's exit is the job's end: the group ends, and ends well if rank
  0's command exited 0.  With ``none`` the group ends when one member
  fails, or when all have exited.
* Undeploying one member of a started group undeploys the others of
  its plan (:func:`undeploy_others`), but for members a Nova server
  holds: Nova undeploys each when its server is deleted.
"""

import time

from ironic.common import exception
from ironic.common.i18n import _
from ironic.common import states
from ironic.conductor import rpcapi
from ironic import objects
from oslo_log import log

from bmc_common import protocol
from ironic_bmc.group import barrier
from ironic_bmc.group import members
from ironic_bmc import report as run_report

LOG = log.getLogger(__name__)

REASON_MAX = 500


def left(task):
    """``clean_up`` of a member (its deploy record still there): a failed
    deploy leaves its reason for the others; an undeploy takes the whole
    group with it."""
    node = task.node
    rec = members.record(node)
    if node.provision_state == states.DELETING:
        node.del_driver_internal_info(members.LEFT_KEY)
        if rec and rec.get('plan'):
            undeploy_others(task, rec['key'], rec['plan'])
        return
    if not rec or node.provision_state not in (states.DEPLOYING,
                                               states.DEPLOYWAIT):
        return
    reason = (node.last_error or _('the deploy was aborted'))[:REASON_MAX]
    node.set_driver_internal_info(members.LEFT_KEY, {
        'key': rec['key'], 'at': time.time(), 'reason': reason})
    # Saved before the others are woken: they read it.
    node.save()
    for member in members.view(task.context, node).members:
        if (member.uuid != node.uuid
                and member.rec.get('state') == members.STAGED):
            barrier.wake(task.context, member.uuid)


def undeploy_others(task, key, plan):
    """Ask each other member's conductor to undeploy it.

    Only the members of this node's started group (its ``plan``: the
    nodes it started with, which had this node in their plan too): a
    node whose group never started undeploys nobody else, and a node
    that merely has the same key (a stale record, a node that was
    refused at the barrier) is never touched.  The members still
    waiting at the barrier wait for another node, up to
    ``[container]group_barrier_timeout``.

    Not a member that an instance (a Nova server) holds: its server's
    deletion undeploys it.  Torn down behind Nova's back, the node is
    no longer ACTIVE when Nova deletes the server, and the deletion
    fails or hangs.  (Its run is ended all the same: the group ended.)
    """
    api = rpcapi.ConductorAPI()
    planned = set(plan.get('nodes') or ())
    for other, rec, _gone in members.listed(task.context, key):
        if other.uuid == task.node.uuid or other.uuid not in planned:
            continue
        if ((rec or {}).get('plan') or {}).get('id') != plan.get('id'):
            # In the plan, but since deployed into another run.
            continue
        if other.instance_uuid:
            LOG.info('Not undeploying node %(other)s with node %(node)s '
                     '(run group %(key)s): instance %(instance)s holds it, '
                     'and deleting that undeploys it',
                     {'other': other.uuid, 'node': task.node.uuid,
                      'key': key, 'instance': other.instance_uuid})
            continue
        try:
            api.do_node_tear_down(task.context, other.uuid,
                                  topic=api.get_topic_for(other))
            LOG.info('Undeploying node %(other)s with node %(node)s: '
                     'both are members of run group %(key)s',
                     {'other': other.uuid, 'node': task.node.uuid,
                      'key': key})
        except (exception.InvalidStateRequested, exception.NodeLocked,
                exception.NodeNotFound, exception.NoValidHost,
                exception.ServiceUnavailable) as exc:
            # Being undeployed already (by another member's tear-down),
            # or busy: said, not fatal to this node's undeploy.
            LOG.warning('Could not undeploy node %(other)s with run group '
                        '%(key)s: %(err)s', {'other': other.uuid,
                                             'key': key, 'err': exc})


def _ending(rec, report):
    """``(ends the group, ends it well)`` for a member whose run ended."""
    code = report.get('workload_exit_code')
    ok = report.get('state') == protocol.RUN_FINISHED and code == 0
    if rec.get('launcher') == protocol.GROUP_LAUNCHER_SSH:
        return True, ok and rec.get('rank') == 0
    return not ok, ok


def run_ended(task, by_group=False):
    """A member's run has just ended (the workload watcher recorded it):
    mark its record ended; the others' polls end theirs.  ``by_group``:
    it was stopped because its group had ended.

    :returns: the other members' node UUIDs ([] outside a group).
    """
    node = task.node
    rec = members.record(node)
    report = run_report.get(node)
    if not rec or rec.get('state') != members.STARTED or not report:
        return []
    ends, ok = (False, True) if by_group else _ending(rec, report)
    why = (_('rank %(rank)d (%(node)s) %(how)s') % {
        'rank': rec['rank'], 'node': members.label(node),
        'how': (_('exited with code %s') % report.get('workload_exit_code')
                if report.get('state') == protocol.RUN_FINISHED
                else (report.get('error') or report.get('state')))})
    rec.update(state=members.ENDED, ended={
        'at': time.time(), 'ends_group': ends, 'ok': ok,
        'reason': why[:REASON_MAX]})
    members.save_record(node, rec)
    section = dict(report.get('group') or {}, state='ended')
    if ends:
        section['ended_by'] = {'rank': rec['rank'], 'node': node.uuid,
                               'reason': why[:REASON_MAX], 'ok': ok}
    run_report.update(node, report, group=section)
    node.save()
    return [uuid for uuid in rec['plan']['nodes'] if uuid != node.uuid]


def group_end(context, node):
    """Whether a running member's group has ended: ``{"rank", "node",
    "reason", "ok"}`` of the member that ended it, else None."""
    rec = members.record(node)
    if not rec or rec.get('state') != members.STARTED:
        return None
    plan = rec['plan']
    found = {n.uuid: n for n in objects.Node.list(
        context, filters={'uuid_in': plan['nodes']}, fields=members.FIELDS)}
    for entry in plan['members']:
        other = found.get(entry['node'])
        if entry['node'] == node.uuid:
            continue
        other_rec = members.record(other) if other else None
        # (A member whose start is still being recorded is DEPLOYWAIT
        # or DEPLOYING a moment longer.)
        if (other is None or other.provision_state not in members.LIVE_STATES
                or not other_rec or other_rec.get('plan', {}).get(
                    'id') != plan['id']):
            gone = ((other.driver_internal_info or {}).get(members.LEFT_KEY)
                    if other else None) or {}
            return {'rank': entry['rank'], 'node': entry['node'],
                    'ok': False,
                    'reason': _('rank %(rank)d (%(node)s) left the group '
                                '(%(state)s)%(why)s') % {
                        'rank': entry['rank'],
                        'node': entry['node_name'] or entry['node'],
                        'state': other.provision_state if other
                        else _('deleted'),
                        'why': ': ' + gone['reason']
                        if gone.get('key') == rec['key'] else ''}}
        ended = other_rec.get('ended') if other_rec.get(
            'state') == members.ENDED else None
        if ended and ended.get('ends_group'):
            return {'rank': entry['rank'], 'node': entry['node'],
                    'ok': ended.get('ok', False),
                    'reason': ended.get('reason')}
    return None
