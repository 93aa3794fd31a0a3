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

"""Register the cloud's users, services, endpoints, network and flavor.

One openstacksdk connection in one process: ~20 ``openstack`` CLI calls
took 77 s, mostly interpreter start-ups.  Everything is looked up before
it is created, so registering again changes nothing and returns the same
ids.
"""

import openstack

from bmc_lab.cloud import layout

SERVICES = {
    # type: name
    'identity': 'keystone',
    'image': 'glance',
    'placement': 'placement',
    'compute': 'nova',
    'network': 'neutron',
    'baremetal': 'ironic',
    'baremetal-container': 'ironic-bmc',
}
DEMO = 'demo'
#: A second tenant (project and user of that name), for the isolation
#: tests: what one tenant may not reach of the other's.
OTHER_TENANT = 'demo-b'
NETWORK = 'baremetal-net'
SUBNET = 'baremetal-subnet'
#: TEST-NET-1: Neutron only records it, nothing is wired.
SUBNET_CIDR = '192.0.2.0/24'
PHYSNET = 'physnet1'
FLAVOR = 'bm.container'
#: Ironic resource class "baremetal-container" as Placement names it.
RESOURCE_CLASS = 'CUSTOM_BAREMETAL_CONTAINER'
FLAVOR_SPECS = {
    'resources:%s' % RESOURCE_CLASS: '1',
    'resources:VCPU': '0',
    'resources:MEMORY_MB': '0',
    'resources:DISK_GB': '0',
}


def connect(cloud, username='admin', project='admin', **kwargs):
    """An openstacksdk connection to ``cloud`` (no clouds.yaml, no OS_*
    environment variables: only what is given here)."""
    return openstack.connection.Connection(
        auth_type='password', auth=cloud.auth(username, project),
        region_name=layout.REGION, interface='public', **kwargs)


def connect_system(cloud):
    """A connection of the admin with a system-scoped token: Ironic's
    operator API (drivers, node creation, deploy templates) asks for
    system scope, Placement refuses it."""
    return openstack.connection.Connection(
        auth_type='password', auth=cloud.system_auth(),
        region_name=layout.REGION, interface='public')


def register(cloud):
    """Register everything; return {what: id}."""
    ids = identity(cloud)
    ids.update(resources(cloud))
    return ids


def identity(cloud):
    """Projects, users, roles, services and endpoints: what the other
    services need before they start (nova-conductor and -scheduler exit
    at once if their Placement credentials do not work).  Keystone only.
    """
    return _identity(cloud, connect(cloud))


def resources(cloud):
    """The network, subnet and flavor: needs Neutron and nova-api."""
    # A new token: its catalog has the endpoints registered by identity().
    conn = connect(cloud)
    ids = _network(conn)
    ids['flavor'] = _flavor(conn)
    return ids


def _find(find, name, **query):
    """``find(name)``, None if missing (not through ignore_missing=True:
    deprecated, its default changes in openstacksdk 6)."""
    try:
        return find(name, ignore_missing=False, **query)
    except openstack.exceptions.NotFoundException:
        return None


def _project(idn, name, description):
    return (_find(idn.find_project, name, domain_id='default')
            or idn.create_project(name=name, domain_id='default',
                                  description=description))


def _user(idn, name, password, project=None):
    """User ``name``, made if missing (with ``project`` as its default
    project, if given: a system- or domain-scoped user has none)."""
    user = _find(idn.find_user, name, domain_id='default')
    if user is None:
        extra = {'default_project_id': project.id} if project else {}
        user = idn.create_user(name=name, password=password,
                               domain_id='default', **extra)
    return user


def _identity(cloud, conn):
    idn = conn.identity
    roles = {name: idn.find_role(name, ignore_missing=False)
             for name in ('admin', 'service', 'member')}
    service = _project(idn, 'service', 'Service users of the lab cloud')
    ids = {'service_project': service.id}
    for name in layout.SERVICE_USERS:
        user = _user(idn, name, cloud.password, service)
        for role in ('admin', 'service'):
            idn.assign_project_role_to_user(service, user, roles[role])
        ids['user_' + name] = user.id
    for stype, url in cloud.endpoints.items():
        ids['service_' + stype] = _endpoint(idn, stype, url)
    for name, what in ((DEMO, 'The lab cloud tenant'),
                       (OTHER_TENANT, 'A second tenant of the lab cloud')):
        project = _project(idn, name, what)
        user = _user(idn, name, cloud.password, project)
        idn.assign_project_role_to_user(project, user, roles['member'])
        key = name.replace('-', '_')
        ids.update({key + '_project': project.id, 'user_' + key: user.id})
    return ids


