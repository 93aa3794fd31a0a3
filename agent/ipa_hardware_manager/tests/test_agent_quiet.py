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

"""The quiet agent, against IPA's own heartbeater thread and command
results."""

import collections
import time
import unittest
from unittest import mock

from ironic_python_agent import agent as ipa_agent
from ironic_python_agent.extensions import base as ext_base

from ipa_hardware_manager import agent_quiet
from ipa_hardware_manager import manager


def _result(step, done=True):
    result = ext_base.AsyncCommandResult(
        'execute_deploy_step', {'step': {'step': step, 'args': {}},
                                'node': {}, 'ports': []}, lambda **kw: None)
    if done:
        result.command_status = ext_base.AgentCommandStatus.SUCCEEDED
    return result


class QuietTest(unittest.TestCase):
    def setUp(self):
        self.agent = mock.Mock(spec=['heartbeater', 'command_results',
                                     'api_client',
                                     'set_agent_advertise_addr'])
        self.agent.command_results = collections.OrderedDict()
        extension = mock.Mock(agent=self.agent)
        patcher = mock.patch.object(ext_base, 'get_extension', autospec=True,
                                    return_value=extension)
        self.get_extension = patcher.start()
        self.addCleanup(patcher.stop)

    def test_heartbeater_thread_stopped(self):
        heartbeater = ipa_agent.IronicPythonAgentHeartbeater(self.agent)
        heartbeater.do_heartbeat = mock.Mock()
        heartbeater.start()
        # The first heartbeat is immediate; then it waits for the next.
        deadline = time.monotonic() + 10
        while not heartbeater.do_heartbeat.called:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.01)
        heartbeater.interval = 3600
        self.agent.heartbeater = heartbeater
        self.assertEqual({'heartbeats': 'stopped'},
                         manager.BmcContainerHardwareManager()
                         .bmc_quiet_agent({}, []))
        self.assertFalse(heartbeater.is_alive())
        self.assertFalse(agent_quiet.stop_heartbeats())

    def test_outside_ipa_nothing_to_do(self):
        self.get_extension.side_effect = Exception('not initialized')
        self.assertFalse(agent_quiet.stop_heartbeats())
        self.assertEqual(0, agent_quiet.forget_status_results())

    def test_only_finished_status_results_forgotten(self):
        kept = [_result('bmc_stage_rootfs'), _result('bmc_start_workload'),
                _result('bmc_workload_status', done=False)]
        gone = [_result('bmc_workload_status') for _ in range(5)]
        for result in kept[:2] + gone + kept[2:]:
            self.agent.command_results[result.id] = result
        self.assertEqual(5, agent_quiet.forget_status_results())
        self.assertEqual([r.id for r in kept],
                         list(self.agent.command_results))
