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

"""The scale lab and its simulated nodes, driven through Ironic's API.

The lab's own settings (ports and name, so that it may run next to
another lab; the ``scaled`` profile), the placeholder boot files the
conductor publishes, N enrolled nodes of the ``container-fake-hardware``
type (their machines and agents are :mod:`bmc_lab.sim_agent`'s), the
container job set on each, every deploy asked for at once, the nodes
polled until each is done or failed, and their run reports read.
"""

import concurrent.futures
import os
import time

import requests

from bmc_lab import client as lab_client
from bmc_lab import ironic_conf
from bmc_lab import settings as lab_settings
from bmc_lab import sim_agent
from bmc_common import protocol

DRIVER = 'container-fake-hardware'
#: The scale lab's own ports and name: it may run next to another lab.
PORTS = lab_settings.Ports(ironic_api=36385, http=38080, registry=35050,
                           nfs=32049, ipmi_base=36230, agent_base=39900,
                           wol=36229, runs_api=36388)
NAME = 'bmc-scale'
JOB = ['/bin/sh', '-c', 'echo simulated']


def lab_settings_for(state_dir, nodes, conductors):
    return lab_settings.Settings(
        state_dir=state_dir, profile=lab_settings.PROFILE_SCALED,
        nodes=0, conductors=conductors, name=NAME, ports=PORTS,
        ironic_debug=False)


def placeholder_boot_files(settings):
    """The boot files the conductor publishes for every node; the
    simulated firmware fetches them but boots nothing."""
    os.makedirs(settings.images_dir, exist_ok=True)
    for name in (ironic_conf.AGENT_KERNEL, ironic_conf.AGENT_RAMDISK,
                 'modules-default.cpio.gz'):
        with open(os.path.join(settings.images_dir, name), 'wb') as f:
            f.write(b'simulated boot file: %s\n' % name.encode()
                    + os.urandom(64 * 1024))


def _mac(index):
    return '52:54:00:5c:%02x:%02x' % (index // 256, index % 256)


def parallel(func, items, workers=8):
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(func, items))


def set_container(settings, uuids, image):
    """The container job on every node (an undeploy clears
    instance_info)."""
    def one(uuid):
        lab_client.get_client(settings).node.update(uuid, [
            {'op': 'replace', 'path': '/deploy_interface',
             'value': 'container'}] + [
            {'op': 'add', 'path': '/instance_info/%s' % key, 'value': value}
            for key, value in ((protocol.II_IMAGE, image),
                               (protocol.II_MODE, protocol.MODE_JOB),
                               (protocol.II_COMMAND, JOB))])
    parallel(one, uuids)


def enroll(settings, count):
    """N available nodes of the fake container type; {uuid: mac}."""
    def one(index):
        cli = lab_client.get_client(settings)
        node = cli.node.create(
            name='%s-sim-%d' % (NAME, index), driver=DRIVER,
            boot_interface='ipxe', deploy_interface='container',
            vendor_interface='container', power_interface='fake',
            management_interface='fake',
            properties={'cpu_arch': 'x86_64',
                        'capabilities': 'boot_mode:bios'})
        cli.port.create(address=_mac(index), node_uuid=node.uuid)
        for target, state in (('manage', 'manageable'),
                              ('provide', 'available')):
            cli.node.set_provision_state(node.uuid, target)
            lab_client.StateWatcher(cli, node.uuid).wait(state, 300)
        return node.uuid, _mac(index)
    return dict(parallel(one, range(count)))


def _nodes(settings):
    resp = requests.get(settings.api_url + '/v1/nodes', timeout=60,
                        headers=sim_agent.API_HEADERS,
                        params={'fields': 'uuid,provision_state,'
                                'power_state,last_error'})
    resp.raise_for_status()
    return {n['uuid']: n for n in resp.json()['nodes']}


def trigger(settings, uuids):
    """Ask for every deploy at once (8 API clients); {uuid: when}."""
    def one(uuid):
        cli = lab_client.get_client(settings)
        t = time.time()
        cli.node.set_provision_state(uuid, 'active')
        return uuid, t
    return dict(parallel(one, uuids))


def wait(settings, uuids, done, timeout):
    """Poll until every node is done or failed; (done, failed, seconds of
    the last one done after the first request)."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = _nodes(settings)
        failed = {u: nodes[u].get('last_error') or nodes[u][
            'provision_state'] for u in uuids
            if nodes[u]['provision_state'] in ('deploy failed', 'error')}
        finished = [u for u in uuids if done(nodes[u])]
        if len(finished) + len(failed) == len(uuids):
            return finished, failed
        if time.monotonic() > deadline:
            for u in uuids:
                if u not in failed and u not in finished:
                    failed[u] = 'not done within %d s: %s' % (
                        timeout, nodes[u]['provision_state'])
            return finished, failed
        time.sleep(1)


def job_done(node):
    return (node['provision_state'] == 'active'
            and node['power_state'] == 'power off')


def active(node):
    return node['provision_state'] == 'active'


def run_reports(settings, uuids):
    def one(uuid):
        cli = lab_client.get_client(settings)
        try:
            r = cli.node.vendor_passthru(uuid, 'run_report',
                                         http_method='GET')
        except Exception as exc:    # noqa: BLE001 - counted as a failure
            return uuid, {'state': 'unreadable: %s' % exc}
        return uuid, r.to_dict() if hasattr(r, 'to_dict') else r
    return dict(parallel(one, uuids))
