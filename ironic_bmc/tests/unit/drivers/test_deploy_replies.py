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

"""What Ironic itself reads of a container node's agent during the deploy
(the heartbeat's command status, the in-band steps' results) is bounded
as our own calls are: once ``bmc_start_workload`` has run, the workload is
root next to the agent while the deploy still reads it."""

import http.server
import json
import threading
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager
from ironic.drivers.modules import agent_base
from ironic.drivers.modules import agent_client
from ironic import objects

from ironic_bmc import deploy_record
from ironic_bmc.drivers import agent_calls
from ironic_bmc import agent_replies
from ironic_bmc.tests.unit import test_agent_replies as replies
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

MiB = 1024 * 1024


class DeployTimeRepliesTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        # The bound: 1 MiB of output, as base64 (4/3), and 1 MiB slack.
        self.config(output_max_mb=1, results_max_mb=0, group='container')
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                      replies._Agent)
        self.server.daemon_threads = True
        thread = threading.Thread(target=self.server.serve_forever,
                                  daemon=True)
        thread.start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        self.url = 'http://127.0.0.1:%d' % self.server.server_address[1]
        step = {'interface': 'deploy', 'step': 'bmc_start_workload',
                'args': {}, 'priority': 70}
        self.node.provision_state = states.DEPLOYWAIT
        self.node.deploy_step = step
        self.node.driver_internal_info = {
            'agent_url': self.url, 'agent_secret_token': 'token',
            'agent_cached_deploy_steps': {'deploy': [step]},
            'deploy_steps': [step], 'deploy_step_index': 0}
        self.node.save()

    def _heartbeat(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.heartbeat(task, self.url, '13.0.0')
        return objects.Node.get_by_uuid(self.context, self.node.uuid)

    def test_a_flood_in_the_command_status_fails_the_deploy(self):
        # A step result far past the bound (the workload answering in
        # the agent's place).
        self.server.answer = ('plain', replies._commands({
            'deploy_result': {'output': 'x' * (4 * MiB)}}))
        node = self._heartbeat()
        self.assertEqual(states.DEPLOYFAIL, node.provision_state)
        self.assertIn('Failed to process the next deploy step',
                      node.last_error)
        self.assertIn('reply refused: body larger than %d bytes'
                      % agent_calls.reply_max_bytes(), node.last_error)

    def test_a_reply_within_the_bound_is_read(self):
        self.server.answer = ('plain', json.dumps({'commands': [{
            'id': 'c1', 'command_name': 'execute_deploy_step',
            'command_status': 'RUNNING', 'command_error': None,
            'command_result': None}]}).encode())
        node = self._heartbeat()
        # Still running: the deploy waits for the next heartbeat.
        self.assertEqual(states.DEPLOYWAIT, node.provision_state)
        self.assertIsNone(node.last_error)

    def test_in_band_steps_run_through_the_bounded_client(self):
        self.node.set_driver_internal_info(deploy_record.KEY, {})
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            with mock.patch.object(agent_base, 'execute_step',
                                   autospec=True) as mock_execute:
                mock_execute.side_effect = (
                    lambda task, step, kind:
                    agent_client.get_client(task))
                client = task.driver.deploy._execute_in_band(task, {})
        self.assertIsInstance(client, agent_replies.BoundedClient)

    def test_one_bounded_client_per_task(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            first = agent_calls.bound_ironic_client(task)
            self.assertIs(first, agent_calls.bound_ironic_client(task))
            self.assertIs(first, agent_client.get_client(task))
