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

"""A machine without a BMC on a real QEMU node: the ``container-wol``
hardware type powers it on with a Wake-on-LAN magic packet (to the lab's
listener on 127.0.0.1, which starts the domain) and off through its
agent when the job ends; the report's energy is in-band (RAPL) only and
says why (and a QEMU node has no RAPL, which it says too).

"Powered on by the packet" is what the host saw: the listener logged a
magic packet for the node's MAC and started its domain, and the domain's
QEMU process started once.  "Off in-band": the domain is shut off with
no BMC involved (the node has none in Ironic).
"""

import os
import time

import pytest
from ironicclient.common.apiclient import exceptions as client_exc

from bmc_common import protocol
from bmc_lab import container_job
from bmc_lab import nodes
from bmc_lab import wol_listener
from bmc_lab import wol_node
from bmc_lab.tests.e2e import boot_count


def _starts(lab):
    """QEMU starts of the node's domain so far (libvirt's log of it
    appears at its first start: a lab whose node never booted has none)."""
    path = os.path.join(boot_count.QEMU_LOG_DIR, lab.node_name(0) + '.log')
    try:
        with open(path, 'rb') as f:
            return sum(1 for line in f if b': starting up ' in line)
    except FileNotFoundError:
        return 0


def _domstate(lab):
    return nodes.virsh('domstate', lab.node_name(0)).stdout.strip()


def _wait_shut_off(lab, timeout=120):
    deadline = time.monotonic() + timeout
    while _domstate(lab) != 'shut off' and time.monotonic() < deadline:
        time.sleep(2)
    return _domstate(lab)


@pytest.fixture(scope='module')
def wol_run(lab):
    image = container_job.push_demo_image(lab)
    name = lab.node_name(0)
    with wol_node.wol_node(lab) as cli:
        node = cli.node.get(name)
        before = {'driver': node.driver, 'power_state': node.power_state,
                  'domstate': _domstate(lab), 'starts': _starts(lab),
                  'driver_info': node.driver_info}
        cursor = wol_node.listener_cursor(lab)
        container_job.deploy(lab, image, mode=protocol.MODE_JOB)
        report = container_job.wait_report(lab, timeout=300)
        print(container_job.format_report(report))
        after = {'domstate': _wait_shut_off(lab),
                 'starts': _starts(lab),
                 'events': wol_listener.events(cursor.text())}
        node = cli.node.get(name)
        after.update(power_state=node.power_state,
                     provision_state=node.provision_state,
                     last_error=node.last_error)
    restored = cli.node.get(name)
    return {'report': report, 'before': before, 'after': after,
            'restored': {'driver': restored.driver,
                         'power_interface': restored.power_interface,
                         'power_state': restored.power_state,
                         'provision_state': restored.provision_state}}


def test_powered_on_by_the_magic_packet(wol_run, lab):
    before, after = wol_run['before'], wol_run['after']
    assert before['driver'] == 'container-wol'
    assert not any(k.startswith('ipmi_') for k in before['driver_info'])
    assert (before['power_state'], before['domstate']) == (
        'power off', 'shut off'), before
    mac = lab.node_mac(0)
    for_node = [e for e in after['events'] if e['mac'] == mac]
    assert for_node, after['events']
    assert all(e['sender'].startswith('127.0.0.1:') for e in for_node)
    started = [e for e in for_node if e['action'] == 'started']
    assert len(started) == 1, for_node
    assert started[0]['domain'] == lab.node_name(0)
    assert started[0]['state'] == 'shut-off'
    # The one QEMU start of the run is the listener's.
    assert after['starts'] - before['starts'] == 1, (before, after)


def test_the_job_ran(wol_run):
    report = wol_run['report']
    assert report['state'] == 'finished', report
    assert report['workload_exit_code'] == 0, report['output_tail']
    assert 'Hello from a container' in report['output_tail']
    names = [s['name'] for s in report['stages']]
    assert protocol.STAGE_POWER_ON in names
    assert protocol.STAGE_POWERED_OFF in names


def test_energy_is_in_band_only_and_says_why(wol_run):
    energy = wol_run['report']['energy']
    assert energy['available'] is False
    assert energy['in_band_only'] is True
    assert energy['bmc'] == 'unavailable: no BMC (Wake-on-LAN node)'
    assert 'in-band only' in energy['reason']
    assert 'bmc_samples' not in energy
    # A QEMU (TCG) node has no RAPL: the report says so, with why.
    assert energy['rapl']['available'] is False, energy
    assert energy['rapl']['reason'], energy


def test_powered_off_in_band_and_restored(wol_run):
    after = wol_run['after']
    assert after['domstate'] == 'shut off', after
    assert after['power_state'] == 'power off', after
    assert after['provision_state'] == 'active', after
    assert not after['last_error'], after
    assert wol_run['restored'] == {
        'driver': 'container-ipmi', 'power_interface': 'ipmitool',
        'power_state': 'power off', 'provision_state': 'available'}


def test_bad_wol_port_refused_naming_the_field(lab):
    name = lab.node_name(0)
    with wol_node.wol_node(lab) as cli:
        cli.node.update(name, [{'op': 'replace',
                                'path': '/driver_info/wol_port',
                                'value': '70000'}])
        power = cli.node.validate(name).power
        with pytest.raises(client_exc.ClientException) as refused:
            cli.node.set_power_state(name, 'on')
        state = cli.node.get(name).power_state
    assert power['result'] is False, power
    assert 'driver_info/wol_port' in power['reason'], power
    assert '1 to 65535' in power['reason'], power
    assert 'wol_port' in str(refused.value)
    assert state == 'power off'
