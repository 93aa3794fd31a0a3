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

"""Two tenants of the lab cloud: what tenant B cannot reach of tenant A's
run, nor of the operator's (the README's trust model).

Tenant "demo" (A) runs a service from an NFS-exported root on the lab's
node; while it runs, tenant "demo-b" (B), with its own project and
credentials, tries to reach it:

* **the export**: every lab node reaches nfs-ganesha through its QEMU
  guestfwd, so from 127.0.0.1; a process connecting from 127.0.0.2
  stands in for B's node (another address on the provisioning network)
  and asks what a mount asks (bmc_lab.nfs_probe);
* **the APIs**: B's token asks Nova, Glance and Ironic for A's server,
  image and node;
* **the operator's registry secret**: the node's ``driver_info`` holds
  one, for the operator's private registry (an htpasswd registry on
  loopback, in the cloud profile's ``[container]credential_registries``);
  B's Glance image names an image there;
* **operator-only settings through a flavor**: B creates one.
"""

import openstack
import pytest
import requests

from bmc_lab.cloud import personas
from bmc_lab.cloud import profile as cloud_profile
from bmc_lab.cloud import register
from bmc_lab import container_job
from bmc_lab import ironic_conf
from bmc_lab import nfs_probe
from bmc_lab import ociimage
from bmc_lab import procs
from bmc_lab import tenant_job
from bmc_lab.tests.functional import registry_fixture
from bmc_common import protocol
from ironic_bmc import image_properties

B = register.OTHER_TENANT
#: A node that is not among an export's clients (the lab's nodes all
#: reach the server from 127.0.0.1).
OTHER_NODE = '127.0.0.2'
NODE_AS_SEEN = '127.0.0.1'


@pytest.fixture(scope='module')
def lab(lab_pool):
    settings = lab_pool.get('cloud')
    reference = container_job.push_demo_image(settings)
    tenant_job.wait_for_nodes(settings)
    return settings, reference


def _export_block(settings, key):
    with open(ironic_conf.nfs_exports_file(settings)) as f:
        text = f.read()
    for block in text.split('EXPORT {')[1:]:
        if 'cache entry %s' % key in block:
            return block
    return None


def _clients(block):
    line = next(ln for ln in block.splitlines() if 'Clients =' in ln)
    return [c.strip() for c in
            line.split('=', 1)[1].rstrip(';').split(',')]


@pytest.fixture(scope='module')
def a_running(lab):
    """Tenant A's service, its root exported over NFS, looked at by B
    while it runs; then deleted.  (One node boot for the tests below.)"""
    settings, reference = lab
    image = tenant_job.create_image(
        settings, 'e2e-iso-a', reference, container_mode='service',
        container_rootfs=protocol.ROOTFS_NFS,
        container_command=['/bin/sleep', '3600'])
    # The nodes are owned by another project (the owner personas' rows);
    # Nova's deploy makes A the lessee, as Ironic does.
    admin = cloud_profile.admin(settings)
    owner = personas.ensure(settings)
    cloud_nodes = list(admin.baremetal.nodes())
    for n in cloud_nodes:
        admin.baremetal.patch_node(n, [{'op': 'add', 'path': '/owner',
                                        'value': owner}])
    try:
        return _a_running(settings, image)
    finally:
        tenant_job.wait_available(settings, [n.id for n in cloud_nodes])
        for n in cloud_nodes:
            admin.baremetal.patch_node(n, [{'op': 'remove',
                                            'path': '/owner'}])


