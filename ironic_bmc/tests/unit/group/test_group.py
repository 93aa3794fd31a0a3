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

"""Run groups: keys, membership, the barrier, the group's end, on
Ironic's own DB test fixtures."""

from unittest import mock

from ironic.common import exception
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils
from ironic import objects
from ironic.tests.unit.objects import utils as obj_utils
from oslo_utils import uuidutils

from bmc_common import protocol
from ironic_bmc import deploy_info
from ironic_bmc import deploy_record
from ironic_bmc import image_properties
from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import run_close
from ironic_bmc.drivers import workload_watch
from ironic_bmc.group import barrier
from ironic_bmc.group import info as group_info
from ironic_bmc.group import lifecycle
from ironic_bmc.group import members
from ironic_bmc.group import summary
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

IMAGE = '127.0.0.1:5050/bmc/mpi:1'
DEPLOY_KEY = deploy_record.KEY


class GroupTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.resume = self.useFixture_mock(
            manager_utils, 'notify_conductor_resume_deploy')

    def useFixture_mock(self, target, name):
        patcher = mock.patch.object(target, name, autospec=True)
        self.addCleanup(patcher.stop)
        return patcher.start()

    def _node(self, name, index, group='mpi', size=2, launcher=None,
              address=True, **fields):
        info = {'container_image': IMAGE, 'container_mode': 'job',
                'container_group': group, 'container_group_size': size}
        if launcher:
            info['container_group_launcher'] = launcher
        fields.setdefault('provision_state', states.DEPLOYING)
        node = obj_utils.create_test_node(
            self.context, uuid=uuidutils.generate_uuid(), name=name,
            driver='fake-hardware', deploy_interface='fake',
            boot_interface='fake', network_interface='noop',
            instance_info=info, driver_internal_info={DEPLOY_KEY: {}},
            **fields)
        obj_utils.create_test_port(
            self.context, uuid=uuidutils.generate_uuid(), node_id=node.id,
            address='52:54:00:bd:00:%02x' % index,
            physical_network='bmc-group',
            extra={'bmc_group_address': '192.0.2.%d/24' % (10 + index)}
            if address else {})
        return node

    def _join(self, node):
        with task_manager.acquire(self.context, node.uuid) as task:
            container = deploy_info.parse(task.node)
            report = run_report.new(task.node, container)
            run_report.update(task.node, report)
            barrier.join(task, container.group, report['deploy_id'],
                         group_info.network_port(task))
            task.node.save()

    def _arrive(self, node, deploy_step=True):
        with task_manager.acquire(self.context, node.uuid) as task:
            if deploy_step:
                task.node.deploy_step = {'step': barrier.STEP,
                                         'interface': 'deploy'}
            result = barrier.arrive(task)
            if result == states.DEPLOYWAIT:
                task.node.provision_state = states.DEPLOYWAIT
            task.node.save()
            return result

    def _rec(self, node):
        return members.record(objects.Node.get_by_uuid(self.context,
                                                       node.uuid))


