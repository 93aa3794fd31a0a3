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

"""The cloud profile for real: Keystone, Glance, Placement, Nova (Ironic
driver) and the Neutron API from the cloud virtualenv, in front of a
fake-hardware Ironic, on the functional tier's ports (defaults + 10000).

Skipped only when the cloud virtualenv cannot be built for lack of
network access to PyPI; any other failure to build it fails the test.
The first run builds the virtualenv (a few minutes).  Timings and memory
are printed (pytest -s) and kept in <state dir>/measurements.json.
"""

import json
import os
import subprocess
import time

import pytest

from bmc_lab.cloud import backends
from bmc_lab.cloud import layout
from bmc_lab.cloud import ports as cloud_ports
from bmc_lab.cloud import register
from bmc_lab.cloud import services
from bmc_lab.cloud import venv
from bmc_lab import procs
from bmc_lab.tests.functional import cloud_ironic

PORTS = cloud_ports.CloudPorts.shifted(10000)
#: Not the functional lab's Ironic (16385): both may run at once.
IRONIC_PORT = 16395
#: Databases and RabbitMQ virtual host of this run only: a second run at
#: the same time fails on the ports instead of dropping this one's data.
PREFIX = 'bmccloud_ft%d' % os.getpid()
CONTAINER_IMAGE = '127.0.0.1:5050/demo/app:1'
#: What pip logs when it cannot reach the package index.
OFFLINE_MARKERS = ('NewConnectionError', 'Temporary failure in name '
                   'resolution', 'Network is unreachable',
                   'ConnectTimeoutError', 'Failed to establish a new '
                   'connection')
#: The recipe saw the node in Placement 60-75 s after nova-compute.
PLACEMENT_TIMEOUT = 300

MEASURED = {}


@pytest.fixture(scope='module')
def cloud_python():
    started = time.monotonic()
    try:
        python = venv.ensure(out=print)
    except procs.LabError as exc:
        try:
            with open(venv.pip_log()) as f:
                log = f.read()
        except FileNotFoundError:
            log = ''
        if any(marker in log for marker in OFFLINE_MARKERS):
            pytest.skip('the cloud virtualenv cannot be built: PyPI is '
                        'unreachable (%s)' % exc)
        raise
    MEASURED['venv_seconds'] = round(time.monotonic() - started, 1)
    root = os.path.realpath(os.path.dirname(os.path.dirname(python)))
    du = subprocess.run(['du', '-sm', root], capture_output=True, text=True)
    MEASURED['venv_dir'] = root
    MEASURED['venv_mib'] = int(du.stdout.split()[0]) if du.stdout else None
    return python


@pytest.fixture
def state_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('cloud-profile'))
    yield path
    # After a failure too: nothing keeps running, nothing stays on the
    # shared MariaDB and RabbitMQ (logs stay in the directory).
    cloud = layout.Cloud.load(path)
    if cloud is not None:
        cloud_ironic.stop(cloud)
    services.down(path)


def _alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


def _wait(what, check, timeout, interval=2):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError('%s: not within %ds' % (what, timeout))
        time.sleep(interval)