def _endpoint(idn, stype, url):
    """The service of type ``stype`` with a public endpoint at ``url``."""
    service = next(iter(idn.services(type=stype)), None)
    if service is None:
        service = idn.create_service(name=SERVICES[stype], type=stype,
                                     is_enabled=True)
    endpoint = next(iter(idn.endpoints(service_id=service.id,
                                       interface='public')), None)
    if endpoint is None:
        idn.create_endpoint(service_id=service.id, interface='public',
                            url=url, region_id=layout.REGION)
    elif endpoint.url != url:
        idn.update_endpoint(endpoint, url=url)
    return service.id


def _network(conn):
    net = _find(conn.network.find_network, NETWORK)
    if net is None:
        net = conn.network.create_network(
            name=NETWORK, is_shared=True,
            provider_network_type='flat',
            provider_physical_network=PHYSNET)
    subnet = _find(conn.network.find_subnet, SUBNET, network_id=net.id)
    if subnet is None:
        # No DHCP server runs on it: addresses are recorded only.
        subnet = conn.network.create_subnet(
            name=SUBNET, network_id=net.id, ip_version=4,
            cidr=SUBNET_CIDR, is_dhcp_enabled=False)
    return {'network': net.id, 'subnet': subnet.id}


def _flavor(conn, name=FLAVOR, specs=None):
    flavor = _find(conn.compute.find_flavor, name)
    if flavor is None:
        # Tenants may not boot flavors with disk 0 (volume-backed only).
        flavor = conn.compute.create_flavor(
            name=name, ram=2048, vcpus=1, disk=1, is_public=True)
    conn.compute.create_flavor_extra_specs(flavor, specs or FLAVOR_SPECS)
    return flavor.id


def tunables_flavor(conn, profile, trait):
    """Flavor ``bm.container.<profile>``: a node with ``trait``, whose
    deploy template of the same name applies the tunables profile."""
    specs = dict(FLAVOR_SPECS)
    specs['trait:%s' % trait] = 'required'
    return _flavor(conn, '%s.%s' % (FLAVOR, profile), specs)


def _inventories(conn, node_id):
    """{resource class: inventory} of an Ironic node's resource provider,
    or None while Placement has none (``conn``: project scope)."""
    try:
        rp = conn.placement.get_resource_provider(node_id)
    except openstack.exceptions.NotFoundException:
        return None
    return {inv.resource_class: inv
            for inv in conn.placement.resource_provider_inventories(rp)}


def placement_inventory(conn, node_id):
    """Inventory of an Ironic node's resource provider: {class: total},
    or None while Placement has none."""
    inventory = _inventories(conn, node_id)
    if inventory is None:
        return None
    return {rc: inv.total for rc, inv in inventory.items()}


def placement_offer(conn, node_id):
    """What Placement would give a new server of an Ironic node now.

    None while the node has no resource provider; else ``{'free': n,
    'traits': set}`` where ``free`` counts RESOURCE_CLASS units neither
    reserved nor allocated.  Nova's ironic driver reserves a node's whole
    inventory while it is not ``available`` and lifts that only at its
    next resource update (every minute), so a node that Ironic already
    shows ``available`` after a delete may not be schedulable yet; the
    scheduler says NoValidHost in that window.
    """
    inventory = _inventories(conn, node_id)
    if inventory is None:
        return None
    inv = inventory.get(RESOURCE_CLASS)
    if inv is None:
        return {'free': 0, 'traits': set()}
    base = '/resource_providers/%s' % node_id
    usages = conn.placement.get(base + '/usages').json()['usages']
    traits = conn.placement.get(base + '/traits',
                                microversion='1.6').json()['traits']
    free = inv.total - (inv.reserved or 0) - usages.get(RESOURCE_CLASS, 0)
    return {'free': max(free, 0), 'traits': set(traits)}
