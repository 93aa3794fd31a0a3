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

"""How a container run ends, and what it leaves in its report.

A run ends in one of four ways, each recorded once:

* ``finished``: a job's workload exited and the node was powered off
  (:func:`record_exit`, from the workload watcher);
* ``undeployed``: the node was undeployed while the workload ran, or
  after a service's workload exited;
* ``failed``: the deploy failed or was aborted; the report carries the
  error Ironic recorded in ``last_error``;
* a new deploy of the same node (rebuild, retried deploy) ends the
  previous run first (:func:`end_previous`).

Ironic calls ``clean_up`` *before* ``tear_down`` on undeploy, and
``clean_up`` alone when a deploy fails or is aborted: whichever runs
first closes the run (:func:`close`), while the agent's URL is still
known, so its last workload state, the power-off, the energy and the
final state are all in the report.
"""

import time

from ironic.common import exception
from ironic.common.i18n import _
from ironic.common import states
from ironic.conductor import utils as manager_utils
from oslo_log import log

from bmc_common import protocol
from ironic_bmc import agent_replies
from ironic_bmc import deploy_record
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import energy
from ironic_bmc.drivers import node_boot
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import stream_report
from ironic_bmc.kernel import run_profile
from ironic_bmc import report as run_report
from ironic_bmc import run_files

LOG = log.getLogger(__name__)



def finish_energy(node, report, status=None):
    """The energy section: the BMC's and the agent's RAPL; RAPL alone
    when the BMC could not give any (or the node has none)."""
    unavailable = report.get('energy') or {}
    if unavailable.get('available') is False:
        energy.stop(node)
        run_report.update(node, report, energy=energy.with_rapl(
            unavailable, (status or {}).get('rapl')))
        return
    stages = {s['name']: s for s in report['stages']}
    started = stages.get(protocol.STAGE_WORKLOAD_STARTED, {})
    exited = stages.get(protocol.STAGE_WORKLOAD_EXITED, {})
    section = energy.finish(node, started.get('end'), exited.get('end'),
                            rapl=(status or {}).get('rapl'),
                            deploy_id=report['deploy_id'])
    takeovers = report.get('takeovers')
    if takeovers and section.get('available', True) is not False:
        # The conductor that sampled before the take-over kept its samples.
        section['complete'] = False
        section['note'] = ('BMC samples from %s on only, when conductor %s '
                           'took the node over; the earlier samples were '
                           'on the previous conductor'
                           % (takeovers[-1]['time'],
                              takeovers[-1]['conductor']))
    run_report.update(node, report, energy=section)


def record_exit(task, status, failure=None):
    """The workload has exited: record it; a job's run ends here.

    ``failure``: why the run failed whatever the exit says (its run group
    ended badly), recorded with the exit, not after it.
    """
    node = task.node
    report = run_report.get(node)
    # The agent times the workload with the node's clock.
    agent_stages = {s['name']: s for s in status.get('stages') or []}
    exited = agent_stages.get(protocol.STAGE_WORKLOAD_EXITED)
    if exited:
        start, end = exited['start'], exited['end']
    else:
        started = {s['name']: s for s in report['stages']}.get(
            protocol.STAGE_WORKLOAD_STARTED, {})
        end = time.time()
        start = started.get('end', end)
    run_report.add_stage(node, report, protocol.STAGE_WORKLOAD_EXITED,
                         start, end)
    run_report.update(node, report, state=protocol.RUN_EXITED,
                      workload_exit_code=status.get('exit_code'),
                      output_tail=status.get('output_tail', ''))
    LOG.info('Workload on node %(node)s exited with code %(code)s',
             {'node': node.uuid, 'code': status.get('exit_code')})
    timeout = _walltime_end(node, report, status)
    refused = collect(task, report)
    integrity = status.get('integrity')
    if integrity:
        # The root's content was not what the conductor built: the run
        # failed, whatever the workload made of its failed read.
        integrity = (_('Workload on node %(node)s failed: %(why)s')
                     % {'node': node.uuid, 'why': integrity})
        LOG.error(integrity)
        run_report.update(node, report, error=integrity)
    elif failure:
        run_report.update(node, report, error=failure)
    failed = integrity or failure
    if report['mode'] == protocol.MODE_JOB:
        t_off = time.time()
        manager_utils.node_power_action(task, states.POWER_OFF)
        run_report.add_stage(node, report, protocol.STAGE_POWERED_OFF,
                             t_off, time.time())
        finish_energy(node, report, status)
        run_report.update(node, report, state=protocol.RUN_FAILED
                          if failed or timeout or refused
                          else protocol.RUN_FINISHED)
    elif failure:
        run_report.update(node, report, state=protocol.RUN_FAILED)
    if refused:
        manager_utils.node_history_record(node, event=refused,
                                          event_type='monitoring',
                                          error=True)
    if timeout:
        manager_utils.node_history_record(node, event=timeout,
                                          event_type='monitoring')
    if failed:
        # last_error, and the node's history (after the power action,
        # which clears the former).
        manager_utils.node_history_record(node, event=failed,
                                          event_type='monitoring',
                                          error=True)
    node.save()