def _a_running(settings, image):
    server = tenant_job.boot(settings, 'e2e-iso-a', image.id)
    node = tenant_job.node_of(settings, server.id)
    report = container_job.wait_report(settings, name=node.name,
                                       states=('running',))
    key = report['artifact']['cache_key']
    export = report['staging']['nfs_export'].split(':', 1)[1]
    port = settings.ports.nfs
    seen = {
        'export': export,
        'block': _export_block(settings, key),
        'agent_url': node.driver_internal_info.get('agent_url') or (
            node.driver_internal_info.get('bmc_agent') or {}).get(
                'agent_url'),
        # What the node itself sees (its mount's questions) ...
        'node_lookup': nfs_probe.lookup(NODE_AS_SEEN, port, export,
                                        source=NODE_AS_SEEN),
        'node_listing': nfs_probe.readdir(NODE_AS_SEEN, port, '/bmc',
                                          source=NODE_AS_SEEN),
        # ... and another node.
        'other_lookup': nfs_probe.lookup(NODE_AS_SEEN, port, export,
                                         source=OTHER_NODE),
        'other_listing': nfs_probe.readdir(NODE_AS_SEEN, port, '/bmc',
                                           source=OTHER_NODE),
    }
    b = cloud_profile.tenant(settings, B)
    a = cloud_profile.tenant(settings)

    def outcome(call, *args):
        try:
            found = call(*args)
        except openstack.exceptions.SDKException as exc:
            return type(exc).__name__
        return 'found' if found else 'none'

    seen.update(
        a_node=outcome(a.baremetal.get_node, node.id),
        b_node=outcome(b.baremetal.get_node, node.id),
        b_nodes=[n.id for n in b.baremetal.nodes()],
        b_server=outcome(b.compute.get_server, server.id),
        b_image=outcome(b.image.get_image, image.id),
        b_report=outcome(b.baremetal.call_node_vendor_passthru, node.id,
                         'GET', 'run_report'),
    )
    # The container runs API: A reads its run, B finds nothing there.
    base = '/v1/runs/%s' % report['deploy_id']
    a_api = tenant_job.runs_api(settings)
    b_api = tenant_job.runs_api(settings, B)
    seen.update(
        a_run=a_api.get(base, raise_exc=False).status_code,
        a_runs=[r['deploy_id'] for r in a_api.get(
            '/v1/runs', raise_exc=False).json()['runs']],
        b_runs=b_api.get('/v1/runs', raise_exc=False).json()['runs'],
        b_run={suffix: b_api.get(base + suffix, raise_exc=False).status_code
               for suffix in ('', '/output', '/results')},
        deploy_id=report['deploy_id'],
    )
    try:
        seen['personas'] = _personas(settings, report['deploy_id'])
    finally:
        tenant_job.delete(settings, server.id)
    seen['block_after'] = _export_block(settings, key)
    return seen


def _personas(settings, deploy_id):
    """What each persona's real Keystone token gets of A's run:
    ``{persona: (listed, report status, operator fields shown, output
    status, results status)}``; listed is the list's status when it is
    not 200."""
    base = '/v1/runs/%s' % deploy_id
    got = {}
    for persona in ['system admin'] + list(personas.PERSONAS):
        api = personas.runs_api(settings, persona)
        listing = api.get('/v1/runs', raise_exc=False)
        shown = api.get(base, raise_exc=False)
        got[persona] = (
            (deploy_id in [r['deploy_id'] for r in listing.json()['runs']])
            if listing.status_code == 200 else listing.status_code,
            shown.status_code,
            shown.status_code == 200 and 'kernel' in shown.json(),
            api.get(base + '/output', raise_exc=False).status_code,
            api.get(base + '/results', raise_exc=False).status_code)
    url = personas.anonymous(settings)
    got['anonymous'] = tuple(
        requests.get(url + path, timeout=30).status_code
        for path in ('/v1/runs', base, base + '/output', base + '/results'))
    return got


def test_other_nodes_cannot_mount_or_list_the_export(a_running):
    seen = a_running
    print(seen['block'])
    assert seen['block'] is not None
    # Read-only, root squashed, for the deploying node's address only.
    assert 'Access_Type = RO;' in seen['block']
    assert 'Squash = Root_Squash;' in seen['block']
    clients = _clients(seen['block'])
    assert '*' not in clients
    assert clients == [NODE_AS_SEEN], (clients, seen['agent_url'])
    # The node mounts it ...
    assert seen['node_lookup'] == 'NFS4_OK'
    assert seen['node_listing'] == ('NFS4_OK', [seen['export'].split('/')[-1]])
    # ... another node finds nothing there, and lists nothing: ganesha
    # hides the exports a client may not mount (the cache keys too).
    assert seen['other_lookup'] == 'NFS4ERR_NOENT'
    assert seen['other_listing'] == ('NFS4_OK', [])
    # Withdrawn with the deploy.
    assert seen['block_after'] is None


def test_other_tenant_sees_nothing_of_the_run(a_running):
    seen = a_running
    # A, the node's lessee while its server lives, reads the node ...
    assert seen['a_node'] == 'found'
    # ... B reads neither it, nor A's server, image or run report.
    assert seen['b_node'] == 'NotFoundException'
    assert seen['b_nodes'] == []
    assert seen['b_server'] == 'NotFoundException'
    assert seen['b_image'] == 'NotFoundException'
    assert seen['b_report'] in ('ForbiddenException', 'NotFoundException')
    # Its run, through the container runs API: A's, not B's (404, as a
    # run that does not exist).
    assert seen['a_run'] == 200
    assert seen['deploy_id'] in seen['a_runs']
    assert seen['b_runs'] == []
    assert seen['b_run'] == {'': 404, '/output': 404, '/results': 404}


