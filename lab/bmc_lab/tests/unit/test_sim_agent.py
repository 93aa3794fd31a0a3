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

"""The simulated agents answer IPA's command API as the real hardware
manager does, and never leave loopback."""

import json
import time

import pytest
import requests

from bmc_common import protocol
from bmc_lab import sim_agent

UUID = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123'
TOKEN = 't' * 43


def _step(name, **args):
    return {'step': {'step': name, 'interface': 'deploy', 'priority': 0,
                     'args': args}}


@pytest.fixture
def sim():
    agents = sim_agent.SimAgents('http://127.0.0.1:9', 8080, 0,
                                 job_seconds=0.05)
    agents.add_node(UUID, '52:54:00:5c:00:01')
    return agents


def _run(sim, name, **args):
    node = sim.nodes[UUID]
    record = sim.command(node, 'deploy.execute_deploy_step',
                         _step(name, **args), wait=True)
    return record


def test_guest_address_becomes_loopback():
    assert sim_agent.loopback_url(
        'http://10.0.2.100:8080/x/rootfs.erofs', 18080) == (
            'http://127.0.0.1:8080/x/rootfs.erofs')
    assert sim_agent.loopback_url('http://10.0.2.100/x', 18080) == (
        'http://127.0.0.1:18080/x')
    assert sim_agent.loopback_url('http://127.0.0.1:5/x', 1) == (
        'http://127.0.0.1:5/x')


def test_other_addresses_are_refused():
    with pytest.raises(sim_agent.StepFailed, match='only reach loopback'):
        sim_agent.loopback_url('http://192.0.2.1/rootfs', 8080)


def test_deploy_steps_are_the_managers(sim):
    record = sim.command(sim.nodes[UUID], 'deploy.get_deploy_steps', {},
                         wait=True)
    assert record['command_status'] == 'SUCCEEDED'
    steps = record['command_result']['deploy_steps'][sim_agent.MANAGER]
    assert {s['step'] for s in steps} == set(sim_agent.STEPS)
    assert all(s['priority'] == 0 for s in steps)


def test_unknown_command_and_step_fail_with_a_message(sim):
    record = sim.command(sim.nodes[UUID], 'standby.cache_image', {},
                         wait=True)
    assert record['command_status'] == 'FAILED'
    assert 'no command standby.cache_image' in (
        record['command_error']['message'])
    record = _run(sim, 'bmc_flash_firmware')
    assert record['command_status'] == 'FAILED'
    assert 'does not run step bmc_flash_firmware' in (
        record['command_error']['message'])


def test_only_ramfs_is_simulated(sim):
    record = _run(sim, protocol.STEP_STAGE_ROOTFS, rootfs='nfs')
    assert record['command_status'] == 'FAILED'
    assert 'only the ramfs rootfs mode' in record['command_error']['message']


def test_a_job_runs_exits_and_leaves_its_output(sim):
    started = _run(sim, protocol.STEP_START_WORKLOAD,
                   command=['/bin/true'], mode=protocol.MODE_JOB)
    assert started['command_status'] == 'SUCCEEDED'
    status = _run(sim, protocol.STEP_WORKLOAD_STATUS, notify_exit=True)
    assert status['command_result']['deploy_result']['state'] == 'running'
    refused = _run(sim, protocol.STEP_COLLECT_OUTPUT)
    assert refused['command_status'] == 'FAILED'
    time.sleep(0.2)
    status = _run(sim, protocol.STEP_WORKLOAD_STATUS)
    result = status['command_result']['deploy_result']
    assert (result['state'], result['exit_code']) == ('exited', 0)
    assert [s['name'] for s in result['stages']] == [
        protocol.STAGE_WORKLOAD_STARTED, protocol.STAGE_WORKLOAD_EXITED]
    collected = _run(sim, protocol.STEP_COLLECT_OUTPUT, results=['/r'])
    output = collected['command_result']['deploy_result']['output']
    assert protocol.unpack(output['data']) == sim_agent.OUTPUT
    # The exit was announced by a heartbeat (no token here: not sent).
    assert sim.stats['exit_heartbeats'] == 1


def test_status_polls_do_not_pile_up(sim):
    for _ in range(5):
        _run(sim, protocol.STEP_WORKLOAD_STATUS)
    assert len(sim.nodes[UUID].commands) == 1


