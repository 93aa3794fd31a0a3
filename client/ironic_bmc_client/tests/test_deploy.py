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

"""``openstack baremetal container run``: the instance_info it sets, the
deploy, the wait."""

from unittest import mock

from ironicclient.common.apiclient import exceptions as ironic_exc
from keystoneauth1 import exceptions as ks_exc
from osc_lib import exceptions
import pytest

from bmc_common import reference
from ironic_bmc_client.osc import deploy
from ironic_bmc_client.tests import fakes
from ironic_bmc_client.tests import fixtures

OLD_ID = '0a1b2c3d-0000-4000-8000-000000000001'
DOCUMENTED = {key.name for key in reference.INSTANCE_INFO_KEYS}


class Runs(fakes.FakeRuns):
    """Runs whose newest report changes as the node is polled."""

    def __init__(self, *timeline):
        super().__init__(fixtures.report(deploy_id=OLD_ID,
                                         created=fixtures.CREATED - 600))
        self.timeline = list(timeline)

    def list(self, **kwargs):
        if self.calls and self.timeline:
            report = self.timeline.pop(0)
            if report is not None:
                self.reports = [r for r in self.reports
                                if r['deploy_id'] != report['deploy_id']]
                self.reports.append(report)
        return super().list(**kwargs)


def _baremetal(*states):
    baremetal = mock.Mock()
    node = mock.Mock(uuid=fixtures.NODE, provision_state='available')
    node.name = 'node-0'
    polls = [mock.Mock(provision_state=s, last_error=e) for s, e in states]
    baremetal.node.get.side_effect = [node] + polls
    return baremetal


def _run(argv, fake_runs, baremetal):
    application = fakes.app(fake_runs, baremetal=baremetal)
    with mock.patch.object(deploy.time, 'sleep') as sleep:
        result = fakes.run(deploy.RunContainer, application,
                           ['node-0'] + argv)
    return result, sleep


def _patch(baremetal):
    node, patch = baremetal.node.update.call_args[0]
    assert node == fixtures.NODE
    return {op['path']: op['value'] for op in patch}


def test_job_sets_instance_info_deploys_and_waits_until_it_ends():
    running = fixtures.report(state='running', workload_exit_code=None)
    baremetal = _baremetal(('wait call-back', None), ('active', None),
                           ('active', None))
    fake = Runs(None, running, fixtures.report())
    (columns, values), sleep = _run(
        ['--image', 'registry.example:5000/hpc/solver:1', '--mode', 'job',
         '--command', '["/solver", "--steps", "12"]', '--env', 'OMP=4',
         '--env', 'A=b=c', '--tunables', 'thp-never', '--rootfs', 'stream',
         '--walltime', '2h', '--interval', '3'], fake, baremetal)
    assert _patch(baremetal) == {
        '/instance_info/container_image':
            'registry.example:5000/hpc/solver:1',
        '/instance_info/container_mode': 'job',
        '/instance_info/container_command': ['/solver', '--steps', '12'],
        '/instance_info/container_env': {'OMP': '4', 'A': 'b=c'},
        '/instance_info/container_tunables': 'thp-never',
        '/instance_info/container_rootfs': 'stream',
        '/instance_info/container_walltime': '2h'}
    baremetal.node.set_provision_state.assert_called_once_with(
        fixtures.NODE, 'active')
    shown = fakes.as_dict(columns, values)
    assert shown['deploy_id'] == fixtures.DEPLOY_ID
    assert shown['state'] == 'finished'
    assert sleep.call_args_list == [mock.call(3.0)] * 2


def test_args_keep_the_entrypoint():
    baremetal = _baremetal(('active', None))
    _run(['--image', 'i', '--args', '["postgres", "-c", "x=1"]',
          '--no-wait'], Runs(), baremetal)
    assert _patch(baremetal)['/instance_info/container_args'] == [
        'postgres', '-c', 'x=1']
    assert '/instance_info/container_command' not in _patch(baremetal)
    assert set(_patch(baremetal)) <= {
        '/instance_info/%s' % key for key in DOCUMENTED}


def test_every_key_it_sets_is_documented():
    baremetal = _baremetal(('active', None))
    _run(['--image', 'i', '--mode', 'service', '--command', '["a"]',
          '--env', 'K=V', '--tunables', '{"profile": "hpc-compute", '
          '"hugepages": 512}', '--rootfs', 'nfs', '--walltime', '90m',
          '--no-wait'], Runs(), baremetal)
    keys = {path.split('/')[-1] for path in _patch(baremetal)}
    assert keys <= DOCUMENTED
    assert len(keys) == 7


