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

"""Talking to the agent of an ACTIVE container node.

Ironic forgets the agent's URL and token when a deploy ends; a container
node's agent stays up next to the workload, so the deploy keeps them
(``remember``) and calls in-band steps synchronously through a copy of the
node that knows them again (``call``).

Nothing a running node answers is trusted (its workload is root next to
the agent): replies are bounded in size and time (agent_replies), the
result read is the one of the command this call started (by its id), and
a reply of the wrong shape raises ``AgentReplyInvalid``.
"""

from ironic.common import exception
from ironic.common.i18n import _
from ironic.drivers.modules import agent_client
import tenacity

from ironic_bmc import agent_replies
from ironic_bmc.conf import CONF

#: driver_internal_info key; masked by the API like every *token* key.
AGENT_KEY = 'bmc_agent'
_FIELDS = ('agent_url', 'agent_verify_ca', 'agent_secret_token')


def remember(node):
    node.set_driver_internal_info(AGENT_KEY, {
        k: node.driver_internal_info.get(k) for k in _FIELDS})


def forget(node):
    node.del_driver_internal_info(AGENT_KEY)


def accept_heartbeats(task):
    """Have Ironic accept the heartbeats of the agent next to a running
    workload again: it forgets the agent's token when the deploy ends
    (and after each service step).  Upgrades the lock when the token
    must be put back.  Whether the agent's heartbeats are accepted now.
    """
    kept = (task.node.driver_internal_info.get(AGENT_KEY) or {}).get(
        'agent_secret_token')
    if not kept:
        return False
    if task.node.driver_internal_info.get('agent_secret_token') == kept:
        return True
    task.upgrade_lock()
    node = task.node        # reloaded by the exclusive lock
    if (node.driver_internal_info.get(AGENT_KEY) or {}).get(
            'agent_secret_token') != kept:
        return False        # another run by now
    node.set_driver_internal_info('agent_secret_token', kept)
    node.save()
    return True


def with_agent(node, agent=None):
    """A copy of ``node`` (never saved) that knows the agent again:
    ``agent``'s fields (URL, token, CA; default: those :func:`remember`
    kept) over its own."""
    copy = node.obj_clone()
    if agent is None:
        agent = copy.driver_internal_info.get(AGENT_KEY) or {}
    for key, value in agent.items():
        if value is not None:
            copy.driver_internal_info[key] = value
    return copy


def reachable(node):
    return bool((node.driver_internal_info.get(AGENT_KEY) or {})
                .get('agent_url'))


#: Bytes of any one reply besides the run's output and result files.
REPLY_SLACK = 1024 * 1024


def reply_max_bytes():
    """The most one agent reply may hold: the output and result files
    of a run (gzip then base64: 4/3 of them at worst), and slack.  The
    agent's command list repeats every result it still holds, so every
    reply gets this bound."""
    kept = (CONF.container.output_max_mb
            + CONF.container.results_max_mb) * 1024 * 1024
    return kept * 4 // 3 + REPLY_SLACK


def _client(task, timeout):
    try:
        return task.bmc_agent_client
    except AttributeError:
        task.bmc_agent_client = agent_replies.bounded_client(
            reply_max_bytes(), max(timeout, 60))
        return task.bmc_agent_client


def wait_for_lock(task, seconds):
    """Upgrade the task's lock, trying for ``seconds`` (if it stays
    shared, Ironic's heartbeat logs it and skips it).

    Each try is a round of Ironic's own retries
    ([conductor]node_locked_retry_attempts x _interval), and the rounds
    are as far apart as those.
    """
    try:
        tenacity.retry(
            retry=tenacity.retry_if_exception_type(exception.NodeLocked),
            stop=tenacity.stop_after_delay(seconds),
            wait=tenacity.wait_fixed(CONF.conductor.node_locked_retry_interval),
            reraise=True)(task.upgrade_lock)(purpose='heartbeat', retry=True)
    except exception.NodeLocked:
        pass


