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

"""The tenant path: a container run through Glance and Nova.

As a tenant would, with the tenant's own credentials: a Glance image
whose properties name the container (a tiny file: Glance keeps an image
without data ``queued`` and Nova refuses it), then ``server create``
with a bare-metal flavor on the shared network.  Nova's ironic driver
deploys an Ironic node; the container deploy interface reads the keys
from the image.  The operator side (the node behind the server and its
run report) is read with the admin's credentials.
"""

import json
import tempfile
import time

from keystoneauth1 import adapter
import openstack

from bmc_lab.cloud import profile as cloud_profile
from bmc_lab.cloud import register
from bmc_lab import procs

#: Nova's ironic driver reports a node to Placement about a minute after
#: nova-compute starts (the recipe saw 60-75 s).
PLACEMENT_TIMEOUT = 300


def create_image(settings, name, container_image, disk_format='raw',
                 tenant=register.DEMO, **properties):
    """A Glance image of the tenant that runs ``container_image``.

    ``properties``: further container keys (container_mode, ...); dicts
    and lists are stored as JSON, as Glance keeps strings; None leaves a
    key out (``container_image=None``: an image that names no container).
    ``disk_format``: ``aki``/``ari`` for a kernel or ramdisk image (its
    container format is the same, as Glance wants).
    ``tenant``: whose image (a user and project of that name).
    """
    conn = cloud_profile.tenant(settings, tenant)
    props = dict(properties, container_image=container_image)
    props = {key: (json.dumps(value) if isinstance(value, (dict, list))
                   else str(value))
             for key, value in props.items() if value is not None}
    with tempfile.NamedTemporaryFile(suffix='.txt') as f:
        f.write(b'container image reference; the data is not used\n')
        f.flush()
        image = conn.image.create_image(
            name, filename=f.name, disk_format=disk_format,
            container_format=(disk_format if disk_format in ('aki', 'ari')
                              else 'bare'), wait=True, timeout=120,
            # Always a new image: a tenant may reuse a name, and the SDK
            # would otherwise hand back an older image of that name.
            allow_duplicates=True, **props)
    return conn.image.get_image(image.id)


#: The container runs API's service type in the catalog.
RUNS_SERVICE = 'baremetal-container'


def runs_api(settings, tenant=register.DEMO):
    """A keystoneauth adapter on the container runs API with the token of
    user and project ``tenant``: ``runs_api(s).get('/v1/runs',
    raise_exc=False)``."""
    conn = cloud_profile.tenant(settings, tenant)
    return adapter.Adapter(conn.session, service_type=RUNS_SERVICE,
                           interface='public')


def keypair(settings, name, tenant=register.DEMO):
    """A Nova keypair of the tenant with a new ed25519 public key (made
    again if one of that name exists); returns its public key line."""
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives import serialization

    public = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH,
        serialization.PublicFormat.OpenSSH).decode() + ' ' + name
    conn = cloud_profile.tenant(settings, tenant)
    old = conn.compute.find_keypair(name)
    if old is not None:
        conn.compute.delete_keypair(old)
    conn.compute.create_keypair(name=name, public_key=public)
    return public


def lab_traits():
    """The traits the cloud profile puts on every lab node (one per
    tunables profile with a deploy template)."""
    from ironic_bmc import deploy_templates
    return {deploy_templates.template_name(p)
            for p in cloud_profile.TUNABLES_PROFILES}


def wait_for_nodes(settings, count=1, node_ids=None, traits=None,
                   timeout=PLACEMENT_TIMEOUT, out=print):
    """Wait until Placement can give a new server ``count`` lab nodes:
    resource class inventory neither reserved nor allocated, and the
    ``traits`` (default: lab_traits()) that the flavors require.  Nova
    schedules nothing before (NoValidHost)."""
    conn = cloud_profile.project_admin(settings)
    if node_ids is None:
        node_ids = [n.id for n in
                    cloud_profile.admin(settings).baremetal.nodes()][:count]
    traits = lab_traits() if traits is None else set(traits)
    deadline = time.monotonic() + timeout
    t0 = time.monotonic()
    while True:
        offers = {i: register.placement_offer(conn, i) for i in node_ids}
        ready = [i for i, o in offers.items()
                 if o and o['free'] >= 1 and traits <= o['traits']]
        if len(ready) >= count:
            out('%d node(s) schedulable in Placement after %.0fs'
                % (len(ready), time.monotonic() - t0))
            return ready
        if time.monotonic() > deadline:
            raise procs.LabError(
                'Placement offers %d of %d node(s) with %s and traits %s '
                'after %ds (%s); see %s' % (
                    len(ready), count, register.RESOURCE_CLASS,
                    ', '.join(sorted(traits)) or '-', timeout,
                    '; '.join('%s: %s' % kv for kv in offers.items()),
                    settings.log('nova-compute.log')))
        time.sleep(3)


def boot(settings, name, image_id, flavor=register.FLAVOR, timeout=900,
         out=print, tenant=register.DEMO, **extra):
    """``openstack server create`` as the tenant; wait until it is built.

    ``extra``: more of the server's fields (``key_name``, ``user_data``
    base64-encoded, ``config_drive``).

    Built is ACTIVE, or SHUTOFF: a short job may end, and its node power
    off, in the second the deploy finishes, so that ACTIVE is never seen
    between two polls (a server reaches SHUTOFF only from ACTIVE).
    Returns the server.  A server that goes to ERROR raises LabError
    with Nova's fault message.
    """
    conn = cloud_profile.tenant(settings, tenant)
    flavor_obj = conn.compute.find_flavor(flavor, ignore_missing=False)
    network = conn.network.find_network(register.NETWORK,
                                        ignore_missing=False)
    out('Tenant %s: server create %s (image %s, flavor %s, network %s) ...'
        % (tenant, name, image_id, flavor, register.NETWORK))
    server = conn.compute.create_server(
        name=name, image_id=image_id, flavor_id=flavor_obj.id,
        networks=[{'uuid': network.id}], **extra)
    return wait_server(settings, server.id, ('ACTIVE', 'SHUTOFF'), timeout,
                       tenant=tenant)