class InfoTestCase(GroupTestCase):

    def _requested(self, lessee=None, owner=None, instance_uuid=None,
                   **info):
        node = obj_utils.create_test_node(
            self.context, uuid=uuidutils.generate_uuid(), lessee=lessee,
            owner=owner, instance_uuid=instance_uuid,
            instance_info=dict({'container_image': IMAGE}, **info))
        return group_info.requested(node, node.instance_info)

    def test_no_group(self):
        self.assertIsNone(self._requested())

    def test_group(self):
        found = self._requested(container_group='mpi',
                                container_group_size='2')
        self.assertEqual(('mpi', 2, 'ssh', '-'),
                         (found.name, found.size, found.launcher,
                          found.scope))
        self.assertEqual('-/mpi', found.key)

    def test_project_scope(self):
        found = self._requested(container_group='mpi',
                                container_group_size=2, lessee='p1')
        self.assertEqual('p1/mpi', found.key)

    def test_project_id_written_by_a_lessee_is_not_its_scope(self):
        # A lessee admin may write any instance_info key: naming the
        # victim's project does not put it in the victim's scope.
        found = self._requested(container_group='mpi',
                                container_group_size=2, lessee='attacker',
                                project_id='victim',
                                instance_uuid=uuidutils.generate_uuid())
        self.assertEqual('attacker/mpi', found.key)
        # Nor, on a node without lessee nor instance, the operator's: it
        # decides nothing there.
        found = self._requested(container_group='mpi',
                                container_group_size=2, owner='o1',
                                project_id='victim')
        self.assertEqual('o1/mpi', found.key)

    def test_a_node_owner_is_not_in_the_operators_scope(self):
        found = self._requested(container_group='mpi',
                                container_group_size=2, owner='o1')
        self.assertEqual('o1/mpi', found.key)

    def test_an_owner_lending_to_a_project_has_a_scope_of_its_own(self):
        # The owner may lend its node to any project: its nodes group with
        # its own nodes lent to that project, not with the project's
        # other nodes.
        found = self._requested(container_group='mpi',
                                container_group_size=2, owner='o1',
                                lessee='p1')
        self.assertEqual('p1~o1/mpi', found.key)
        found = self._requested(container_group='mpi',
                                container_group_size=2, owner='p1',
                                lessee='p1')
        self.assertEqual('p1/mpi', found.key)

    def test_bad_name(self):
        for name in ('MPI', '-mpi', 'a_b', 'x' * 49):
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    self._requested, container_group=name,
                                    container_group_size=2)
            self.assertIn('instance_info/container_group must be', str(exc))

    def test_size_without_name(self):
        exc = self.assertRaises(exception.MissingParameterValue,
                                self._requested, container_group_size=2)
        self.assertIn('instance_info/container_group,', str(exc))

    def test_bad_size(self):
        for size in (1, 'two', 33, None):
            exc = self.assertRaises(
                exception.InvalidParameterValue, self._requested,
                container_group='mpi', container_group_size=size)
            self.assertIn('instance_info/container_group_size', str(exc))
            self.assertIn('from 2 to 32', str(exc))

    def test_bad_launcher(self):
        exc = self.assertRaises(
            exception.InvalidParameterValue, self._requested,
            container_group='mpi', container_group_size=2,
            container_group_launcher='pmix')
        self.assertIn('container_group_launcher must be one of ssh, none',
                      str(exc))

    def _nova_node(self, **info):
        return obj_utils.create_test_node(
            self.context, uuid=uuidutils.generate_uuid(),
            instance_uuid=uuidutils.generate_uuid(),
            instance_info=dict({'container_image': IMAGE,
                                'project_id': 'p1'}, **info))

    def test_nova_servers_group(self):
        server = {'meta': {'container_group': 'mpi',
                           'container_group_size': '2'},
                  'launch_index': 0, 'reservation_id': 'r-abc123'}
        found = group_info.from_server(self._nova_node(), server)
        self.assertEqual(('mpi', 2, 'p1/mpi@r-abc123'),
                         (found.name, found.size, found.key))

    def test_nova_server_not_in_a_group(self):
        self.assertIsNone(group_info.from_server(
            self._nova_node(), {'meta': {'other': 'x'}}))
        self.assertIsNone(group_info.from_server(self._nova_node(), None))
        # Not a Nova deploy: instance_info is the operator's way.
        node = obj_utils.create_test_node(
            self.context, uuid=uuidutils.generate_uuid(),
            instance_info={'container_image': IMAGE})
        self.assertIsNone(group_info.from_server(
            node, {'meta': {'container_group': 'mpi'},
                   'reservation_id': 'r-1'}))

    def test_nova_server_property_errors(self):
        node = self._nova_node()
        exc = self.assertRaises(
            exception.InvalidParameterValue, group_info.from_server, node,
            {'meta': {'container_group': 'mpi',
                      'container_group_size': '1'},
             'reservation_id': 'r-1'})
        self.assertIn('server property container_group_size must be',
                      str(exc))
        exc = self.assertRaises(
            exception.InvalidParameterValue, group_info.from_server, node,
            {'meta': {'container_group': 'mpi',
                      'container_group_size': '2'},
             'reservation_id': None})
        self.assertIn('no reservation-id', str(exc))

    def test_image_property_refused(self):
        node = self._nova_node()
        node.driver_internal_info = {
            image_properties.SNAPSHOT_KEY: {
                'image': 'g1', 'properties': {'container_group': 'mpi'}}}
        with mock.patch.object(image_properties, 'from_image',
                               autospec=True, return_value=True):
            exc = self.assertRaises(
                exception.InvalidParameterValue, group_info.requested,
                node, {'container_group': 'mpi'})
        self.assertIn('a run group is not an image\'s', str(exc))
        self.assertIn('--property container_group=', str(exc))

    def test_ssh_launcher_needs_privileged(self):
        node = obj_utils.create_test_node(
            self.context, uuid=uuidutils.generate_uuid(),
            instance_info={'container_image': IMAGE,
                           'container_group': 'mpi',
                           'container_group_size': 2,
                           'container_privileged': False})
        exc = self.assertRaises(exception.InvalidParameterValue,
                                deploy_info.parse, node)
        self.assertIn('container_group_launcher=ssh runs the image\'s '
                      'sshd', str(exc))
        node.instance_info = dict(node.instance_info,
                                  container_group_launcher='none')
        self.assertEqual('none', deploy_info.parse(node).group.launcher)

    def test_port_needed(self):
        node = self._node('n0', 0)
        other = self._node('n1', 1, address=False)
        with task_manager.acquire(self.context, node.uuid) as task:
            mac, address = group_info.network_port(task)
        self.assertEqual(('52:54:00:bd:00:00', '192.0.2.10/24'),
                         (mac, str(address)))
        with task_manager.acquire(self.context, other.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    group_info.network_port, task)
        self.assertIn('needs extra/bmc_group_address', str(exc))
        bare = obj_utils.create_test_node(self.context,
                                          uuid=uuidutils.generate_uuid())
        with task_manager.acquire(self.context, bare.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    group_info.network_port, task)
        self.assertIn('exactly one port with physical_network bmc-group',
                      str(exc))


