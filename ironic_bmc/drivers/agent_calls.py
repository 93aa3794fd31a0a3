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

import time

from ironic.common import exception
from ironic.common.i18n import _
from ironic.drivers.modules import agent_client

#: driver_internal_info key; masked by the API like every *token* key.
AGENT_KEY = 'bmc_agent'
_FIELDS = ('agent_url', 'agent_verify_ca', 'agent_secret_token')


def remember(node):
    node.set_driver_internal_info(AGENT_KEY, {
        k: node.driver_internal_info.get(k) for k in _FIELDS})


def forget(node):
    node.del_driver_internal_info(AGENT_KEY)


def reachable(node):
    return bool((node.driver_internal_info.get(AGENT_KEY) or {})
                .get('agent_url'))


def call(task, step_name, args=None, timeout=60):
    """Run an in-band step of the agent and return its result.

    :raises: IronicException with the agent's error or a timeout.
    """
    node = task.node.obj_clone()  # never saved
    for key, value in (node.driver_internal_info.get(AGENT_KEY)
                       or {}).items():
        if value is not None:
            node.driver_internal_info[key] = value
    client = agent_client.get_client(task)
    step = {'interface': 'deploy', 'step': step_name, 'args': args or {}}
    result = client.execute_deploy_step(step, node, [])
    deadline = time.monotonic() + timeout
    while result.get('command_status') == 'RUNNING':
        if time.monotonic() > deadline:
            raise exception.IronicException(
                _('the agent did not finish %(step)s within %(t)d seconds')
                % {'step': step_name, 't': timeout})
        time.sleep(0.5)
        commands = client.get_commands_status(node)
        result = next((c for c in reversed(commands)
                       if c.get('id') == result.get('id')), result)
    if result.get('command_status') != 'SUCCEEDED':
        raise exception.IronicException(
            agent_client.get_command_error(result))
    return (result.get('command_result') or {}).get('deploy_result') or {}