def wait_server(settings, server_id, status, timeout=900,
                tenant=register.DEMO):
    """Wait until the server's status is ``status`` (or one of them)."""
    wanted = (status,) if isinstance(status, str) else tuple(status)
    conn = cloud_profile.tenant(settings, tenant)
    deadline = time.monotonic() + timeout
    server = None
    while time.monotonic() < deadline:
        server = conn.compute.get_server(server_id)
        if server.status in wanted:
            return server
        if server.status == 'ERROR':
            raise procs.LabError('server %s went to ERROR: %s' % (
                server_id, (server.fault or {}).get('message')))
        time.sleep(3)
    raise procs.LabError('server %s is %s, not %s, after %ds' % (
        server_id, server.status if server else None, '/'.join(wanted),
        timeout))


def server_status(settings, server_id):
    """(status, power state) as the tenant sees them; None if gone."""
    conn = cloud_profile.tenant(settings)
    try:
        server = conn.compute.get_server(server_id)
    except openstack.exceptions.NotFoundException:
        return None
    return server.status, server.power_state


def node_of(settings, server_id):
    """The lab node (Ironic node object) that runs ``server_id``."""
    conn = cloud_profile.admin(settings)
    found = list(conn.baremetal.nodes(instance_id=server_id))
    if not found:
        raise procs.LabError('no Ironic node runs server %s' % server_id)
    return conn.baremetal.get_node(found[0].id)


def delete(settings, server_id, timeout=600):
    """Delete the server as the tenant; wait until it is gone and its
    node is ``available`` again."""
    conn = cloud_profile.tenant(settings)
    node = node_of(settings, server_id)
    server = conn.compute.get_server(server_id)
    conn.compute.delete_server(server)
    conn.compute.wait_for_delete(server, wait=timeout)
    return wait_available(settings, [node.id], timeout)[0]


def wait_available(settings, node_ids=None, timeout=600):
    """Wait until the nodes (default: all) are ``available``, run no
    instance and are schedulable again in Placement, as after a server
    is deleted; return them."""
    admin = cloud_profile.admin(settings)
    deadline = time.monotonic() + timeout
    while True:
        nodes = [admin.baremetal.get_node(i) for i in node_ids] \
            if node_ids else list(admin.baremetal.nodes(details=True))
        busy = [n for n in nodes if n.provision_state != 'available'
                or n.instance_id]
        if not busy:
            break
        if time.monotonic() > deadline:
            raise procs.LabError('after %ds, not available: %s' % (
                timeout, ', '.join('%s (%s)' % (n.name, n.provision_state)
                                   for n in busy)))
        time.sleep(3)
    # Ironic is done; Nova lifts the nodes' reservation in Placement at
    # its next resource update.
    wait_for_nodes(settings, count=len(nodes),
                   node_ids=[n.id for n in nodes],
                   timeout=max(deadline - time.monotonic(), 120),
                   out=lambda *a: None)
    return nodes


def demo(settings, tunables=None, out=print):
    """``bmc-lab demo --tenant``: lab up (cloud profile), the demo image
    in Glance, a server of the tenant, its run report; the server is
    deleted at the end.  Returns the exit code (the workload's)."""
    # Imported here: the embedded profile's demo needs none of it.
    from bmc_lab import agent
    from bmc_lab import container_job
    from bmc_lab import control
    from bmc_lab import settings as lab_settings

    control.up(settings, out=out)
    settings = lab_settings.Settings.load(settings.state_dir)
    agent.ensure(settings, out=out)
    reference = container_job.push_demo_image(settings)
    flavor, props = register.FLAVOR, {'container_mode': 'job'}
    if tunables and tunables in cloud_profile.TUNABLES_PROFILES:
        flavor = '%s.%s' % (register.FLAVOR, tunables)
    elif tunables:
        props['container_tunables'] = tunables
    t0 = time.monotonic()
    image = create_image(settings, 'bmc-demo', reference, **props)
    out('Glance image %s (%s) runs %s' % (image.name, image.id, reference))
    wait_for_nodes(settings, out=out)
    server = boot(settings, 'bmc-demo-%d' % int(time.time()), image.id,
                  flavor=flavor, out=out)
    spawn_s = round(time.monotonic() - t0, 1)
    node = node_of(settings, server.id)
    out('Server %s is %s on node %s after %.0fs; waiting for the job'
        % (server.id, server.status, node.name, spawn_s))
    report = container_job.wait_report(settings, name=node.name)
    final = wait_server(settings, server.id, 'SHUTOFF', timeout=300)
    out('')
    out(container_job.format_report(report))
    out('')
    delete(settings, server.id)
    out('Server %s deleted; node %s is available again.'
        % (server.id, node.name))
    report = dict(report, via='nova', server={
        'id': server.id, 'status': final.status, 'flavor': flavor,
        'create_to_active_s': spawn_s})
    out(json.dumps(report, sort_keys=True))
    return 0 if report.get('workload_exit_code') == 0 else 1