class BarrierTestCase(GroupTestCase):

    def setUp(self):
        super().setUp()
        self.a = self._node('a', 0)
        self.b = self._node('b', 1)

    def test_first_waits_second_completes(self):
        self._join(self.a)
        self._join(self.b)
        self.assertEqual(states.DEPLOYWAIT, self._arrive(self.a))
        self.assertEqual(members.STAGED, self._rec(self.a)['state'])
        self.assertTrue(barrier.waiting(
            objects.Node.get_by_uuid(self.context, self.a.uuid)))
        self.assertIsNone(self._arrive(self.b))
        rec_b = self._rec(self.b)
        self.assertEqual((members.STARTED, 1),
                         (rec_b['state'], rec_b['rank']))
        # a was woken once, under its lock.
        self.assertEqual(1, self.resume.call_count)
        self.assertEqual(members.RELEASED, self._rec(self.a)['state'])
        self.assertIsNone(self._arrive(self.a))
        rec_a = self._rec(self.a)
        self.assertEqual((members.STARTED, 0),
                         (rec_a['state'], rec_a['rank']))
        self.assertEqual(rec_a['plan'], rec_b['plan'])
        node = objects.Node.get_by_uuid(self.context, self.b.uuid)
        args = barrier.start_args(node)
        self.assertEqual(['mpi-0', 'mpi-1'],
                         [m['hostname'] for m in args['members']])
        self.assertEqual(['192.0.2.10', '192.0.2.11'],
                         [m['address'] for m in args['members']])
        self.assertEqual({'mac': '52:54:00:bd:00:01',
                          'address': '192.0.2.11/24'}, args['interface'])
        self.assertEqual(2, len(args['ssh']['authorized_keys']))
        self.assertIn('OPENSSH PRIVATE KEY', args['ssh']['private_key'])
        self.assertNotEqual(args['ssh']['private_key'],
                            args['ssh']['host_key'])
        for member in args['members']:
            self.assertEqual(2, len(member['host_key'].split()))
        # The private keys stay out of the record others read.
        self.assertNotIn('PRIVATE', str(rec_a))
        report = run_report.get(node)
        self.assertEqual((1, 2, 'running'),
                         (report['group']['rank'], report['group']['size'],
                          report['group']['state']))

    def test_not_a_member(self):
        node = obj_utils.create_test_node(
            self.context, uuid=uuidutils.generate_uuid(),
            driver_internal_info={DEPLOY_KEY: {}})
        with task_manager.acquire(self.context, node.uuid) as task:
            self.assertIsNone(barrier.arrive(task))
            self.assertIsNone(barrier.start_args(task.node))

    def test_timeout_names_who_is_missing(self):
        self._join(self.a)
        self.assertEqual(states.DEPLOYWAIT, self._arrive(self.a))
        rec = self._rec(self.a)
        outcome = barrier.evaluate(
            self.context, objects.Node.get_by_uuid(self.context,
                                                   self.a.uuid),
            now=rec['staged_at'] + 601)
        self.assertIn('waited 600 s', outcome.error)
        self.assertIn('1 more node(s) not deploying', outcome.error)
        self._join(self.b)
        outcome = barrier.evaluate(
            self.context, objects.Node.get_by_uuid(self.context,
                                                   self.a.uuid),
            now=rec['staged_at'] + 601)
        self.assertIn('b (deploying)', outcome.error)

    def test_poll_wakes_complete_group(self):
        self._join(self.a)
        self._join(self.b)
        self._arrive(self.a)
        # b staged, but its wake-up of a was lost.
        with mock.patch.object(barrier, 'wake', autospec=True):
            self._arrive(self.b)
        with task_manager.acquire(self.context, self.a.uuid,
                                  shared=True) as task:
            barrier.poll(task)
        self.assertEqual(members.RELEASED, self._rec(self.a)['state'])

    def test_member_failed(self):
        self._join(self.a)
        self._join(self.b)
        self._arrive(self.a)
        with task_manager.acquire(self.context, self.b.uuid) as task:
            task.node.last_error = 'agent never came up'
            lifecycle.left(task)
        self.assertEqual(members.RELEASED, self._rec(self.a)['state'])
        objects.Node.get_by_uuid(self.context, self.b.uuid)
        exc = self.assertRaises(exception.InstanceDeployFailure,
                                self._arrive, self.a)
        self.assertIn('member b failed: agent never came up', str(exc))

    def test_too_many_members(self):
        c = self._node('c', 2)
        for node in (self.a, self.b, c):
            self._join(node)
        exc = self.assertRaises(exception.InstanceDeployFailure,
                                self._arrive, self.a)
        self.assertIn('has 3 nodes deploying: a, b, c', str(exc))

    def test_name_of_a_running_group(self):
        self._join(self.a)
        self._join(self.b)
        self._arrive(self.a)
        self._arrive(self.b)
        self._arrive(self.a)
        c = self._node('c', 2)
        self._join(c)
        exc = self.assertRaises(exception.InstanceDeployFailure,
                                self._arrive, c)
        self.assertIn('is running already on a, b', str(exc))

    def test_other_projects_group_is_another_group(self):
        c = self._node('c', 2, lessee='p2')
        for node in (self.a, self.b, c):
            self._join(node)
        self.assertEqual('p2/mpi', self._rec(c)['key'])
        self._arrive(self.a)
        self.assertIsNone(self._arrive(self.b))

    def test_a_lessee_naming_the_victims_project_stays_outside(self):
        # Finding 2: the victim's group is the lessee p1's; the attacker
        # (lessee p2) writes project_id=p1 and the group's name, and
        # joins before the group is complete.
        a = self._node('va', 10, lessee='p1')
        b = self._node('vb', 11, lessee='p1')
        evil = self._node('evil', 12, lessee='p2',
                          instance_uuid=uuidutils.generate_uuid())
        evil.instance_info = dict(evil.instance_info, project_id='p1')
        evil.save()
        self._join(a)
        self._join(evil)
        self.assertEqual('p2/mpi', self._rec(evil)['key'])
        self.assertEqual(states.DEPLOYWAIT, self._arrive(a))
        self.assertEqual(states.DEPLOYWAIT, self._arrive(evil))
        self._join(b)
        self.assertIsNone(self._arrive(b))
        plan = self._rec(b)['plan']
        # The victims' plan holds them alone: no key, name or address of
        # theirs reached the attacker's record, nor its key theirs.
        self.assertEqual(sorted([a.uuid, b.uuid]), sorted(plan['nodes']))
        self.assertNotIn(self._rec(evil)['user_key'],
                         plan['authorized_keys'])
        self.assertNotIn('plan', self._rec(evil))