def test_cloud_profile(cloud_python, state_dir, tmp_path):
    ironic_url = 'http://127.0.0.1:%d' % IRONIC_PORT
    assert not procs.port_in_use(IRONIC_PORT)

    t0 = time.monotonic()
    cloud = services.up(state_dir, PORTS, PREFIX, ironic_url,
                        python=cloud_python, out=print)
    MEASURED['up_seconds'] = round(time.monotonic() - t0, 1)
    MEASURED['up_steps'] = dict(cloud.timings)
    assert set(backends.existing_databases(cloud)) == set(cloud.databases)

    # Registration is idempotent: the same objects, found again.
    t0 = time.monotonic()
    again = register.register(cloud)
    MEASURED['register_again_seconds'] = round(time.monotonic() - t0, 1)
    assert again == {k: cloud.ids[k] for k in again}

    admin = register.connect(cloud)
    demo = register.connect(cloud, 'demo', 'demo')

    # A Keystone token works (validated by the admin).
    token = demo.auth_token
    resp = admin.identity.get('/auth/tokens',
                              headers={'X-Subject-Token': token})
    assert resp.status_code == 200, resp.text
    assert resp.json()['token']['project']['name'] == 'demo'

    network = admin.network.get_network(cloud.ids['network'])
    assert network.is_shared
    assert network.provider_network_type == 'flat'
    flavor = admin.compute.get_flavor(cloud.ids['flavor'])
    assert flavor.extra_specs == register.FLAVOR_SPECS
    assert (flavor.ram, flavor.vcpus, flavor.disk) == (2048, 1, 1)

    # The tenant uploads a container image reference to Glance.
    data = tmp_path / 'app.txt'
    data.write_text('bmc cloud profile test\n')
    image = demo.image.create_image(
        'bmccloud-ft-app', filename=str(data), disk_format='raw',
        container_format='bare', container_image=CONTAINER_IMAGE,
        wait=True, timeout=120)

    def active():
        found = demo.image.get_image(image.id)
        return found if found.status == 'active' else None

    image = _wait('image %s active' % image.id, active, 60, interval=1)
    assert image.properties.get('container_image') == CONTAINER_IMAGE
    assert image.size == data.stat().st_size

    # Ironic with one fake node; then nova-compute reports it.
    t0 = time.monotonic()
    cloud_ironic.start(cloud, IRONIC_PORT)
    node = cloud_ironic.enroll_fake_node(cloud, 'bmccloud-ft-node-0')
    MEASURED['ironic_up_and_enroll_seconds'] = round(
        time.monotonic() - t0, 1)
    assert node.provision_state == 'available'
    assert node.power_state == 'power off'

    t0 = time.monotonic()
    services.start_compute(cloud, python=cloud_python)
    MEASURED['nova_compute_ready_seconds'] = round(time.monotonic() - t0, 1)

    def reported():
        inv = register.placement_inventory(admin, node.id)
        return inv if inv and inv.get(register.RESOURCE_CLASS) else None

    inventory = _wait('node %s in Placement with %s (see %s)' % (
        node.id, register.RESOURCE_CLASS, cloud.log('nova-compute.log')),
        reported, PLACEMENT_TIMEOUT)
    MEASURED['node_in_placement_seconds'] = round(time.monotonic() - t0, 1)
    assert inventory == {register.RESOURCE_CLASS: 1}
    # Available and unused: nothing reserved, nothing allocated.
    offer = register.placement_offer(admin, node.id)
    assert offer['free'] == 1, offer

    rss = services.rss(cloud)
    rss['ironic'] = services.session_rss(
        procs.pid_of(cloud, cloud_ironic.NAME))
    MEASURED['rss_mib'] = {k: v // 2 ** 20 for k, v in rss.items()}
    MEASURED['rss_mib_total_cloud'] = sum(
        v for k, v in MEASURED['rss_mib'].items() if k != 'ironic')
    pids = {n: procs.pid_of(cloud, n) for n in services.ORDER}
    # Nova's queues carry its topic names only, whatever its exchange:
    # a second cloud on this broker is refused.
    queues = backends.nova_queues(cloud)
    MEASURED['rabbit_queues'] = {q: backends.consumers(cloud, q)
                                 for q in queues}
    for queue in ('conductor', 'scheduler', 'compute.' + cloud.nova_host):
        assert backends.consumers(cloud, queue), queue
    with pytest.raises(procs.LabError, match='already has consumers of '
                                             'Nova queue'):
        backends.check_free(cloud)

    # Down: every process stopped, databases and virtual host gone.
    t0 = time.monotonic()
    assert cloud_ironic.stop(cloud)
    stopped = services.down(state_dir, out=print)
    MEASURED['down_seconds'] = round(time.monotonic() - t0, 1)
    assert set(stopped) == set(services.ORDER)
    for name, pid in pids.items():
        assert not _alive(pid), '%s (pid %d) still runs' % (name, pid)
    for what, port in PORTS.named().items():
        assert not procs.port_in_use(port), what
    assert backends.existing_databases(cloud) == []
    for queue in queues:
        assert backends.consumers(cloud, queue) is None, queue
    assert services.down(state_dir) == []    # idempotent

    print('cloud profile measurements: %s' % json.dumps(MEASURED, indent=2))
    with open(os.path.join(state_dir, 'measurements.json'), 'w') as f:
        json.dump(MEASURED, f, indent=2)
