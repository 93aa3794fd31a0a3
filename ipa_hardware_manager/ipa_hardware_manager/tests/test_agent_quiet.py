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

    def _keep_heartbeater_class(self):
        cls = ipa_agent.IronicPythonAgentHeartbeater
        saved = {name: cls.__dict__[name] for name in (
            'min_heartbeat_interval', 'min_error_jitter_multiplier',
            'max_error_jitter_multiplier')}
        self.addCleanup(lambda: [setattr(cls, k, v)
                                 for k, v in saved.items()])

    def test_prompt_heartbeat_after_a_command(self):
        self._keep_heartbeater_class()
        hwm = manager.BmcContainerHardwareManager()
        # Probing the manager changes nothing of the agent ...
        hwm.evaluate_hardware_support()
        self.assertEqual(5, ipa_agent.IronicPythonAgentHeartbeater
                         .min_heartbeat_interval)
        # ... IPA initializes it before the lookup, before it builds its
        # heartbeat thread: the thread it builds then is prompt.
        hwm.initialize()
        heartbeater = ipa_agent.IronicPythonAgentHeartbeater(self.agent)
        self.agent.heartbeater = heartbeater
        self.assertEqual(1.0, heartbeater.min_heartbeat_interval)
        # A failed heartbeat is retried as before: 5-10 s.
        self.assertEqual((5.0, 10.0), (
            heartbeater.min_heartbeat_interval
            * heartbeater.min_error_jitter_multiplier,
            heartbeater.min_heartbeat_interval
            * heartbeater.max_error_jitter_multiplier))
        beats = []
        heartbeater.do_heartbeat = mock.Mock(side_effect=lambda: (
            beats.append(time.monotonic()),
            setattr(heartbeater, 'previous_heartbeat', time.time()),
            setattr(heartbeater, 'heartbeat_forced', False),
            setattr(heartbeater, 'interval', 3600)))
        heartbeater.start()
        self.addCleanup(heartbeater.stop)
        deadline = time.monotonic() + 10
        while not beats:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.01)
        # A command ends (IPA forces a heartbeat) 0.5 s later: the thread,
        # waking every second, sends it within 1.5 s; IPA's own pace would
        # wait until 5 s after the last heartbeat (4.5 s).
        time.sleep(0.5)
        forced = time.monotonic()
        heartbeater.force_heartbeat()
        while len(beats) < 2:
            self.assertLess(time.monotonic(), forced + 6)
            time.sleep(0.01)
        self.assertLess(beats[1] - forced, 3.0)
        # Asked again (a second manager instance): unchanged.
        manager.BmcContainerHardwareManager().initialize()
        self.assertEqual((1.0, 5.0), (
            heartbeater.min_heartbeat_interval,
            heartbeater.min_error_jitter_multiplier))

    def test_exit_told_by_one_heartbeat(self):
        heartbeater = ipa_agent.IronicPythonAgentHeartbeater(self.agent)
        heartbeater.do_heartbeat = mock.Mock()
        self.agent.heartbeater = heartbeater
        hwm = manager.BmcContainerHardwareManager()
        hwm._supervisor = mock.Mock(exit_hook=None)
        hwm._supervisor.status.return_value = {'state': 'running'}
        hwm.bmc_workload_status({}, [])
        self.assertIsNone(hwm._supervisor.exit_hook)
        hwm.bmc_workload_status({}, [], notify_exit=True)
        self.assertIs(agent_quiet.heartbeat_now, hwm._supervisor.exit_hook)
        self.assertTrue(hwm._supervisor.exit_hook())
        heartbeater.do_heartbeat.assert_called_once_with()

    def test_outside_ipa_nothing_to_do(self):
        self.get_extension.side_effect = Exception('not initialized')
        self.assertFalse(agent_quiet.stop_heartbeats())
        self.assertFalse(agent_quiet.prompt_heartbeats(object))
        self.assertFalse(agent_quiet.heartbeat_now())
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
