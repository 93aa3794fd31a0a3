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

"""Watching a running workload through the agent next to it.

Every ``[container]workload_poll_interval`` seconds, and when the agent
heartbeats because the workload ended, the conductor asks the agent for
the workload's state (with a shared lock):

* ``running``: nothing to do;
* ``exited``: the exit is recorded (a job's run ends, see
  :func:`run_close.record_exit`);
* ``absent``: the agent answering does not know the workload (the node
  rebooted, or the agent restarted): the run is lost;
* no answer: after ``[container]workload_lost_timeout`` seconds without
  one (the node lost power, the agent died, the network is gone) the run
  is lost.

The periodic task only hands each running node to a pool of
``[container]workload_watch_workers`` threads (:func:`check_soon`), one
poll of a node at a time: an agent that answers slowly, or not at all (a
node's root can make it so), holds one worker for at most its call's
timeout and delays no other node's poll.

A lost run ends ``failed`` with the reason in the report and in the
node's ``last_error``; the node is powered off, so it is in a known state
and draws no power for a run nobody watches.  It stays ACTIVE until it is
undeployed, like a finished job.

A run group's member (:mod:`ironic_bmc.group`) also ends when its group
does: its workload is stopped, and its report names the member that
ended the group.
"""

import threading
import time

import futurist
from ironic.common import exception
from ironic.common.i18n import _
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils
from oslo_log import log

from bmc_common import protocol
from ironic_bmc import agent_replies
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import energy
from ironic_bmc.drivers import run_close
from ironic_bmc.drivers import stream_report
from ironic_bmc.group import lifecycle as group_lifecycle
from ironic_bmc import report as run_report

LOG = log.getLogger(__name__)

#: (node UUID, deploy ID) -> (monotonic time of the first unanswered poll,
#: the last error), for this conductor's polls.
_unanswered = {}


def _status(task, notify_exit=False):
    status = agent_calls.call(task, protocol.STEP_WORKLOAD_STATUS,
                              args={'notify_exit': True} if notify_exit
                              else None, timeout=30)
    return agent_replies.workload_status(task.node, status,
                                         _('the workload status'))


#: The nodes the periodic watch looks at (node_periodic filters)...
FILTERS = {'provision_state': states.ACTIVE, 'reserved': False,
           'maintenance': False}


def running(node):
    """... and of those, the ones whose run is on (its predicate)."""
    return (run_report.get(node) or {}).get('state') == protocol.RUN_RUNNING


def watched(node):
    """Whether the node's workload is watched (by the periodic, whatever
    its lock)."""
    return (node.provision_state == FILTERS['provision_state']
            and bool(node.maintenance) == FILTERS['maintenance']
            and running(node))


def on_heartbeat(task):
    """A heartbeat of the agent next to a running workload: it means the
    workload ended (the agent heartbeats again only then): look now."""
    node = task.node
    if watched(node):
        LOG.info('The agent of node %s heartbeats: its workload '
                 'ended; reading it now', node.uuid)
        try:
            check(task)
        except exception.NodeLocked as exc:
            # E.g. a dead conductor's lock, until its take-over
            # clears it: not the run's error.  The periodic watch
            # reads the workload once the node is free.
            LOG.info('Node %(node)s is locked; its workload is '
                     'read by the periodic watch: %(err)s',
                     {'node': node.uuid, 'err': exc})
    else:
        LOG.debug('Heartbeat from node %(node)s, whose workload is '
                  'not watched (run %(state)s); nothing to do',
                  {'node': node.uuid, 'state': run_report.get(
                      node).get('state')})


#: How long after the deploy's last step the first check may wait for
#: the deploy to end (Ironic's own bookkeeping after the last step).
ARM_WITHIN = 60
ARM_PACE = 0.25


def arm_soon(context, node_uuid, deploy_id):
    """Run the first check as soon as the deploy has ended, from a
    thread of its own: it puts the agent's token back and tells the agent
    to heartbeat at its workload's end, so that a short job need not wait
    for the first poll either."""
    thread = threading.Thread(target=_first_check,
                              args=(context, node_uuid, deploy_id),
                              name='bmc-first-check-%s' % node_uuid,
                              daemon=True)
    thread.start()
    return thread