class RunningGroupBase(GroupTestCase):
    """Nodes a (rank 0) and b (rank 1) of group mpi, ACTIVE."""

    def setUp(self):
        super().setUp()
        self.a = self._node('a', 0)
        self.b = self._node('b', 1)
        for node in (self.a, self.b):
            self._join(node)
        self._arrive(self.a)
        self._arrive(self.b)
        self._arrive(self.a)
        for node in (self.a, self.b):
            node = objects.Node.get_by_uuid(self.context, node.uuid)
            node.provision_state = states.ACTIVE
            node.save()

    def _end(self, node, state, code=None, error=None):
        with task_manager.acquire(self.context, node.uuid) as task:
            report = run_report.get(task.node)
            run_report.update(task.node, report, state=state,
                              workload_exit_code=code, error=error)
            return lifecycle.run_ended(task)

    def _group_end(self, node):
        return lifecycle.group_end(
            self.context, objects.Node.get_by_uuid(self.context, node.uuid))


class LifecycleTestCase(RunningGroupBase):

    def test_running(self):
        self.assertIsNone(self._group_end(self.a))

    def test_member_still_recording_its_start(self):
        node = objects.Node.get_by_uuid(self.context, self.b.uuid)
        node.provision_state = states.DEPLOYWAIT
        node.save()
        self.assertIsNone(self._group_end(self.a))

    def test_rank0_exit_ends_group_well(self):
        self.assertEqual([self.b.uuid], self._end(self.a, 'finished', 0))
        ended = self._group_end(self.b)
        self.assertEqual((0, True), (ended['rank'], ended['ok']))
        self.assertIn('exited with code 0', ended['reason'])

    def test_rank0_failure(self):
        self._end(self.a, 'finished', 3)
        ended = self._group_end(self.b)
        self.assertEqual((0, False), (ended['rank'], ended['ok']))

    def test_lost_member_fails_group(self):
        self._end(self.b, 'failed', error='the agent has not answered')
        ended = self._group_end(self.a)
        self.assertEqual((1, False), (ended['rank'], ended['ok']))
        self.assertIn('rank 1 (b) the agent has not answered',
                      ended['reason'])
        report = run_report.get(objects.Node.get_by_uuid(self.context,
                                                         self.b.uuid))
        self.assertEqual(1, report['group']['ended_by']['rank'])

    def test_stopped_by_group_does_not_end_it(self):
        self._end(self.b, 'finished', 143)
        rec = self._rec(self.b)
        with task_manager.acquire(self.context, self.a.uuid) as task:
            report = run_report.get(task.node)
            run_report.update(task.node, report, state='finished',
                              workload_exit_code=0)
            lifecycle.run_ended(task, by_group=True)
        self.assertFalse(self._rec(self.a)['ended']['ends_group'])
        self.assertTrue(rec['ended']['ends_group'])

    def test_launcher_none_success_does_not_end_group(self):
        rec = self._rec(self.b)
        rec['launcher'] = protocol.GROUP_LAUNCHER_NONE
        node = objects.Node.get_by_uuid(self.context, self.b.uuid)
        members.save_record(node, rec)
        node.save()
        self._end(self.b, 'finished', 0)
        self.assertIsNone(self._group_end(self.a))

    def test_member_failed_to_start_ends_group_with_its_reason(self):
        node = objects.Node.get_by_uuid(self.context, self.b.uuid)
        node.provision_state = states.DEPLOYFAIL
        node.set_driver_internal_info(members.LEFT_KEY, {
            'key': '-/mpi', 'at': 1.0,
            'reason': 'the image has no /usr/sbin/sshd'})
        node.save()
        ended = self._group_end(self.a)
        self.assertEqual('rank 1 (b) left the group (deploy failed): the '
                         'image has no /usr/sbin/sshd', ended['reason'])

    def test_released_member_waits_again_if_a_member_went(self):
        c = self._node('c', 2, group='other', size=3)
        d = self._node('d', 3, group='other', size=3)
        for node in (c, d):
            self._join(node)
        self.assertEqual(states.DEPLOYWAIT, self._arrive(c))
        rec = self._rec(c)
        rec['state'] = members.RELEASED
        node = objects.Node.get_by_uuid(self.context, c.uuid)
        members.save_record(node, rec)
        node.save()
        self.assertEqual(states.DEPLOYWAIT, self._arrive(c))
        self.assertEqual(members.STAGED, self._rec(c)['state'])

    def test_member_undeployed_ends_group(self):
        node = objects.Node.get_by_uuid(self.context, self.b.uuid)
        node.provision_state = states.DELETING
        node.save()
        ended = self._group_end(self.a)
        self.assertIn('left the group (deleting)', ended['reason'])

    @mock.patch('ironic.conductor.rpcapi.ConductorAPI', autospec=True)
    def test_undeploy_one_undeploys_all(self, api):
        api.return_value.get_topic_for.return_value = 'topic'
        api.return_value.do_node_tear_down.side_effect = [None]
        with task_manager.acquire(self.context, self.a.uuid) as task:
            task.node.provision_state = states.DELETING
            lifecycle.left(task)
        api.return_value.do_node_tear_down.assert_called_once_with(
            mock.ANY, self.b.uuid, topic='topic')

    @mock.patch('ironic.conductor.rpcapi.ConductorAPI', autospec=True)
    def test_undeploy_tears_down_only_this_nodes_plan(self, api):
        # A node with the same key in its record but not in the plan (a
        # record written to look like a member) is not torn down.
        api.return_value.get_topic_for.return_value = 'topic'
        intruder = self._node('c', 2)
        self._join(intruder)
        self.assertEqual(self._rec(self.a)['key'],
                         self._rec(intruder)['key'])
        with task_manager.acquire(self.context, self.a.uuid) as task:
            task.node.provision_state = states.DELETING
            lifecycle.left(task)
        api.return_value.do_node_tear_down.assert_called_once_with(
            mock.ANY, self.b.uuid, topic='topic')

    @mock.patch('ironic.conductor.rpcapi.ConductorAPI', autospec=True)
    def test_a_member_whose_group_never_started_undeploys_nobody(self,
                                                                 api):
        # Its barrier step failed (or it never got there): its undeploy
        # is its own.
        waiting = self._node('c', 2, group='other')
        self._join(waiting)
        d = self._node('d', 3, group='other')
        self._join(d)
        self._arrive(d)
        with task_manager.acquire(self.context, waiting.uuid) as task:
            task.node.provision_state = states.DELETING
            lifecycle.left(task)
        api.return_value.do_node_tear_down.assert_not_called()
        self.assertEqual(members.STAGED, self._rec(d)['state'])

    @mock.patch('ironic.conductor.rpcapi.ConductorAPI', autospec=True)
    def test_undeploy_leaves_a_member_nova_holds_to_nova(self, api):
        # Nova deletes each server of a group itself; a member torn down
        # behind its back makes that deletion fail.
        node = objects.Node.get_by_uuid(self.context, self.b.uuid)
        node.instance_uuid = uuidutils.generate_uuid()
        node.save()
        with task_manager.acquire(self.context, self.a.uuid) as task:
            task.node.provision_state = states.DELETING
            lifecycle.left(task)
        api.return_value.do_node_tear_down.assert_not_called()

    @mock.patch('ironic.conductor.rpcapi.ConductorAPI', autospec=True)
    def test_undeploy_tolerates_member_being_undeployed(self, api):
        api.return_value.do_node_tear_down.side_effect = (
            exception.InvalidStateRequested('deleting'))
        with task_manager.acquire(self.context, self.a.uuid) as task:
            task.node.provision_state = states.DELETING
            lifecycle.left(task)
        self.assertEqual(1, api.return_value.do_node_tear_down.call_count)


