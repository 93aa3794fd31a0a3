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

"""The lab's services, for real, without booting nodes.

Real Ironic (both profiles), nginx, docker-registry and libvirtd
are started and stopped; these tests check what an operator relies on:
idempotent up/down, clear errors, no process left behind.
"""

import os
import socket
import time

import pytest

from bmc_lab import client as lab_client
from bmc_lab import content_servers
from bmc_lab import control
from bmc_lab import host_libvirt
from bmc_lab import nodes
from bmc_lab import procs
from bmc_lab import services
from bmc_lab import settings as lab_settings
from bmc_lab.tests import labfixture


def _pids(settings):
    pids = {}
    run_dir = settings.path('run')
    for name in os.listdir(run_dir) if os.path.isdir(run_dir) else ():
        if name.endswith('.pid') and '.' not in name[:-4]:
            pid = procs.pid_of(settings, name[:-4])
            if pid:
                pids[name[:-4]] = pid
    return pids


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open('/proc/%d/stat' % pid) as f:
        return f.read().rsplit(')', 1)[1].split()[0] != 'Z'


@pytest.fixture
def lab():
    settings = labfixture.lab_settings_for('functional', nodes=0)
    yield settings
    control.down(settings, out=None)


def test_up_is_idempotent_and_down_leaves_nothing(lab):
    assert control.up(lab, out=None) is True
    cli = lab_client.get_client(lab)
    assert 'ipmi' in {d.name for d in cli.driver.list()}
    pids = _pids(lab)
    assert {'nginx', 'registry', 'ironic'} <= set(pids)

    messages = []
    assert control.up(lab, out=messages.append) is False
    assert 'already up' in messages[0]
    assert _pids(lab) == pids  # nothing restarted

    assert control.down(lab, out=None) is True
    assert not [n for n, pid in pids.items() if _alive(pid)]
    for port in (lab.ports.ironic_api, lab.ports.http, lab.ports.registry):
        assert not procs.port_in_use(port)
    # Logs are kept for debugging.
    assert os.path.exists(lab.log('ironic.log'))

    messages = []
    assert control.down(lab, out=messages.append) is False
    assert 'nothing to tear down' in messages[0]


def test_port_taken_is_named(lab):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(('127.0.0.1', lab.ports.http))
        s.listen(1)
        with pytest.raises(procs.LabError) as exc:
            control.up(lab, out=None)
    msg = str(exc.value)
    assert 'port %d' % lab.ports.http in msg
    assert 'nginx' in msg
    assert not control.is_up(lab)


def test_service_failure_names_its_log(lab, monkeypatch):
    # A configuration the registry refuses: it exits at once.
    lab.save()
    monkeypatch.setattr(content_servers, 'REGISTRY_CONF',
                        'version: 0.1\nstorage: {{bogus: {root}}}\n'
                        '# {port}\n')
    try:
        with pytest.raises(procs.LabError) as exc:
            content_servers.start_registry(lab)
    finally:
        services.stop_all(lab)
    assert lab.log('registry.log') in str(exc.value)


def test_scaled_profile_runs_api_and_conductor_over_rabbitmq():
    settings = labfixture.lab_settings_for(
        'functional', profile=lab_settings.PROFILE_SCALED, nodes=0)
    try:
        control.up(settings, out=None)
        pids = _pids(settings)
        assert {'ironic-api', 'ironic-conductor'} <= set(pids)
        assert 'ironic' not in pids
        # The API can only list the driver once the conductor registered
        # through the database, and a node create goes over RPC.
        cli = lab_client.get_client(settings)
        node = cli.node.create(driver='fake-hardware', name='rpc-check')
        cli.node.set_power_state(node.uuid, 'on')
        deadline = time.monotonic() + 60
        while (cli.node.get(node.uuid).power_state != 'power on'
               and time.monotonic() < deadline):
            time.sleep(0.5)
        assert cli.node.get(node.uuid).power_state == 'power on'
        with open(settings.path('etc', 'ironic.conf')) as f:
            conf = f.read()
        assert 'mysql+pymysql://' in conf
        assert 'rabbit://' in conf
    finally:
        control.down(settings, out=None, purge=True)


def test_two_labs_side_by_side_do_not_see_each_other():
    """Two workers' labs on one host (the e2e tier runs two): each has its
    own Ironic, node, BMC, domain, ports and state; one going down leaves
    the other whole, libvirtd included.  (The spare workers' labs: this
    tier's workers run labs of their own meanwhile.)"""
    labs = [labfixture.lab_settings_for('functional', nodes=1, worker=w)
            for w in labfixture.SPARE_WORKERS]
    first, second = labs
    assert first.state_dir != second.state_dir
    assert not (set(first.ports.named(1).values())
                & set(second.ports.named(1).values()))
    try:
        for settings in labs:
            assert control.up(settings, out=None) is True
        # (None when libvirtd ran before, e.g. from the host's packages.)
        libvirtd = procs.pid_of(host_libvirt.host_settings(), 'libvirtd')
        for settings, other in ((first, second), (second, first)):
            cli = lab_client.get_client(settings)
            assert [n.name for n in cli.node.list()] == [
                settings.node_name(0)]
            node = cli.node.get(settings.node_name(0))
            assert node.driver_info['ipmi_port'] == settings.ports.ipmi(0)
            assert nodes.defined_lab_domains(settings) == [
                settings.node_name(0)]
            # Each BMC answers for its own domain.
            assert nodes.bmc_power_state(settings, 0) == 'off'
            assert procs.pid_of(settings, 'ironic') != procs.pid_of(
                other, 'ironic')

        # One lab down: the other keeps its processes, its node and the
        # host's libvirtd.
        pids = _pids(second)
        assert control.down(first, out=None) is True
        assert control.is_up(second)
        assert _pids(second) == pids
        assert host_libvirt.libvirt_reachable()
        assert nodes.defined_lab_domains(first) == []
        assert nodes.defined_lab_domains(second) == [second.node_name(0)]
        assert nodes.bmc_power_state(second, 0) == 'off'
        cli = lab_client.get_client(second)
        assert cli.node.get(second.node_name(0)).provision_state == (
            'available')
    finally:
        for settings in labs:
            control.down(settings, out=None)
    # The last lab down stopped the libvirtd the labs shared (unless a
    # lab of someone else's still has a node on this host).
    listed = nodes.virsh('list', '--all', '--name', check=False)
    others = listed.stdout.split() if listed.returncode == 0 else []
    if libvirtd is not None and not others:
        assert not _alive(libvirtd)