def test_tunables_object():
    baremetal = _baremetal()
    _run(['--image', 'i', '--tunables', '{"hugepages": 512}', '--no-wait'],
         Runs(), baremetal)
    assert _patch(baremetal)['/instance_info/container_tunables'] == {
        'hugepages': 512}


def test_service_waits_until_its_workload_runs():
    baremetal = _baremetal(('active', None))
    fake = Runs(fixtures.report(mode='service', state='running'))
    (columns, values), _sleep = _run(['--image', 'i'], fake, baremetal)
    assert fakes.as_dict(columns, values)['state'] == 'running'
    assert '/instance_info/container_mode' not in _patch(baremetal)


def test_the_previous_run_is_not_taken_for_the_new_one():
    baremetal = _baremetal(('deploying', None), ('active', None))
    fake = Runs(None, fixtures.report())
    (columns, values), sleep = _run(['--image', 'i', '--mode', 'job'],
                                    fake, baremetal)
    assert fakes.as_dict(columns, values)['deploy_id'] == fixtures.DEPLOY_ID
    assert sleep.call_count == 1


def test_no_wait():
    baremetal = _baremetal()
    (columns, values), sleep = _run(['--image', 'i', '--no-wait'], Runs(),
                                    baremetal)
    assert fakes.as_dict(columns, values) == {
        'node': 'node-0', 'provision_state': 'deploying', 'image': 'i',
        'next': 'openstack baremetal container show node-0'}
    sleep.assert_not_called()


def test_deploy_failed_gives_last_error():
    baremetal = _baremetal(('deploying', None),
                           ('deploy failed', 'instance_info/container_image '
                            'registry.example:5000/x: manifest unknown'))
    with pytest.raises(exceptions.CommandError) as exc:
        _run(['--image', 'registry.example:5000/x'], Runs(), baremetal)
    assert str(exc.value) == (
        'deploy of node-0 failed (deploy failed): instance_info/'
        'container_image registry.example:5000/x: manifest unknown')


def test_timeout():
    baremetal = _baremetal(*[('wait call-back', None)] * 3)
    with mock.patch.object(deploy.time, 'monotonic',
                           side_effect=[0.0, 1.0, 20.0]):
        with pytest.raises(exceptions.CommandError,
                           match='within 10s: provision state wait '
                                 'call-back, run not recorded yet'):
            _run(['--image', 'i', '--timeout', '10'], Runs(), baremetal)


@pytest.mark.parametrize('argv,message', [
    (['--command', 'solver'], 'JSON list of strings'),
    (['--command', '["a", 1]'], 'non-empty JSON list of strings'),
    (['--args', '"postgres"'], '--args must be a JSON list of strings'),
    (['--env', 'NOEQUALS'], 'KEY=VALUE'),
    (['--tunables', '{"a":'], 'profile name or a JSON object'),
])
def test_bad_arguments_change_nothing(argv, message):
    baremetal = _baremetal()
    with pytest.raises(exceptions.CommandError, match=message):
        _run(['--image', 'i'] + argv, Runs(), baremetal)
    baremetal.node.update.assert_not_called()
    baremetal.node.set_provision_state.assert_not_called()


class NoRunsEndpoint:
    def list(self, **kwargs):
        raise ks_exc.EndpointNotFound('baremetal-container')


def test_without_the_runs_api_the_report_comes_by_vendor_passthru():
    baremetal = _baremetal(('active', None), ('active', None))
    old = mock.Mock()
    old.to_dict.return_value = fixtures.report(deploy_id=OLD_ID)
    baremetal.node.vendor_passthru.side_effect = [
        old, old, fixtures.report()]
    (columns, values), _sleep = _run(['--image', 'i', '--mode', 'job'],
                                     NoRunsEndpoint(), baremetal)
    assert fakes.as_dict(columns, values)['deploy_id'] == fixtures.DEPLOY_ID
    baremetal.node.vendor_passthru.assert_called_with(
        fixtures.NODE, 'run_report', http_method='GET')


def test_vendor_passthru_of_a_node_without_a_report():
    baremetal = _baremetal(('active', None))
    baremetal.node.vendor_passthru.side_effect = [
        ironic_exc.NotFound(), fixtures.report()]
    (columns, values), _sleep = _run(['--image', 'i', '--mode', 'job'],
                                     NoRunsEndpoint(), baremetal)
    assert fakes.as_dict(columns, values)['state'] == 'finished'