def collect(task, report):
    """Bring the run's kept output and its result files
    (``container_results``) from the agent, next to the report.

    :returns: None, or the error when the node's reply broke the
        protocol (the run failed then; the report says so).
    """
    node = task.node
    info = deploy_record.get(node)
    wanted = info.get('results') or []
    try:
        collected = agent_calls.call(
            task, protocol.STEP_COLLECT_OUTPUT,
            args={'results': wanted,
                  'max_bytes': CONF.container.results_max_mb * 1024 * 1024},
            timeout=120)
        output, results = run_files.save(node, report['deploy_id'],
                                         collected, wanted)
    except agent_replies.AgentReplyInvalid as exc:
        message = (_('The output and results of the run on node %(node)s '
                     'were refused: %(err)s') % {'node': node.uuid,
                                                  'err': exc})
        LOG.error(message)
        run_report.update(node, report, error=message, output={
            'error': _('refused: %s') % exc})
        return message
    except (exception.IronicException, OSError, ValueError) as exc:
        LOG.warning('Could not bring the output and results of the run '
                    'on node %(node)s to the conductor: %(err)s',
                    {'node': node.uuid, 'err': exc})
        run_report.update(node, report, output={
            'error': _('not collected: %s') % exc})
        return None
    fields = {'output': output}
    if wanted:
        fields['results'] = results
    run_report.update(node, report, **fields)
    if info.get('kernel_profile'):
        return collect_kernel_profile(task, report)
    return None


def collect_kernel_profile(task, report):
    """Bring a profiling run's kernel profile next to its report.

    :returns: None, or the error when the node's reply broke the
        protocol (the run failed then).
    """
    node = task.node
    try:
        reply = agent_calls.call(
            task, protocol.STEP_COLLECT_KERNEL_PROFILE,
            args={'max_bytes': run_profile.max_bytes()}, timeout=300)
        section = run_profile.save(node, report['deploy_id'], reply)
    except agent_replies.AgentReplyInvalid as exc:
        message = (_('The kernel profile of the run on node %(node)s was '
                     'refused: %(err)s') % {'node': node.uuid, 'err': exc})
        LOG.error(message)
        run_report.update(node, report, error=message,
                          kernel_profile={'error': _('refused: %s') % exc})
        return message
    except (exception.IronicException, OSError, ValueError) as exc:
        # The node has no profile to give (not a gcov kernel, too big):
        # the workload's own result stands; a pgo build cannot use it.
        LOG.warning('No kernel profile from the run on node %(node)s: '
                    '%(err)s', {'node': node.uuid, 'err': exc})
        run_report.update(node, report, kernel_profile={
            'error': _('not collected: %s') % exc})
        return None
    LOG.info('Kept the kernel profile of the run on node %(node)s: '
             '%(files)d .gcda files, %(bytes)d bytes, counted on kernel '
             'build %(build)s', {'node': node.uuid, 'files': section['files'],
                                 'bytes': section['bytes'],
                                 'build': section['kernel_build']})
    run_report.update(node, report, kernel_profile=section)
    return None


