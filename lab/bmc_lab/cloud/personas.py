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

"""Ironic's Secure RBAC personas as real Keystone users of the lab cloud.

Each persona is a user with one role assignment (system, domain or
project scope) and a password token scoped as that persona's would be;
:func:`runs_api` gives a keystoneauth adapter on the container runs API
with it, :func:`anonymous` the API's URL for a request with no token.
Made on first use and looked up after (idempotent), as
:mod:`bmc_lab.cloud.register` does.
"""

import openstack
from keystoneauth1 import adapter

from bmc_lab.cloud import layout
from bmc_lab.cloud import profile as cloud_profile
from bmc_lab.cloud import register
from bmc_lab import tenant_job

#: A project that owns nodes (Ironic's node.owner) and uses none itself.
OWNER_PROJECT = 'persona-owner'

#: persona -> (scope, role, project name or None)
PERSONAS = {
    'system reader': ('system', 'reader', None),
    'owner member': ('project', 'member', OWNER_PROJECT),
    'lessee admin': ('project', 'admin', register.DEMO),
    'lessee reader': ('project', 'reader', register.DEMO),
    'other project member': ('project', 'member', register.OTHER_TENANT),
    'domain-scoped reader': ('domain', 'reader', None),
}

def _user_name(persona):
    return 'persona-' + persona.replace(' ', '-')


def ensure(settings):
    """Create the persona users and their one role each; return the
    owner project's id."""
    cloud = cloud_profile.loaded(settings)
    idn = register.connect(cloud).identity
    owner = register._project(idn, OWNER_PROJECT,
                              'Owns lab nodes (the e2e personas)')
    for persona, (scope, role_name, project_name) in PERSONAS.items():
        role = idn.find_role(role_name, ignore_missing=False)
        project = (idn.find_project(project_name, domain_id='default',
                                    ignore_missing=False)
                   if project_name else None)
        user = register._user(idn, _user_name(persona), cloud.password,
                              project)
        if scope == 'system':
            idn.assign_system_role_to_user(user, role, 'all')
        elif scope == 'domain':
            idn.assign_domain_role_to_user('default', user, role)
        else:
            idn.assign_project_role_to_user(project, user, role)
    return owner.id


def _auth(cloud, persona):
    scope, _role, project = PERSONAS[persona]
    auth = {'auth_url': cloud.keystone_url, 'username': _user_name(persona),
            'password': cloud.password, 'user_domain_name': 'Default'}
    if scope == 'system':
        auth['system_scope'] = 'all'
    elif scope == 'domain':
        auth['domain_name'] = 'Default'
    else:
        auth.update(project_name=project, project_domain_name='Default')
    return auth


def runs_api(settings, persona):
    """An adapter on the runs API with ``persona``'s token; the lab's
    system-scoped admin for ``'system admin'``."""
    cloud = cloud_profile.loaded(settings)
    auth = (cloud.system_auth() if persona == 'system admin'
            else _auth(cloud, persona))
    conn = openstack.connection.Connection(
        auth_type='password', auth=auth, region_name=layout.REGION,
        interface='public')
    return adapter.Adapter(conn.session, service_type=tenant_job.RUNS_SERVICE,
                           interface='public', region_name=layout.REGION)


def anonymous(settings):
    """The runs API's URL, for a request with no token at all."""
    return runs_api(settings, 'system admin').get_endpoint().rstrip('/')