def _first_check(context, node_uuid, deploy_id):
    deadline = time.monotonic() + ARM_WITHIN
    while time.monotonic() < deadline:
        time.sleep(ARM_PACE)
        try:
            with task_manager.acquire(context, node_uuid, shared=True,
                                      purpose='first container workload '
                                              'check') as task:
                node = task.node
                if node.provision_state in (states.DEPLOYING,
                                            states.DEPLOYWAIT):
                    continue    # Ironic is ending the deploy
                if (watched(node) and run_report.get(node)['deploy_id']
                        == deploy_id):
                    check(task)
                return
        except exception.NodeLocked:
            # Busy (a heartbeat, a poll of its own): nothing is lost.
            LOG.info('Node %s is busy; its workload is checked by the '
                     'periodic watch instead of a first check', node_uuid)
            return
        except Exception:
            LOG.exception('The first check of the workload of node %s '
                          'failed; the periodic one follows', node_uuid)
            return


#: The pool the periodic watch hands its nodes to, made at first use
#: (its size is read from the configuration then).
_pool = None
_pool_lock = threading.Lock()
#: UUIDs of the nodes whose poll is queued or runs in the pool.
_in_flight = set()


def _get_pool():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = futurist.ThreadPoolExecutor(
                max_workers=CONF.container.workload_watch_workers)
        return _pool


def check_soon(context, node_uuid):
    """Poll the node's workload in the watch pool, not in the caller's
    thread (the periodic task's).  A node whose previous poll has not
    ended yet is skipped: its agent is slow, and the poll under way
    records what it finds.

    :returns: the poll's future, or None when one is under way.
    """
    with _pool_lock:
        if node_uuid in _in_flight:
            LOG.debug('The previous poll of the workload of node %s has not '
                      'ended; not polling it again yet', node_uuid)
            return None
        _in_flight.add(node_uuid)
    try:
        return _get_pool().submit(_pooled_check, context, node_uuid)
    except BaseException:
        with _pool_lock:
            _in_flight.discard(node_uuid)
        raise


def _pooled_check(context, node_uuid):
    try:
        with task_manager.acquire(context, node_uuid, shared=True,
                                  purpose='watching a container '
                                          'workload') as task:
            if watched(task.node):
                check(task)
    except (exception.NodeLocked, exception.NodeNotFound) as exc:
        # Undeployed, or busy (a heartbeat's check, an undeploy): the
        # next period looks again.
        LOG.info('Not polling the workload of node %(node)s now: %(err)s',
                 {'node': node_uuid, 'err': exc})
    except Exception:
        LOG.exception('Polling the workload of node %s failed; the next '
                      'period tries again', node_uuid)
    finally:
        with _pool_lock:
            _in_flight.discard(node_uuid)


def check(task):
    """One poll of a running node's workload (shared lock held); the run
    report's file is written once, whatever the poll records."""
    with run_report.batch(task.node):
        _check(task)


