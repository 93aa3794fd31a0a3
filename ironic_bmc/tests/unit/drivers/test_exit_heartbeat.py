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


"""A workload's end reaches the conductor by a heartbeat, not the next
poll: the token put back, the agent told, the heartbeat handled."""

import sys
import threading
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager
from ironic.drivers.modules import agent_base
from ironic import objects

from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import workload_watch
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

TOKEN = 'a' * 43


@mock.patch.object(workload_watch, '_status', autospec=True)
class ExitHeartbeatTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.node.provision_state = states.ACTIVE
        self.node.target_provision_state = None
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, {
            'stages': [], 'node': self.node.uuid, 'deploy_id': 'x',
            'mode': 'job', 'state': 'running'})
        # As at the end of the deploy: kept by us, forgotten by Ironic.
        self.node.set_driver_internal_info(agent_calls.AGENT_KEY, {
            'agent_url': 'http://10.0.2.15:9999',
            'agent_secret_token': TOKEN})
        self.node.del_driver_internal_info('agent_secret_token')
        self.node.save()

    def _check(self):
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            workload_watch.check(task)
            return task.shared

    def _token(self):
        return objects.Node.get_by_uuid(
            self.context, self.node.uuid).driver_internal_info.get(
                'agent_secret_token')

    def test_poll_puts_the_token_back_and_tells_the_agent(self, mock_status):
        mock_status.return_value = {'state': 'running'}
        self.assertFalse(self._check())     # upgraded to put it back
        self.assertEqual(TOKEN, self._token())
        mock_status.assert_called_once_with(mock.ANY, notify_exit=True)
        # Once back, a poll needs no exclusive lock.
        self.assertTrue(self._check())
        self.assertEqual(2, mock_status.call_count)

    def test_no_kept_token_no_heartbeats(self, mock_status):
        self.node.del_driver_internal_info(agent_calls.AGENT_KEY)
        self.node.save()
        mock_status.return_value = {'state': 'running'}
        self.assertTrue(self._check())
        self.assertIsNone(self._token())
        mock_status.assert_called_once_with(mock.ANY, notify_exit=False)

    def test_maintenance_is_not_watched(self, mock_status):
        self.node.maintenance = True
        self.node.save()
        self._check()
        mock_status.assert_not_called()

    @mock.patch.object(base.container_deploy.manager_utils,
                       'node_power_action', autospec=True)
    @mock.patch.object(base.container_deploy.agent_calls, 'call',
                       autospec=True)
    def test_the_heartbeat_of_an_exit_ends_the_job(self, mock_call,
                                                   mock_power, mock_status):
        mock_status.return_value = {
            'state': 'exited', 'exit_code': 0, 'output_tail': 'done\n',
            'stages': [{'name': 'workload-exited', 'start': 1.0,
                        'end': 2.0}]}
        mock_call.return_value = {}
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            task.driver.deploy.heartbeat(task, 'http://10.0.2.15:9999',
                                         '13.0.0')
        mock_power.assert_called_once_with(mock.ANY, states.POWER_OFF)
        report = run_report.get(objects.Node.get_by_uuid(self.context,
                                                         self.node.uuid))
        self.assertEqual('finished', report['state'])

    @mock.patch.object(base.container_deploy.manager_utils,
                       'node_power_action', autospec=True)
    def test_exit_heartbeat_on_a_node_still_locked(self, mock_power,
                                                   mock_status):
        # A conductor died holding the node; its survivor gets the exit
        # heartbeat before the dead one's lock is cleared.  Not an error
        # of the run (Ironic would record "Async execution of heartbeat
        # failed" in last_error): the periodic watch reads it later.
        self.config(node_locked_retry_interval=0.01, group='conductor')
        self.node.reservation = 'dead-conductor'
        self.node.save()
        mock_status.return_value = {'state': 'exited', 'exit_code': 0}
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            task.driver.deploy.heartbeat(task, 'http://10.0.2.15:9999',
                                         '13.0.0')
        mock_power.assert_not_called()
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertEqual('running', run_report.get(node)['state'])
        self.assertIsNone(node.last_error)

    @mock.patch.object(agent_base.HeartbeatMixin, 'heartbeat', autospec=True)
    def test_a_late_heartbeat_is_not_an_error(self, mock_super, mock_status):
        report = run_report.get(self.node)
        report['state'] = 'finished'
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            task.driver.deploy.heartbeat(task, 'http://x:9999', '13.0.0')
        mock_status.assert_not_called()
        mock_super.assert_not_called()

    @mock.patch.object(agent_base.HeartbeatMixin, 'heartbeat', autospec=True)
    def test_deploy_heartbeats_are_ironics(self, mock_super, mock_status):
        self.node.provision_state = states.DEPLOYWAIT
        self.node.set_driver_internal_info('agent_secret_token', TOKEN)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            # As the conductor's manager calls it: every argument by
            # position.
            task.driver.deploy.heartbeat(task, 'http://x:9999', '13.0.0',
                                         None, 'start', 'message')
            mock_super.assert_called_once_with(
                task.driver.deploy, task, 'http://x:9999', '13.0.0', None,
                'start', 'message')
        mock_status.assert_not_called()

    def _held_heartbeat(self, mock_super, state, released_at_try,
                        wipe_token=False, called=True):
        """A deploy heartbeat on a node another conductor holds, until
        the ``released_at_try``-th try to reserve it; the tries."""
        self.node.provision_state = state
        self.node.reservation = 'other-conductor'
        # (Deploying: Ironic's token is the agent's.)
        self.node.set_driver_internal_info('agent_secret_token', TOKEN)
        self.node.save()
        tries = []
        real_reserve = objects.Node.reserve

        def reserve(*args, **kwargs):
            tries.append(True)
            if len(tries) == released_at_try:
                if wipe_token:
                    node = objects.Node.get_by_uuid(self.context,
                                                    self.node.uuid)
                    node.del_driver_internal_info('agent_secret_token')
                    node.save()
                objects.Node.release(self.context, 'other-conductor',
                                     self.node.id)
            return real_reserve(*args, **kwargs)

        with mock.patch.object(objects.Node, 'reserve', autospec=True,
                               side_effect=reserve):
            with task_manager.acquire(self.context, self.node.uuid,
                                      shared=True) as task:
                task.driver.deploy.heartbeat(task, 'http://x:9999',
                                             '13.0.0')
                self.assertFalse(task.shared)
                if called:
                    mock_super.assert_called_once_with(
                        task.driver.deploy, task, 'http://x:9999', '13.0.0')
                else:
                    mock_super.assert_not_called()
        return len(tries)

    @mock.patch.object(agent_base.HeartbeatMixin, 'heartbeat', autospec=True)
    def test_a_heartbeat_outlived_by_its_agent_is_ignored(self, mock_super,
                                                          mock_status):
        # Sent by the agent that a kexec (or a power action) replaced
        # while the heartbeat waited for the lock: the conductor forgot
        # that agent's token; its URL must not be recorded.
        self.config(node_locked_retry_interval=0.01, group='conductor')
        self._held_heartbeat(mock_super, states.DEPLOYWAIT,
                             released_at_try=1, wipe_token=True,
                             called=False)
        self.assertNotIn('agent_url', objects.Node.get_by_uuid(
            self.context, self.node.uuid).driver_internal_info)

    @mock.patch.object(agent_base.HeartbeatMixin, 'heartbeat', autospec=True)
    def test_deploy_heartbeat_waits_for_the_step_lock(self, mock_super,
                                                      mock_status):
        # The step's end heartbeat lands while the conductor that sent the
        # step still holds the node (still DEPLOYING: it has sent the step
        # and not yet saved the node): it is taken once that one lets go,
        # not skipped.
        self.config(node_locked_retry_interval=0.01, group='conductor')
        self.assertEqual(1, self._held_heartbeat(
            mock_super, states.DEPLOYING, released_at_try=1))

    @mock.patch.object(agent_base.HeartbeatMixin, 'heartbeat', autospec=True)
    def test_deploy_heartbeat_outwaits_a_busy_conductor(self, mock_super,
                                                        mock_status):
        # A busy conductor holds the node longer than one round of
        # Ironic's lock retries: the heartbeat waits on, up to
        # [container]heartbeat_lock_wait.
        self.config(node_locked_retry_interval=0.01,
                    node_locked_retry_attempts=2, group='conductor')
        self.config(heartbeat_lock_wait=30, group='container')
        # Released at the fifth try: the third round of two.
        self.assertEqual(5, self._held_heartbeat(
            mock_super, states.DEPLOYWAIT, released_at_try=5))

    @mock.patch.object(agent_base.HeartbeatMixin, 'heartbeat', autospec=True)
    def test_deploy_heartbeat_on_a_node_held_on(self, mock_super,
                                                mock_status):
        self.config(node_locked_retry_interval=0.01, group='conductor')
        self.config(heartbeat_lock_wait=1, group='container')
        self.node.provision_state = states.DEPLOYWAIT
        self.node.reservation = 'other-conductor'
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid,
                                  shared=True) as task:
            task.driver.deploy.heartbeat(task, 'http://x:9999', '13.0.0')
            # Ironic's own heartbeat then says so and skips it.
            self.assertTrue(task.shared)
            mock_super.assert_called_once_with(
                task.driver.deploy, task, 'http://x:9999', '13.0.0')


