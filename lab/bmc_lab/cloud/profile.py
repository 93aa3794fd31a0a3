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

"""The lab's ``cloud`` profile: its Ironic behind a real cloud.

The lab's embedded Ironic authenticates with the cloud's Keystone, reads
Glance image properties, and is the compute driver of the cloud's Nova;
its nodes carry resource class ``baremetal-container`` and the traits of
the tunables deploy templates.  The cloud shares the lab's state
directory (see bmc_lab.cloud.layout) and is started before Ironic
(Ironic checks tokens with Keystone) and its nova-compute after (it
lists Ironic's nodes).
"""

import io
import os

import yaml

from bmc_lab.cloud import configs
from bmc_lab.cloud import horizon
from bmc_lab.cloud import layout
from bmc_lab.cloud import register
from bmc_lab.cloud import services
from bmc_lab import procs

#: Ironic's resource class of the lab's nodes; Placement calls it
#: register.RESOURCE_CLASS.
RESOURCE_CLASS = 'baremetal-container'
#: Tunables profiles that get a deploy template, a node trait and a
#: flavor (register.tunables_flavor).
TUNABLES_PROFILES = ('thp-never',)
CLOUDS_YAML = 'clouds.yaml'


def cloud_of(settings):
    """The layout.Cloud of a cloud-profile lab (not started)."""
    return layout.Cloud(state_dir=settings.state_dir,
                        prefix=settings.cloud_prefix,
                        ports=settings.cloud_ports,
                        ironic_api_url=settings.api_url,
                        runs_api_url=settings.runs_api_url)


def ironic_sections(settings):
    """What the lab's ironic.conf gains in the cloud profile."""
    cloud = cloud_of(settings)
    catalog = configs.password_auth(cloud, 'ironic')
    # What the agents use to reach the API: the host as nodes see it.
    catalog['endpoint_override'] = settings.guest_api_url
    return {
        'DEFAULT': {
            'auth_strategy': 'keystone',
            # Nova's "ironic" user (roles admin and service in project
            # service) must see every node, not only its project's.
            'rbac_service_role_elevated_access': 'true',
        },
        'keystone_authtoken': configs.authtoken(cloud, 'ironic'),
        'service_catalog': catalog,
        # Image properties of the tenant's container image.
        'glance': configs.password_auth(cloud, 'ironic'),
        # Power state changes reach Nova at once (a finished job's
        # server turns SHUTOFF without waiting for Nova's sync).
        'nova': dict(configs.password_auth(cloud, 'ironic'),
                     send_power_notifications='true'),
        # The operator's private registries: every loopback port, so that
        # a test's own registry with htpasswd stands for one (the tenant
        # isolation test: a tenant naming it gets no operator secret).
        'container': {'credential_registries': '127.0.0.1'},
        # The tenants' read API of their runs checks their tokens.
        'container_api': {'auth_strategy': 'keystone'},
    }


def start(settings, out=print):
    """Start the cloud (without nova-compute) and Horizon; return the
    cloud's layout.Cloud."""
    cloud = services.up(settings.state_dir, settings.cloud_ports,
                        settings.cloud_prefix, settings.api_url, out=out,
                        runs_api_url=settings.runs_api_url)
    out('Starting Horizon (the first run builds its virtualenv) ...')
    horizon.start(cloud, out=out)
    return cloud


def start_compute(settings):
    """nova-compute, once Ironic and its nodes are up."""
    services.start_compute(layout.Cloud.load(settings.state_dir))


def stop(settings, out=None):
    """Stop the cloud of ``settings``' state directory (if any)."""
    cloud = layout.Cloud.load(settings.state_dir)
    stopped = ([horizon.NAME] if cloud is not None and horizon.stop(cloud)
               else [])
    return stopped + services.down(settings.state_dir, out=out)


def is_up(settings):
    cloud = layout.Cloud.load(settings.state_dir)
    return cloud is not None and all(
        procs.running(cloud, n) for n in services.ORDER + (horizon.NAME,))


def loaded(settings):
    cloud = layout.Cloud.load(settings.state_dir)
    if cloud is None:
        raise procs.LabError(
            'no cloud in %s: bring the lab up with --profile cloud'
            % settings.state_dir)
    return cloud


# --- connections -------------------------------------------------------------

def admin(settings):
    """openstacksdk connection of the cloud's admin, system scope (what
    Ironic's operator API asks for)."""
    return register.connect_system(loaded(settings))


def project_admin(settings):
    """The admin in project admin: Placement refuses system scope."""
    return register.connect(loaded(settings))


def tenant(settings, name=register.DEMO):
    """A tenant: user ``name``, role member in project ``name`` ("demo",
    or register.OTHER_TENANT)."""
    return register.connect(loaded(settings), name, name)


def keystone_session(settings):
    """A keystoneauth session of the system-scoped admin, for
    python-ironicclient (bmc_lab.client)."""
    return admin(settings).session


def write_clouds_yaml(settings):
    """``<state dir>/clouds.yaml`` with the lab's four identities, for
    ``OS_CLIENT_CONFIG_FILE=... OS_CLOUD=bmc-lab-demo openstack ...``."""
    cloud = loaded(settings)
    entries = {
        'bmc-lab-admin': cloud.system_auth(),
        'bmc-lab-project-admin': cloud.auth(),
        'bmc-lab-demo': cloud.auth(register.DEMO, register.DEMO),
        'bmc-lab-demo-b': cloud.auth(register.OTHER_TENANT,
                                     register.OTHER_TENANT),
    }
    data = {'clouds': {
        name: {'auth': auth, 'region_name': layout.REGION,
               'interface': 'public', 'identity_api_version': 3,
               'baremetal_api_version': '1.81'}
        for name, auth in entries.items()}}
    path = os.path.join(settings.state_dir, CLOUDS_YAML)
    with open(path, 'w') as f:
        f.write('# Written by bmc-lab up --profile cloud.\n')
        yaml.safe_dump(data, f, default_flow_style=False)
    return path


# --- the Nova path's Ironic objects ------------------------------------------

def add_deploy_templates(settings, cli, out=print):
    """One deploy template per profile of TUNABLES_PROFILES (the
    operator command ironic-bmc-deploy-templates does the same), and
    their traits on every lab node, so the flavors select them."""
    from ironic_bmc import deploy_templates

    wanted = deploy_templates.templates(list(TUNABLES_PROFILES))
    buf = io.StringIO()
    deploy_templates.apply(cli, wanted, out=buf)
    for line in buf.getvalue().splitlines():
        out('  deploy template ' + line)
    traits = {t['extra'][deploy_templates.MARK]: t['name'] for t in wanted}
    for i in range(settings.nodes):
        name = settings.node_name(i)
        have = set(cli.node.get_traits(name))
        if not set(traits.values()) <= have:
            cli.node.set_traits(name, sorted(have | set(traits.values())))
    conn = project_admin(settings)      # Nova refuses system scope
    for profile, trait in traits.items():
        register.tunables_flavor(conn, profile, trait)
    return traits