#: The trust model's table (doc/source/admin/trust-model.rst), for a run
#: of the lessee A ("demo", the Nova server's project) on a node another
#: project owns: listed, report, operator fields, output, results.
PERSONA_TABLE = {
    'system admin': (True, 200, True, 200, 200),
    'system reader': (True, 200, True, 200, 200),
    'owner member': (True, 200, False, 403, 403),
    'lessee admin': (True, 200, False, 200, 200),
    'lessee reader': (True, 200, False, 200, 200),
    'other project member': (False, 404, False, 404, 404),
    'domain-scoped reader': (403, 404, False, 404, 404),
    'anonymous': (401, 401, 401, 401),
}


def test_each_persona_gets_what_the_trust_model_says(a_running):
    got = a_running['personas']
    for persona, cells in got.items():
        print('%-22s %s' % (persona, cells))
    for persona, expected in PERSONA_TABLE.items():
        assert got[persona] == expected, persona


@pytest.fixture
def operator_secret(lab):
    """The operator's private registry (htpasswd) holding an image, and
    its pull secret in every lab node's driver_info; removed after."""
    settings, _ref = lab
    admin = cloud_profile.admin(settings)
    nodes = list(admin.baremetal.nodes())
    with registry_fixture.DockerRegistry(user='operator',
                                         password='s3cret') as reg:
        image = ociimage.build_image(
            [[ociimage.Entry('app', data=b'#!/bin/sh\necho private\n',
                             mode=0o755)]], cmd=['/app'])
        ociimage.Pusher(reg.address, auth=('operator', 's3cret')).push_image(
            'private/app', '1', image)
        for n in nodes:
            admin.baremetal.patch_node(n, [{
                'op': 'add', 'path': '/driver_info/image_pull_secret',
                'value': 'operator:s3cret'}])
        try:
            yield reg.address + '/private/app:1'
        finally:
            for n in nodes:
                admin.baremetal.patch_node(n, [{
                    'op': 'remove',
                    'path': '/driver_info/image_pull_secret'}])


def test_other_tenant_cannot_use_the_operators_registry_secret(
        lab, operator_secret):
    """B names an image of the operator's private registry: the conductor
    pulls it anonymously (the secret goes to that registry for the
    operator's own deploys only), the registry refuses, B's server goes
    to ERROR saying why, and the node is left as it was."""
    settings, _ref = lab
    image = tenant_job.create_image(settings, 'e2e-iso-b-private',
                                    operator_secret, tenant=B,
                                    container_mode='job')
    with pytest.raises(procs.LabError) as err:
        tenant_job.boot(settings, 'e2e-iso-b', image.id, timeout=600,
                        tenant=B)
    message = str(err.value)
    print(message)
    # Nova keeps 255 characters of the fault: the start of the error ...
    assert ('refused access to %s' % operator_secret) in message, message
    conn = cloud_profile.tenant(settings, B)
    server = conn.compute.find_server('e2e-iso-b', ignore_missing=False)
    # ... the node's history (the operator's) all of it.
    admin = cloud_profile.admin(settings)
    # (On whichever node Nova chose: the server is gone from it.)
    history = [h for node in admin.baremetal.nodes()
               for h in admin.baremetal.get(
                   '/nodes/%s/history?detail=True' % node.id,
                   microversion='1.78').json()['history']]
    history.sort(key=lambda h: h['created_at'])
    events = [h['event'] for h in history if operator_secret in h['event']]
    print('\n'.join(events))
    assert events, history
    assert 'requires credentials' in events[-1]
    assert ('image_pull_secret, which is not sent for an image a Glance '
            'image property names unless its registry is in '
            '[container]tenant_credential_registries') in events[-1]
    assert not any('s3cret' in e for e in events)
    conn.compute.delete_server(server)
    conn.compute.wait_for_delete(server, wait=300)
    for n in tenant_job.wait_available(settings, timeout=300):
        assert n.power_state == 'power off'
        assert image_properties.SNAPSHOT_KEY not in n.driver_internal_info


def test_other_tenant_cannot_make_a_flavor(lab):
    """Flavors (and so the traits that select deploy templates and their
    tunables) are the operator's: a tenant cannot create one."""
    settings, _ref = lab
    b = cloud_profile.tenant(settings, B)
    with pytest.raises(openstack.exceptions.ForbiddenException):
        b.compute.create_flavor(name='e2e-iso-b-flavor', ram=1, vcpus=1,
                                disk=0)