def _walltime_end(node, report, status):
    """The agent ended the workload at its walltime: say so; the
    message, or None."""
    stop = status.get('stop') or {}
    if stop:
        run_report.update(node, report, stop=stop)
    if stop.get('reason') != protocol.STOP_WALLTIME:
        return None
    message = (_('The workload on node %(node)s ran for its whole walltime '
                 '(%(key)s: %(secs)s s) and was ended: %(signal)s%(kill)s')
               % {'node': node.uuid, 'key': protocol.II_WALLTIME,
                  'secs': status.get('walltime'), 'signal': stop['signal'],
                  'kill': (_(', then SIGKILL after %s s') % stop['grace']
                           if stop.get('killed') else '')})
    LOG.warning(message)
    run_report.update(node, report, error=message, walltime_exceeded=True)
    return message


def stop_workload(task, reason=protocol.STOP_UNDEPLOY):
    """Ask the agent to stop a running workload gracefully (its image's
    StopSignal, SIGKILL to its cgroup after [container]stop_grace_period);
    its last status, or None when the agent does not answer."""
    node = task.node
    grace = CONF.container.stop_grace_period
    try:
        # The agent waits grace, then up to 10 s for the SIGKILL.
        status = agent_calls.call(
            task, protocol.STEP_STOP_WORKLOAD,
            args={'grace': grace, 'reason': reason},
            timeout=grace + 30)
        return agent_replies.workload_status(node, status,
                                             _('the stop reply'))
    except agent_replies.AgentReplyInvalid:
        raise
    except exception.IronicException as exc:
        LOG.warning('Could not stop the workload of node %(node)s '
                    'gracefully; powering it off: %(err)s',
                    {'node': node.uuid, 'err': exc})
        return None


def _record_final(node, report, status):
    """What the agent said last about a workload that ran until the
    undeploy: its output, how it ended."""
    stream_report.record(node, report, status)
    fields = {'output_tail': status.get('output_tail', '')}
    if status.get('stop'):
        fields['stop'] = status['stop']
    if status.get('state') == protocol.WORKLOAD_EXITED:
        fields['workload_exit_code'] = status.get('exit_code')
        exited = {s['name']: s for s in status.get('stages') or []}.get(
            protocol.STAGE_WORKLOAD_EXITED)
        if exited:
            run_report.add_stage(node, report, protocol.STAGE_WORKLOAD_EXITED,
                                 exited['start'], exited['end'])
    run_report.update(node, report, **fields)


def close(task):
    """End the run's report once; a no-op when already ended."""
    node = task.node
    report = run_report.get(node)
    if not report or report.get('state') in protocol.RUN_FINAL_STATES:
        return
    state = report.get('state')
    status = refused = None
    if state == protocol.RUN_RUNNING and agent_calls.reachable(node):
        try:
            status = stop_workload(task)
        except agent_replies.AgentReplyInvalid as exc:
            refused = str(exc)
            LOG.error('%s; powering the node off', refused)
    if status:
        _record_final(node, report, status)
        if status.get('state') == protocol.WORKLOAD_EXITED:
            refused = collect(task, report)
    t_off = time.time()
    if node.power_state != states.POWER_OFF:
        # (A failed deploy's clean-up runs before DEPLOYFAIL: its reason
        # must outlive the power action.)
        node_boot.power_off_keeping_error(task)
    if state == protocol.RUN_DEPLOYING:
        # A deploy that failed or was aborted; Ironic has recorded why in
        # last_error (node history) before cleaning up.
        if report['stages']:
            run_report.add_stage(node, report, protocol.STAGE_POWERED_OFF,
                                 t_off, time.time())
        energy.stop(node)
        run_report.update(node, report, state=protocol.RUN_FAILED,
                          error=node.last_error
                          or _('the deploy was aborted'))
    else:
        run_report.add_stage(node, report, protocol.STAGE_POWERED_OFF,
                             t_off, time.time())
        finish_energy(node, report, status)
        run_report.update(node, report, state=protocol.RUN_UNDEPLOYED)
        if refused:
            run_report.update(node, report, error=refused)
    node.save()


def end_previous(task):
    """A rebuild (or a retried deploy) runs ``deploy`` on a node that may
    still hold the previous run: close its report and release its URL,
    cache pin, agent and power sampling."""
    node = task.node
    close(task)
    boot_files.unpublish_artifact(task)
    rootfs.release(node)
    agent_calls.forget(node)
    energy.stop(node)
    node.del_driver_internal_info(deploy_record.KEY)
