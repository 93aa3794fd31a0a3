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

"""``openstack baremetal container group run`` and ``group show``."""

from unittest import mock

from ironicclient.common.apiclient import exceptions as ironic_exc
from osc_lib import exceptions
import pytest

from ironic_bmc_client.osc import deploy
from ironic_bmc_client.osc import group
from ironic_bmc_client.tests import fakes

REPORT = {
    'name': 'mpi', 'id': 'fab93db142cdf4ce', 'size': 2, 'launcher': 'ssh',
    'state': 'finished', 'energy_j_total': 150.5, 'energy_j_known': 150.5,
    'slowest_t_ready_s': 55.0, 'slowest_rank': 1,
    'ended_by': {'rank': 0, 'node': 'u0', 'ok': True,
                 'reason': 'rank 0 (n0) exited with code 0'},
    'members': [
        {'rank': 0, 'node': 'u0', 'node_name': 'n0', 'hostname': 'mpi-0',
         'address': '192.0.2.10', 'report': 'here', 'state': 'finished',
         'exit_code': 0, 't_ready_s': 40.0, 'energy_j': 100.0,
         'barrier_wait_s': 0.5, 'error': None},
        {'rank': 1, 'node': 'u1', 'node_name': 'n1', 'hostname': 'mpi-1',
         'address': '192.0.2.11', 'report': 'elsewhere'}],
}


def _baremetal(refuse=()):
    baremetal = mock.Mock()

    def get(ident, fields=None):
        node = mock.Mock(uuid='u' + ident[-1], provision_state='available')
        node.name = ident
        return node

    def deploy_node(uuid, state):
        if state == 'active' and uuid in refuse:
            raise ironic_exc.BadRequest('no port on bmc-group')
    baremetal.node.get.side_effect = get
    baremetal.node.set_provision_state.side_effect = deploy_node
    baremetal.node.vendor_passthru.return_value = REPORT
    return baremetal


def _run(argv, baremetal):
    application = fakes.app(fakes.FakeRuns(), baremetal=baremetal)
    with mock.patch.object(deploy, 'wait_for_run', autospec=True) as wait, \
            mock.patch.object(deploy, 'newest_report', autospec=True,
                              return_value=None):
        result = fakes.run(group.RunGroup, application, argv)
    return fakes.as_dict(*result), wait


def test_run_sets_the_group_on_every_node_and_waits_for_all():
    baremetal = _baremetal()
    shown, wait = _run(['n0', 'n1', '--name', 'mpi', '--image',
                        'registry.example:5000/hpc/mpi:1'], baremetal)
    patches = {call[0][0]: {op['path']: op['value'] for op in call[0][1]}
               for call in baremetal.node.update.call_args_list}
    assert sorted(patches) == ['u0', 'u1']
    assert patches['u0'] == {
        '/instance_info/container_image': 'registry.example:5000/hpc/mpi:1',
        '/instance_info/container_mode': 'job',
        '/instance_info/container_group': 'mpi',
        '/instance_info/container_group_size': 2}
    assert baremetal.node.set_provision_state.call_args_list == [
        mock.call('u0', 'active'), mock.call('u1', 'active')]
    assert wait.call_count == 2
    baremetal.node.vendor_passthru.assert_called_once_with(
        'u0', 'run_group', http_method='GET')
    assert shown['state'] == 'finished'
    assert shown['energy_j_total'] == 150.5
    assert shown['ended_by'] == 'rank 0 (u0): rank 0 (n0) exited with code 0'
    assert shown['members'].splitlines() == [
        'rank 0 mpi-0 192.0.2.10 n0: finished, exit 0, T_ready 40.0 s, '
        '100.0 J, barrier wait 0.5 s',
        'rank 1 mpi-1 192.0.2.11 u1: report on another conductor']


def test_launcher_and_mode_given():
    baremetal = _baremetal()
    _run(['n0', 'n1', 'n2', '--name', 'bb', '--image', 'r/i:1',
          '--launcher', 'none', '--mode', 'service'], baremetal)
    patch = {op['path']: op['value']
             for op in baremetal.node.update.call_args[0][1]}
    assert patch['/instance_info/container_group_launcher'] == 'none'
    assert patch['/instance_info/container_mode'] == 'service'
    assert patch['/instance_info/container_group_size'] == 3


def test_one_node_is_not_a_group():
    baremetal = _baremetal()
    with pytest.raises(exceptions.CommandError, match='at least two'):
        _run(['n0', 'n0', '--name', 'mpi', '--image', 'r/i:1'], baremetal)
    baremetal.node.update.assert_not_called()


def test_a_refused_member_undeploys_the_others():
    baremetal = _baremetal(refuse=('u1',))
    with pytest.raises(exceptions.CommandError) as exc:
        _run(['n0', 'n1', '--name', 'mpi', '--image', 'r/i:1'], baremetal)
    assert 'deploying n1 failed, so the group does not run (n0 ' \
        'undeployed): no port on bmc-group' in str(exc.value)
    assert baremetal.node.set_provision_state.call_args_list[-1] == \
        mock.call('u0', 'deleted')


def test_show():
    baremetal = _baremetal()
    application = fakes.app(fakes.FakeRuns(), baremetal=baremetal)
    shown = fakes.as_dict(*fakes.run(group.ShowGroup, application,
                                     ['n1', '--deploy-id', 'd1']))
    baremetal.node.vendor_passthru.assert_called_once_with(
        'n1', 'run_group', http_method='POST', args={'deploy_id': 'd1'})
    assert shown['slowest_rank'] == 1


def test_show_of_a_node_without_a_group():
    baremetal = _baremetal()
    baremetal.node.vendor_passthru.side_effect = ironic_exc.BadRequest(
        'not a member of a run group')
    application = fakes.app(fakes.FakeRuns(), baremetal=baremetal)
    with pytest.raises(exceptions.CommandError,
                       match='n0 has no run group report'):
        fakes.run(group.ShowGroup, application, ['n0'])
