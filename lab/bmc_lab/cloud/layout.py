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

"""Where one cloud lives: its state directory, ports, databases, RabbitMQ
virtual host and the Ironic it fronts.

Everything the cloud writes sits under the state directory (configs in
``etc/<service>/``, data in ``cloud/<service>/``, logs in ``logs/``, pid
files in ``run/``), next to a lab's own files if they share one.  The
layout is saved as ``cloud.json`` so ``down`` works from the directory.
"""

import dataclasses
import os
import re

from bmc_lab.cloud import ports as cloud_ports
from bmc_lab import settings as lab_settings

#: Databases of one cloud, each ``<prefix>_<name>``.
DATABASES = ('keystone', 'glance', 'placement', 'nova_api', 'nova',
             'nova_cell0', 'neutron')
#: Service users, each with roles admin and service in project "service".
SERVICE_USERS = ('glance', 'placement', 'nova', 'ironic', 'neutron')
REGION = 'RegionOne'
_PREFIX = re.compile(r'^[a-z][a-z0-9_]{0,39}$')


@dataclasses.dataclass
class Cloud(lab_settings.SavedState):
    STATE_FILE = 'cloud.json'

    state_dir: str
    #: Names the databases (``<prefix>_keystone``...), the RabbitMQ
    #: and Nova's control exchange of this cloud.
    prefix: str
    ironic_api_url: str
    ports: cloud_ports.CloudPorts = dataclasses.field(
        default_factory=cloud_ports.CloudPorts)
    mysql_url: str = 'mysql+pymysql://root@127.0.0.1:3306'
    #: user:password@host:port of RabbitMQ, and the virtual host the
    #: cloud's services use ('' is the broker's default, "/"): one cloud
    #: per virtual host (bmc_lab.cloud.backends).
    rabbit: str = 'guest:guest@127.0.0.1:5672'
    rabbit_vhost: str = ''
    #: Password of admin, demo and the service users (a loopback lab).
    password: str = 'bmc-cloud'
    #: The container runs API beside the lab's Ironic (catalog type
    #: baremetal-container); None: not in the catalog.
    runs_api_url: str = None
    #: What bmc_lab.cloud.register created (names -> ids).
    ids: dict = dataclasses.field(default_factory=dict)
    #: Seconds each step of the last ``up`` took.
    timings: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if not _PREFIX.match(self.prefix):
            raise ValueError('cloud prefix %r: use lower-case letters, '
                             'digits and "_" (it names databases)'
                             % self.prefix)
        if isinstance(self.ports, dict):
            self.ports = cloud_ports.CloudPorts(**self.ports)
        self.state_dir = os.path.abspath(self.state_dir)

    # --- paths (the interface bmc_lab.procs expects) -----------------------

    def path(self, *parts):
        return os.path.join(self.state_dir, *parts)

    @property
    def log_dir(self):
        return self.path('logs')

    def log(self, name):
        return self.path('logs', name)

    def etc(self, service, *parts):
        """The config directory of ``service`` (its OS_*_CONFIG_DIR)."""
        return self.path('etc', service, *parts)

    def data(self, service, *parts):
        return self.path('cloud', service, *parts)

    # --- databases and messaging ---------------------------------------------

    def database(self, name):
        return '%s_%s' % (self.prefix, name)

    @property
    def databases(self):
        return [self.database(name) for name in DATABASES]

    def db_url(self, name):
        return '%s/%s?charset=utf8mb4' % (self.mysql_url, self.database(name))

    @property
    def transport_url(self):
        return 'rabbit://%s/%s' % (self.rabbit, self.rabbit_vhost)

    @property
    def nova_host(self):
        """Nova's [DEFAULT]host (services and the Ironic compute)."""
        return self.prefix.replace('_', '-')

    # --- URLs --------------------------------------------------------------

    def _url(self, port, path=''):
        return 'http://127.0.0.1:%d%s' % (port, path)

    @property
    def keystone_url(self):
        return self._url(self.ports.keystone, '/v3')

    @property
    def endpoints(self):
        """Service type -> public endpoint, as registered in Keystone."""
        endpoints = {
            'identity': self.keystone_url,
            'image': self._url(self.ports.glance),
            'placement': self._url(self.ports.placement),
            'compute': self._url(self.ports.nova, '/v2.1'),
            'network': self._url(self.ports.neutron),
            'baremetal': self.ironic_api_url,
        }
        if self.runs_api_url:
            endpoints['baremetal-container'] = self.runs_api_url
        return endpoints

    def auth(self, username='admin', project='admin'):
        """keystoneauth password-plugin arguments (openstacksdk auth)."""
        return {'auth_url': self.keystone_url, 'username': username,
                'password': self.password, 'project_name': project,
                'user_domain_name': 'Default',
                'project_domain_name': 'Default'}

    def system_auth(self):
        """The admin's, scoped to the system (Ironic's operator API)."""
        return {'auth_url': self.keystone_url, 'username': 'admin',
                'password': self.password, 'user_domain_name': 'Default',
                'system_scope': 'all'}
