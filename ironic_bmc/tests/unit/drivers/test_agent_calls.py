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

"""In-band calls to the agent next to a running workload."""

import types
from unittest import mock

from ironic.common import exception
import pytest

from ironic_bmc.drivers import agent_calls

NODE = '6a7c1d2e-0b4f-4c55-9d1e-2f3a4b5c6d7e'


def _task():
    node = types.SimpleNamespace(uuid=NODE, driver_internal_info={
        agent_calls.AGENT_KEY: {'agent_url': 'http://10.0.2.15:9999',
                                'agent_secret_token': 's3cret',
                                'agent_verify_ca': None}})
    saved = mock.Mock()
    saved.obj_clone.return_value = node
    return types.SimpleNamespace(node=saved), node


@pytest.fixture
def client():
    # Specced on the class the product calls, so a call that does not
    # match ironic's AgentClient signatures fails here.
    instance = mock.create_autospec(agent_calls.agent_client.AgentClient,
                                    instance=True)
    with mock.patch.object(agent_calls.agent_replies, 'bounded_client',
                           autospec=True, return_value=instance):
        yield instance


def _commands(*statuses, command_id='ours'):
    """The agent's command list: an earlier command, then ours."""
    return [[{'id': 'earlier', 'command_name': 'execute_deploy_step',
              'command_status': 'SUCCEEDED',
              'command_result': {'deploy_result': {'earlier': True}}},
             dict(status, id=command_id)] for status in statuses]


def test_result_of_a_finished_step(client):
    task, node = _task()
    client.execute_deploy_step.return_value = {
        'command_status': 'SUCCEEDED',
        'command_result': {'deploy_result': {'ok': True}}}
    assert agent_calls.call(task, 'bmc_noise_probe', {'duration': 1}) == {
        'ok': True}
    step, called_node, ports = client.execute_deploy_step.call_args[0]
    assert step == {'interface': 'deploy', 'step': 'bmc_noise_probe',
                    'args': {'duration': 1}}
    # The agent's URL and token come from the run, on a copy of the node.
    assert called_node is node
    assert node.driver_internal_info['agent_url'] == 'http://10.0.2.15:9999'
    assert node.driver_internal_info['agent_secret_token'] == 's3cret'
    assert 'agent_verify_ca' not in node.driver_internal_info
    client.get_commands_status.assert_not_called()


def test_running_step_is_polled_until_it_ends(client):
    task, node = _task()
    client.execute_deploy_step.return_value = {'command_status': 'RUNNING',
                                               'id': 'ours'}
    client.get_commands_status.side_effect = [[]] + _commands(
        {'command_status': 'RUNNING'},
        {'command_status': 'SUCCEEDED',
         'command_result': {'deploy_result': {'cpus': '1'}}})
    assert agent_calls.call(task, 'bmc_apply_tunables',
                            poll_interval=0.01) == {'cpus': '1'}
    assert client.get_commands_status.call_args_list == [
        mock.call(node)] * 3


def test_a_later_command_does_not_answer_for_ours(client):
    """A status poll started by another call after ours (the last
    execute_deploy_step in the list) must not be taken as our result."""
    task, _node = _task()
    client.execute_deploy_step.return_value = {'command_status': 'RUNNING',
                                               'id': 'ours'}
    poll = {'id': 'a-poll', 'command_name': 'execute_deploy_step',
            'command_status': 'SUCCEEDED',
            'command_result': {'deploy_result': {'state': 'running'}}}
    ours_running = {'id': 'ours', 'command_name': 'execute_deploy_step',
                    'command_status': 'RUNNING'}
    ours_done = dict(ours_running, command_status='SUCCEEDED',
                     command_result={'deploy_result': {'output': 'all'}})
    client.get_commands_status.side_effect = [
        [ours_running, poll], [ours_done, poll]]
    assert agent_calls.call(task, 'bmc_collect_output',
                            poll_interval=0.01) == {'output': 'all'}


@pytest.mark.parametrize('reply', [
    ['not', 'a', 'dict'],
    {'command_status': 'SUCCEEDED', 'command_result': 'a string'},
    {'command_status': 'SUCCEEDED',
     'command_result': {'deploy_result': [1, 2]}},
])
def test_reply_of_the_wrong_shape_is_refused(client, reply):
    task, _node = _task()
    client.execute_deploy_step.return_value = reply
    with pytest.raises(agent_calls.agent_replies.AgentReplyInvalid) as ctx:
        agent_calls.call(task, 'bmc_workload_status')
    assert NODE in str(ctx.value)
    assert 'bmc_workload_status' in str(ctx.value)


def test_command_list_that_is_no_list_is_refused(client):
    task, _node = _task()
    client.execute_deploy_step.return_value = {'command_status': 'RUNNING',
                                               'id': 'ours'}
    client.get_commands_status.return_value = {'commands': 'nope'}
    with pytest.raises(agent_calls.agent_replies.AgentReplyInvalid):
        agent_calls.call(task, 'bmc_workload_status', poll_interval=0.01)


def test_step_that_outlives_its_timeout(client):
    task, _node = _task()
    client.execute_deploy_step.return_value = {'command_status': 'RUNNING',
                                               'id': 'ours'}
    client.get_commands_status.return_value = _commands(
        {'command_status': 'RUNNING'})[0]
    with pytest.raises(exception.AgentCommandTimeout) as ctx:
        agent_calls.call(task, 'bmc_noise_probe', timeout=0.2,
                         poll_interval=0.05)
    assert str(ctx.value) == (
        'Timeout executing command bmc_noise_probe on node %s' % NODE)


def test_failed_step_raises_the_agents_error(client):
    task, _node = _task()
    client.execute_deploy_step.return_value = {'command_status': 'RUNNING',
                                               'id': 'ours'}
    client.get_commands_status.return_value = _commands({
        'command_status': 'FAILED',
        'command_error': {'type': 'TunablesError',
                          'message': 'thp: cannot write never',
                          'details': 'thp: cannot write never'}})[0]
    with pytest.raises(exception.IronicException) as ctx:
        agent_calls.call(task, 'bmc_apply_tunables', poll_interval=0.01)
    assert 'thp: cannot write never' in str(ctx.value)


def test_busy_agent_is_waited_for(client):
    task, _node = _task()
    client.execute_deploy_step.side_effect = [
        exception.AgentInProgress(node='n', command='c', error='busy'),
        {'command_status': 'SUCCEEDED',
         'command_result': {'deploy_result': {'state': 'exited'}}}]
    assert agent_calls.call(task, 'bmc_stop_workload',
                            poll_interval=0.01) == {'state': 'exited'}
    assert client.execute_deploy_step.call_count == 2


def test_agent_busy_for_too_long(client):
    task, _node = _task()
    client.execute_deploy_step.side_effect = exception.AgentInProgress(
        node='n', command='c', error='busy')
    with mock.patch.object(agent_calls, 'BUSY_WAIT', 0.05):
        with pytest.raises(exception.AgentInProgress):
            agent_calls.call(task, 'bmc_stop_workload', poll_interval=0.01)