@mock.patch.object(workload_watch, 'ARM_PACE', 0.01)
@mock.patch.object(workload_watch, 'check', autospec=True)
class FirstCheckTestCase(base.ContainerDeployTestCase):

    def _node(self, state, deploy_id='x'):
        self.node.provision_state = state
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, {
            'stages': [], 'node': self.node.uuid, 'deploy_id': deploy_id,
            'mode': 'job', 'state': 'running'})
        self.node.save()

    def test_once_the_deploy_has_ended(self, mock_check):
        self._node(states.ACTIVE)
        workload_watch._first_check(self.context, self.node.uuid, 'x')
        mock_check.assert_called_once_with(mock.ANY)

    def _fake_time(self, on_sleep=None):
        """A clock that moves only when the first check sleeps (calling
        ``on_sleep`` with the number of sleeps so far): its wait is
        counted in sleeps, never measured on a wall clock, so a slow
        machine cannot make it pass or fail."""
        patcher = mock.patch.object(workload_watch, 'time', autospec=True)
        mock_time = patcher.start()
        self.addCleanup(patcher.stop)
        now = [0.0]

        def sleep(seconds):
            now[0] += seconds
            if on_sleep is not None:
                on_sleep(mock_time.sleep.call_count)

        mock_time.monotonic.side_effect = lambda: now[0]
        mock_time.sleep.side_effect = sleep
        return mock_time

    def test_waits_for_the_deploy_to_end(self, mock_check):
        # Ironic is still ending the deploy for the first two tries; it
        # ends during the third sleep.  The check must come then, not
        # before (nor never: returning at once is the bug this catches).
        self._node(states.DEPLOYWAIT)
        ended = threading.Event()

        def on_sleep(count):
            if count == 3:
                self._node(states.ACTIVE)
                ended.set()

        mock_time = self._fake_time(on_sleep)
        seen = []
        # (Recorded, not asserted, in the side effect: the first check
        # would log and swallow an assertion's error.)
        mock_check.side_effect = lambda task: seen.append(
            (ended.is_set(), task.node.provision_state))
        workload_watch._first_check(self.context, self.node.uuid, 'x')
        mock_check.assert_called_once_with(mock.ANY)
        self.assertEqual([(True, states.ACTIVE)], seen)
        self.assertEqual([mock.call(workload_watch.ARM_PACE)] * 3,
                         mock_time.sleep.call_args_list)

    def test_gives_up_when_the_deploy_does_not_end(self, mock_check):
        # Never ends: tried every ARM_PACE until ARM_WITHIN, no check
        # (the periodic watch polls the node once it is ACTIVE).  (Paces
        # exact in binary, so that the count of tries is exact; patched
        # here, as the class's own patch of ARM_PACE would win over a
        # method's.)
        self._node(states.DEPLOYWAIT)
        mock_time = self._fake_time()
        with mock.patch.object(workload_watch, 'ARM_WITHIN', 1.0), \
                mock.patch.object(workload_watch, 'ARM_PACE', 0.25), \
                mock.patch.object(task_manager, 'acquire', autospec=True,
                                  side_effect=task_manager.acquire
                                  ) as acquire:
            workload_watch._first_check(self.context, self.node.uuid, 'x')
        mock_check.assert_not_called()
        self.assertEqual([mock.call(0.25)] * 4,
                         mock_time.sleep.call_args_list)
        self.assertEqual(4, acquire.call_count)

    def test_not_for_another_run(self, mock_check):
        self._node(states.ACTIVE, deploy_id='y')
        workload_watch._first_check(self.context, self.node.uuid, 'x')
        mock_check.assert_not_called()

    def test_a_failure_is_logged_not_raised(self, mock_check):
        self._node(states.ACTIVE)
        mock_check.side_effect = RuntimeError('db gone')
        # (A mock of LOG, not assertLogs: oslo.log's setup in Ironic's
        # test base disables the loggers made before it, this one too.)
        handled = []
        with mock.patch.object(workload_watch, 'LOG',
                               autospec=True) as mock_log:
            # LOG.exception logs the exception being handled: the one
            # raised by the check, not another.
            mock_log.exception.side_effect = (
                lambda *args: handled.append(sys.exc_info()[1]))
            workload_watch._first_check(self.context, self.node.uuid, 'x')
        mock_check.assert_called_once_with(mock.ANY)
        mock_log.exception.assert_called_once_with(
            'The first check of the workload of node %s failed; the '
            'periodic one follows', self.node.uuid)
        self.assertEqual([mock_check.side_effect], handled)

    def test_a_busy_node_is_left_to_the_periodic_watch(self, mock_check):
        from ironic.common import exception
        self._node(states.ACTIVE)
        mock_check.side_effect = exception.NodeLocked(node=self.node.uuid,
                                                      host='other')
        with mock.patch.object(workload_watch.LOG, 'exception',
                               autospec=True) as mock_log:
            workload_watch._first_check(self.context, self.node.uuid, 'x')
        mock_check.assert_called_once_with(mock.ANY)
        mock_log.assert_not_called()
