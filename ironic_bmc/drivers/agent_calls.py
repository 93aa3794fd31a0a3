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
"""

from ironic.common import exception
from ironic.drivers.modules import agent_client
import tenacity

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


def reachable(node):
    return bool((node.driver_internal_info.get(AGENT_KEY) or {})
                .get('agent_url'))


#: Seconds a call waits for the agent to finish another command.
BUSY_WAIT = 15
#: The agent command a deploy step runs as (AgentClient.execute_deploy_step).
_METHOD = 'deploy.execute_deploy_step'


def call(task, step_name, args=None, timeout=60, poll_interval=0.5):
    """Run an in-band step of the agent and return its result.

    Polls the command as ``AgentClient`` does for its own long commands
    (``get_last_command_status`` until it is no longer RUNNING), with this
    call's own ``timeout`` instead of ``[agent]command_wait_attempts`` x
    ``command_wait_interval`` (600 s by default), which a service step
    holding the node's lock must not wait.

    :raises: AgentCommandTimeout if the step still runs after ``timeout``
        seconds; IronicException with the agent's error if it failed.
    """
    node = task.node.obj_clone()  # never saved
    for key, value in (node.driver_internal_info.get(AGENT_KEY)
                       or {}).items():
        if value is not None:
            node.driver_internal_info[key] = value
    client = agent_client.get_client(task)
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

    result = _execute()

    @tenacity.retry(
        retry=tenacity.retry_if_exception_type(
            exception.AgentCommandTimeout),
        stop=tenacity.stop_after_delay(timeout),
        wait=tenacity.wait_fixed(poll_interval),
        reraise=True)
    def _wait():
        status = client.get_last_command_status(node, _METHOD)
        if status is None or status.get('command_status') == 'RUNNING':
            raise exception.AgentCommandTimeout(command=step_name,
                                                node=node.uuid)
        return status

    if result.get('command_status') == 'RUNNING':
        result = _wait()
    if result.get('command_status') != 'SUCCEEDED':
        raise exception.IronicException(
            agent_client.get_command_error(result))
    return (result.get('command_result') or {}).get('deploy_result') or {}
