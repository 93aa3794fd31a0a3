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

"""Warm nodes on a real QEMU node: cleaning boots the agent and leaves it
up (fast track); the next container deploy runs on it with no power
action; a deploy after that run, without cleaning, is cold.

"No power action" is what the node's host saw: libvirt writes a
``starting up`` line to the domain's log at every start of its QEMU
process (every power-on through the BMC), and the domain keeps its id
while it runs (a reset through the BMC would show as a new boot on the
serial console).
"""

import os

import pytest

from bmc_common import protocol
from bmc_lab import container_job
from bmc_lab import nodes
from bmc_lab import warm_run
from bmc_lab.tests.e2e import boot_count


def _starts(lab):
    path = os.path.join(boot_count.QEMU_LOG_DIR,
                        lab.node_name(0) + '.log')
    with open(path, 'rb') as f:
        return sum(1 for line in f if b': starting up ' in line)


def _domid(lab):
    return nodes.virsh('domid', lab.node_name(0)).stdout.strip()


def _console_boots(lab):
    """Linux boots on the node's serial console so far."""
    with open(nodes.console_log(lab, 0), 'rb') as f:
        return f.read().count(b'Linux version ')


def _stage_names(report):
    return [s['name'] for s in report['stages']]


@pytest.fixture(scope='module')
def warm_runs(lab):
    image = container_job.push_demo_image(lab)
    runs = {}
    # The node's next tests: cold and without cleaning, as before.
    with warm_run.warm_node(lab) as cli:
        name = lab.node_name(0)
        # Cleaning boots the agent, runs no step (nothing is on the
        # disks) and leaves the agent up.
        node = warm_run.clean(lab)
        runs['after_cleaning'] = {
            'power_state': node.power_state,
            'agent_url': bool(node.driver_internal_info.get('agent_url')),
            'starts': _starts(lab), 'domid': _domid(lab),
            'console_boots': _console_boots(lab)}

        def started(report):
            """the workload started"""
            return protocol.STAGE_WORKLOAD_STARTED in _stage_names(report)

        container_job.deploy(lab, image, mode=protocol.MODE_JOB,
                             wait=False)
        container_job.wait_report(lab, until=started, timeout=300)
        runs['at_start'] = {'starts': _starts(lab), 'domid': _domid(lab),
                            'console_boots': _console_boots(lab)}
        runs['warm'] = container_job.wait_report(lab, timeout=300)
        print(container_job.format_report(runs['warm']))

        # The same node again after that run, without cleaning: cold.
        # (Undeploy then deploy: Ironic 39.0's rebuild fails before it
        # reaches the driver, UnboundLocalError on auto_lessee.)
        cli.node.update(name, [{'op': 'replace', 'path': '/automated_clean',
                                'value': False}])
        container_job.undeploy(lab)
        starts = _starts(lab)
        container_job.deploy(lab, image, mode=protocol.MODE_JOB)
        runs['cold'] = container_job.wait_report(lab, timeout=300)
        runs['cold_starts'] = _starts(lab) - starts
        print(container_job.format_report(runs['cold']))
    return runs


def test_cleaning_leaves_the_agent_up(warm_runs):
    after = warm_runs['after_cleaning']
    assert after['power_state'] == 'power on', after
    assert after['agent_url'], after


def test_warm_deploy_has_no_power_action(warm_runs):
    after, start = warm_runs['after_cleaning'], warm_runs['at_start']
    # No QEMU start, the same domain, no new kernel on the console.
    assert start == {k: after[k] for k in start}, (after, start)
    report = warm_runs['warm']
    assert report['state'] == 'finished', report
    assert report['warm'] is True
    assert report['agent_up_for_s'] > 0
    assert protocol.STAGE_POWER_ON not in _stage_names(report)
    assert 'boot' not in report
    assert report['workload_exit_code'] == 0


def test_a_deploy_after_a_run_is_cold(warm_runs):
    report = warm_runs['cold']
    assert report['state'] == 'finished', report
    assert report['warm'] is False
    assert report['cold_reason'] == 'no agent booted by cleaning'
    assert protocol.STAGE_POWER_ON in _stage_names(report)
    assert warm_runs['cold_starts'] >= 1