def _check(task):
    """One poll of a running node's workload (shared lock held).

    The agent is told that its heartbeats are accepted again: it sends
    one when the workload ends on its own, and :func:`check` runs then
    (see ContainerDeploy.heartbeat), not only every poll interval.
    """
    notify_exit = agent_calls.accept_heartbeats(task)
    node = task.node
    if not watched(node):
        return
    deploy_id = run_report.get(node)['deploy_id']
    key = (node.uuid, deploy_id)
    ended = group_lifecycle.group_end(task.context, node)
    if ended:
        _end_with_group(task, deploy_id, ended)
        return
    try:
        status = _status(task, notify_exit=notify_exit)
    except agent_replies.AgentReplyInvalid as exc:
        # Not a silence to wait out: the node broke the protocol (its
        # workload is root next to the agent).  The run ends here.
        LOG.error('%s', exc)
        status = None
        reason = (_('the node answered outside the protocol, so nothing '
                    'more it says is read: %s') % exc)
    except exception.IronicException as exc:
        first, _last = _unanswered.get(key, (time.monotonic(), None))
        _unanswered[key] = (first, str(exc))
        silent = time.monotonic() - first
        LOG.warning('Cannot get the workload state of node %(node)s '
                    '(%(secs)d s without an answer): %(err)s',
                    {'node': node.uuid, 'secs': silent, 'err': exc})
        if silent < CONF.container.workload_lost_timeout:
            return
        reason = (_('the agent next to the workload has not answered for '
                    '%(secs)d seconds ([container]workload_lost_timeout); '
                    'last error: %(err)s')
                  % {'secs': silent, 'err': exc})
        status = None
    else:
        _unanswered.pop(key, None)
        state = status.get('state')
        if state == protocol.WORKLOAD_RUNNING and not stream_report.news(
                run_report.get(node), status):
            return
        reason = None
        if state not in (protocol.WORKLOAD_EXITED, protocol.WORKLOAD_RUNNING):
            reason = (_('the agent on the node no longer knows the workload '
                        '(state %(state)s): the node rebooted or the agent '
                        'restarted') % {'state': state})
    task.upgrade_lock()
    # The exclusive lock reloads the node: it may have been undeployed or
    # redeployed while the agent was asked (with a shared lock).
    report = run_report.get(task.node)
    if (task.node.provision_state != states.ACTIVE or not report
            or report.get('deploy_id') != deploy_id
            or report.get('state') != protocol.RUN_RUNNING):
        LOG.info('Node %(node)s changed while its workload state was read; '
                 'not recording anything', {'node': task.node.uuid})
        _unanswered.pop(key, None)
        return
    _unanswered.pop(key, None)
    if status is not None:
        stream_report.record(task.node, report, status)
    if reason is None and status.get('state') == protocol.WORKLOAD_RUNNING:
        # The stream's image became local (or its background fetch
        # failed) while the workload runs on.
        task.node.save()
    elif reason is None:
        run_close.record_exit(task, status)
        _ended_in_group(task)
    else:
        record_lost(task, reason)
        _ended_in_group(task)


def _ended_in_group(task):
    """A group member's run ended: the other members look now (the ones
    this conductor watches), not at their next poll."""
    for other in group_lifecycle.run_ended(task):
        check_soon(task.context, other)


def _end_with_group(task, deploy_id, ended):
    """The member's group has ended: stop its workload (the exit is
    recorded as any exit is) and say which member ended the group."""
    task.upgrade_lock()
    node = task.node
    report = run_report.get(node)
    if (node.provision_state != states.ACTIVE or not report
            or report.get('deploy_id') != deploy_id
            or report.get('state') != protocol.RUN_RUNNING):
        return
    why = (_('run group %(group)s ended: %(reason)s')
           % {'group': (report.get('group') or {}).get('name'),
              'reason': ended['reason']})
    LOG.info('Stopping the workload of node %(node)s: %(why)s',
             {'node': node.uuid, 'why': why})
    run_report.update(node, report, group=dict(
        report.get('group') or {}, ended_by=ended))
    status = None
    try:
        status = run_close.stop_workload(task, reason=protocol.STOP_REQUEST)
    except agent_replies.AgentReplyInvalid as exc:
        LOG.error('%s', exc)
    if status and status.get('state') == protocol.WORKLOAD_EXITED:
        stream_report.record(node, report, status)
        # (The failure is recorded with the exit: no reader sees the run
        # "finished" first.)
        run_close.record_exit(task, status,
                              failure=None if ended.get('ok') else why)
    else:
        record_lost(task, why)
    group_lifecycle.run_ended(task, by_group=True)
    node.save()


def record_lost(task, reason):
    """The run is lost: say why, power the node off."""
    node = task.node
    report = run_report.get(node)
    message = (_('Container run %(run)s on node %(node)s is lost: '
                 '%(why)s. The node is powered off; undeploy it to free '
                 'it.') % {'run': report['deploy_id'], 'node': node.uuid,
                           'why': reason})
    LOG.error(message)
    t_off = time.time()
    if node.power_state != states.POWER_OFF:
        try:
            manager_utils.node_power_action(task, states.POWER_OFF)
        except exception.IronicException as exc:
            message += ' ' + (_('Powering it off failed: %s') % exc)
    run_report.add_stage(node, report, protocol.STAGE_POWERED_OFF, t_off,
                         time.time())
    energy.stop(node)
    run_report.update(node, report, state=protocol.RUN_FAILED, error=message)
    # last_error, and the node's history (a power sync clears the former).
    manager_utils.node_history_record(node, event=message,
                                      event_type='monitoring', error=True)
    node.save()