def test_a_stop_ends_a_service_without_an_exit_heartbeat(sim):
    _run(sim, protocol.STEP_START_WORKLOAD, command=['/bin/sleep', '9'],
         mode=protocol.MODE_SERVICE)
    _run(sim, protocol.STEP_WORKLOAD_STATUS, notify_exit=True)
    stopped = _run(sim, protocol.STEP_STOP_WORKLOAD,
                   reason=protocol.STOP_UNDEPLOY)
    result = stopped['command_result']['deploy_result']
    assert result['state'] == 'exited'
    assert result['stop']['reason'] == protocol.STOP_UNDEPLOY
    assert sim.stats['exit_heartbeats'] == 0


def test_api_needs_the_token_and_refuses_a_second_command(sim, tmp_path):
    sim.start()
    try:
        node = sim.nodes[UUID]
        node.token = TOKEN
        url = 'https://127.0.0.1:%d/%s/v1/commands/' % (sim.port, UUID)
        verify = tmp_path / 'agents.pem'
        verify.write_text(sim.cert)
        resp = requests.get(url, verify=str(verify), timeout=10)
        assert resp.status_code == 401
        body = {'name': 'deploy.execute_deploy_step',
                'params': _step(protocol.STEP_WORKLOAD_STATUS)}
        node.commands.append({'command_status': 'RUNNING'})
        resp = requests.post(url, params={'agent_token': TOKEN},
                             data=json.dumps(body), verify=str(verify),
                             timeout=10)
        assert resp.status_code == 409
        node.commands.clear()
        resp = requests.post(url, params={'agent_token': TOKEN,
                                          'wait': 'true'},
                             data=json.dumps(body), verify=str(verify),
                             timeout=10)
        assert resp.status_code == 200
        assert resp.json()['command_status'] == 'SUCCEEDED'
        listed = requests.get(url, params={'agent_token': TOKEN},
                              verify=str(verify), timeout=10).json()
        assert [c['command_name'] for c in listed['commands']] == [
            'execute_deploy_step']
    finally:
        sim.stop()


def test_a_machine_boots_once_per_power_on(sim, monkeypatch):
    booted = []
    monkeypatch.setattr(sim, '_boot', lambda node, gen: booted.append(gen))

    def seen(state, power):
        return sim.observe({'uuid': UUID, 'provision_state': state,
                            'power_state': 'power %s' % power})

    assert not seen('available', 'off')
    assert seen('wait call-back', 'on')
    # Back to "wait call-back" after each step: no second boot.
    for state in ('deploying', 'wait call-back', 'deploying', 'active'):
        assert not seen(state, 'on')
    assert not seen('active', 'off')        # the job ended
    assert seen('wait call-back', 'on')     # the next deploy boots again
    time.sleep(0.1)
    assert booted == [1, 2]


class _Answers:
    """A session whose lookups answer ``codes`` in turn."""

    def __init__(self, codes):
        self.codes = list(codes)
        self.calls = 0

    def get(self, url, **kwargs):
        self.calls += 1
        resp = requests.Response()
        resp.status_code = self.codes.pop(0)
        resp._content = json.dumps({'config': {'agent_token': TOKEN}}
                                   ).encode()
        return resp


def test_lookup_tries_again_while_the_conductor_holds_the_node(
        sim, monkeypatch):
    # Ironic answers 409 while the conductor holds the node, as IPA's
    # lookup expects; the simulated agent does not give up on it.
    monkeypatch.setattr(sim_agent.time, 'sleep', lambda s: None)
    session = _Answers([409, 409, 404, 200])
    config = sim._lookup(session, sim.nodes[UUID])
    assert config == {'agent_token': TOKEN}
    assert session.calls == 4
    assert sim.stats['lookup_retries'] == 3


def test_lookup_gives_up_after_ipas_timeout(sim, monkeypatch):
    monkeypatch.setattr(sim_agent.time, 'sleep', lambda s: None)
    monkeypatch.setattr(sim_agent, 'LOOKUP_TIMEOUT', 0)
    with pytest.raises(requests.HTTPError):
        sim._lookup(_Answers([409]), sim.nodes[UUID])
