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
import threading
import unittest
from unittest import mock

from ironic_python_agent import agent as ipa_agent
from ironic_python_agent.extensions import base as ext_base

from ipa_hardware_manager import agent_quiet
from ipa_hardware_manager import manager
from ipa_hardware_manager import workload


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
        beat = threading.Event()
        heartbeater.do_heartbeat = mock.create_autospec(
            heartbeater.do_heartbeat, side_effect=beat.set)
        heartbeater.start()
        # The first heartbeat is immediate; then it waits for the next.
        # (The timeout only bounds a hang: the event, not the time, is the
        # assertion.)
        self.assertTrue(beat.wait(10), 'no first heartbeat')
        heartbeater.interval = 3600
        self.agent.heartbeater = heartbeater
        self.assertEqual({'heartbeats': 'stopped'},
                         manager.BmcContainerHardwareManager()
                         .bmc_quiet_agent({}, []))
        self.assertFalse(heartbeater.is_alive())
        self.assertFalse(agent_quiet.stop_heartbeats())

    def _patch(self, *args, **kwargs):
        patcher = mock.patch.object(*args, **kwargs)
        self.addCleanup(patcher.stop)
        return patcher.start()

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
        # IPA's own heartbeat thread, on a clock of the test's (IPA's
        # _time) that moves only while the thread waits: when each
        # heartbeat goes is read on that clock, never measured, so a slow
        # machine changes nothing.
        clock = [0.0]
        beats = []
        waits = []
        forced = []
        mock_time = self._patch(ipa_agent, '_time', autospec=True,
                                side_effect=lambda: clock[0])

        def do_heartbeat():
            beats.append(clock[0])
            heartbeater.previous_heartbeat = mock_time()
            heartbeater.heartbeat_forced = False
            heartbeater.interval = 3600

        def wait(timeout):
            # Half a second into the first wait after the first
            # heartbeat, a command ends: IPA forces a heartbeat.
            waits.append(timeout)
            if len(beats) == 1 and not forced:
                clock[0] += 0.5
                forced.append(clock[0])
                heartbeater.force_heartbeat()
                timeout -= 0.5
            clock[0] += timeout
            # Stopped after the forced heartbeat, or after 20 wakes
            # without it (no heartbeat is due for an hour).
            return len(beats) == 2 or len(waits) == 20

        heartbeater.do_heartbeat = mock.create_autospec(
            heartbeater.do_heartbeat, side_effect=do_heartbeat)
        heartbeater.stop_event = mock.create_autospec(
            threading.Event, instance=True)
        heartbeater.stop_event.wait.side_effect = wait
        heartbeater.start()
        self.addCleanup(heartbeater.stop)
        heartbeater.join(30)    # (bounds a hang only)
        self.assertFalse(heartbeater.is_alive())
        # The first heartbeat at once; the thread then wakes every second
        # and sends the forced one at its second wake, 1.5 s after the
        # command's end.  IPA's own pace (5 s) would send it only once 5 s
        # had passed since the last heartbeat, 9.5 s after the end.
        self.assertEqual([0.5], forced)
        self.assertEqual([0.0, 2.0], beats)
        # (The last wait is the one the test stops.)
        self.assertEqual([0, 1.0, 1.0, 1.0], waits)
        # Asked again (a second manager instance): unchanged.
        manager.BmcContainerHardwareManager().initialize()
        self.assertEqual((1.0, 5.0), (
            heartbeater.min_heartbeat_interval,
            heartbeater.min_error_jitter_multiplier))

    def test_exit_told_by_one_heartbeat(self):
        heartbeater = ipa_agent.IronicPythonAgentHeartbeater(self.agent)
        heartbeater.do_heartbeat = mock.create_autospec(
            heartbeater.do_heartbeat)
        self.agent.heartbeater = heartbeater
        hwm = manager.BmcContainerHardwareManager()
        hwm._supervisor = mock.create_autospec(workload.Supervisor,
                                               instance=True)
        # (Set in Supervisor.__init__: not a class attribute the spec
        # would have.)
        hwm._supervisor.exit_hook = None
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