class KeysTestCase(GroupTestCase):

    def test_each_member_its_own_keys(self):
        from ironic_bmc.group import keys
        one, two = keys.member_keys('a'), keys.member_keys('b')
        self.assertNotEqual(one['user'][0], two['user'][0])
        self.assertTrue(one['host'][1].startswith('ssh-ed25519 '))


class SummaryTestCase(RunningGroupBase):

    def _report(self, node):
        return run_report.get(objects.Node.get_by_uuid(self.context,
                                                       node.uuid))

    def _finish(self, node, code, joules, ready_at, by_group=False):
        with task_manager.acquire(self.context, node.uuid) as task:
            report = run_report.get(task.node)
            run_report.add_stage(task.node, report,
                                 protocol.STAGE_WORKLOAD_STARTED,
                                 report['created'],
                                 report['created'] + ready_at)
            run_report.update(task.node, report, state='finished',
                              workload_exit_code=code,
                              energy={'bmc_joules_run': joules})
            if by_group:
                ended = lifecycle.group_end(self.context, task.node)
                run_report.update(task.node, report, group=dict(
                    report['group'], ended_by=ended))
            lifecycle.run_ended(task, by_group=by_group)
            task.node.save()

    def test_group_report(self):
        self._finish(self.a, 0, 100.0, 40.0)
        self._finish(self.b, 143, 50.5, 55.0, by_group=True)
        found = summary.build(self._report(self.b))
        self.assertEqual(('finished', 150.5, 55.0, 1),
                         (found['state'], found['energy_j_total'],
                          found['slowest_t_ready_s'],
                          found['slowest_rank']))
        self.assertEqual([0, 143], [m['exit_code']
                                    for m in found['members']])
        self.assertEqual((0, True), (found['ended_by']['rank'],
                                     found['ended_by']['ok']))

    def test_failed_group(self):
        self._finish(self.a, 2, 100.0, 40.0)
        found = summary.build(self._report(self.a))
        # b runs on: its report is not final.
        self.assertEqual('running', found['state'])
        self.assertIsNone(found['energy_j_total'])
        self.assertEqual(100.0, found['energy_j_known'])
        self.assertFalse(found['ended_by']['ok'])

    def test_not_a_group(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            report = run_report.new(task.node, deploy_info.ContainerInfo(
                image=IMAGE))
        exc = self.assertRaises(exception.InvalidParameterValue,
                                summary.build, report)
        self.assertIn('is not a member of a run group', str(exc))


@mock.patch.object(manager_utils, 'node_power_action', autospec=True)
@mock.patch.object(run_close, 'collect', autospec=True, return_value=None)
@mock.patch.object(run_close, 'stop_workload', autospec=True)
@mock.patch.object(agent_calls, 'accept_heartbeats', autospec=True,
                   return_value=False)
class GroupWatchTestCase(RunningGroupBase):
    """The workload watcher ends a member's run when its group ends."""

    def setUp(self):
        super().setUp()
        for node in (self.a, self.b):
            node = objects.Node.get_by_uuid(self.context, node.uuid)
            node.power_state = states.POWER_ON
            report = run_report.get(node)
            report.update(state='running', mode='job')
            node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
            node.save()

    def _poll(self, node):
        with task_manager.acquire(self.context, node.uuid,
                                  shared=True) as task:
            workload_watch.check(task)
        return objects.Node.get_by_uuid(self.context, node.uuid)

    def test_lost_member_stops_the_others(self, mock_accept, mock_stop,
                                          mock_collect, mock_power):
        self._end(self.b, 'failed', error='Container run x is lost')
        mock_stop.return_value = {'state': 'exited', 'exit_code': 143,
                                  'output_tail': 'stopped\n'}
        node = self._poll(self.a)
        mock_stop.assert_called_once_with(mock.ANY,
                                          reason=protocol.STOP_REQUEST)
        report = run_report.get(node)
        self.assertEqual(('failed', 143), (report['state'],
                                           report['workload_exit_code']))
        self.assertIn('run group mpi ended: rank 1 (b) Container run x is '
                      'lost', report['error'])
        self.assertEqual(1, report['group']['ended_by']['rank'])
        self.assertEqual(members.ENDED, members.record(node)['state'])
        self.assertFalse(members.record(node)['ended']['ends_group'])
        mock_power.assert_called_once_with(mock.ANY, states.POWER_OFF)

    def test_rank0_success_ends_the_others_well(self, mock_accept,
                                                mock_stop, mock_collect,
                                                mock_power):
        self._end(self.a, 'finished', 0)
        mock_stop.return_value = {'state': 'exited', 'exit_code': 0}
        node = self._poll(self.b)
        report = run_report.get(node)
        self.assertEqual('finished', report['state'])
        self.assertIsNone(report['error'])
        self.assertTrue(report['group']['ended_by']['ok'])

    def test_silent_member_is_powered_off(self, mock_accept, mock_stop,
                                          mock_collect, mock_power):
        self._end(self.a, 'finished', 1)
        mock_stop.return_value = None
        node = self._poll(self.b)
        report = run_report.get(node)
        self.assertEqual('failed', report['state'])
        self.assertIn('is lost: run group mpi ended: rank 0 (a) exited '
                      'with code 1', report['error'])

    def test_running_group_polls_its_agent(self, mock_accept, mock_stop,
                                           mock_collect, mock_power):
        with mock.patch.object(workload_watch, '_status', autospec=True,
                               return_value={'state': 'running'}) as st:
            self._poll(self.a)
        st.assert_called_once()
        mock_stop.assert_not_called()