def bound_ironic_client(task):
    """Have Ironic's own calls to the node's agent in this task (the
    heartbeat's command status, the in-band deploy steps it runs) read
    bounded replies too: from ``bmc_start_workload`` on, the workload is
    root next to the agent while the deploy still reads it.  Ironic keeps
    one client per task (``agent_client.get_client``); this puts a
    bounded one there first."""
    if not isinstance(getattr(task, 'cached_agent_client', None),
                      agent_replies.BoundedClient):
        task.cached_agent_client = agent_replies.bounded_client(
            reply_max_bytes(), max(CONF.agent.command_timeout, 60))
    return task.cached_agent_client


#: Seconds a call waits for the agent to finish another command.
BUSY_WAIT = 15
#: The agent command a deploy step runs as (AgentClient.execute_deploy_step).
_METHOD = 'deploy.execute_deploy_step'


def call(task, step_name, args=None, timeout=60, poll_interval=0.5):
    """Run an in-band step of the agent and return its result.

    Polls the command as ``AgentClient`` does for its own long commands
    (the agent's command list until it is no longer RUNNING), with this
    call's own ``timeout`` instead of ``[agent]command_wait_attempts`` x
    ``command_wait_interval`` (600 s by default), which a service step
    holding the node's lock must not wait.

    :raises: AgentCommandTimeout if the step still runs after ``timeout``
        seconds; AgentReplyInvalid if a reply is too large, too slow or
        of the wrong shape; IronicException with the agent's error if the
        step failed.
    """
    node = with_agent(task.node)
    client = _client(task, timeout)
    step = {'interface': 'deploy', 'step': step_name, 'args': args or {}}

    # IPA runs one command at a time: a status poll (shared lock) and an
    # undeploy's stop (exclusive lock) may meet; the second waits.
    @tenacity.retry(
        retry=tenacity.retry_if_exception_type(exception.AgentInProgress),
        stop=tenacity.stop_after_delay(BUSY_WAIT),
        wait=tenacity.wait_fixed(poll_interval),
        reraise=True)
    def _execute():
        return client.execute_deploy_step(step, node, [])

    result = _reply(node, step_name, _execute)
    command_id = result.get('id')

    @tenacity.retry(
        retry=tenacity.retry_if_exception_type(
            exception.AgentCommandTimeout),
        stop=tenacity.stop_after_delay(timeout),
        wait=tenacity.wait_fixed(poll_interval),
        reraise=True)
    def _wait():
        status = _own_command(node, step_name, command_id,
                              client.get_commands_status(node))
        if status is None or status.get('command_status') == 'RUNNING':
            raise exception.AgentCommandTimeout(command=step_name,
                                                node=node.uuid)
        return status

    if result.get('command_status') == 'RUNNING':
        result = _reply(node, step_name, _wait)
    if result.get('command_status') != 'SUCCEEDED':
        raise exception.IronicException(
            agent_client.get_command_error(result))
    command_result = agent_replies.mapping(
        node, result.get('command_result') or {},
        _('the result of %s') % step_name)
    return agent_replies.mapping(
        node, command_result.get('deploy_result') or {},
        _('the deploy_result of %s') % step_name)


def _reply(node, step_name, request):
    """Run ``request`` (a call of Ironic's client); a reply it cannot
    read, or one that is no command, is the node's fault."""
    try:
        result = request()
    except agent_replies.ReplyRefused as exc:
        raise agent_replies.refuse(
            node, '%s: %s' % (step_name, exc)) from None
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        # Ironic's client reads the reply as a dict of the right keys.
        raise agent_replies.refuse(
            node, _('%(step)s: a reply of the wrong shape (%(err)s)')
            % {'step': step_name, 'err': exc}) from None
    except exception.IronicException as exc:
        if agent_replies.refused(exc):
            raise agent_replies.refuse(
                node, _('%(step)s: %(err)s')
                % {'step': step_name, 'err': exc}) from None
        raise
    return agent_replies.mapping(node, result,
                                 _('the reply to %s') % step_name)


def _own_command(node, step_name, command_id, commands):
    """The agent's command this call started, from its command list (by
    id: a status poll started by another call must not answer ours)."""
    if not isinstance(commands, list):
        raise agent_replies.refuse(
            node, _('%s: the command list is not a list') % step_name)
    for command in reversed(commands):
        if not isinstance(command, dict):
            continue
        if command_id is not None:
            if command.get('id') == command_id:
                return command
        elif command.get('command_name') == _METHOD.split('.', 1)[1]:
            return command
    return None
