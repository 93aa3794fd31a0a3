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

"""Settings of one lab: where its state lives and which ports it uses.

Everything a lab owns sits under one state directory; the settings are
saved there as ``lab.json`` when the lab comes up, so ``down`` and
``status`` work from the directory alone.
"""

import dataclasses
import json
import os

from bmc_lab.cloud import ports as api_ports

DEFAULT_STATE_DIR = '/var/lib/bmc-lab'

#: The host as the nodes see it.  Nodes use QEMU user-mode networking with
#: ``restrict=on``: they can reach nothing but the ``guestfwd`` ports that
#: lead from this address to the host's loopback.
GUEST_HOST_ADDRESS = '10.0.2.100'

PROFILE_EMBEDDED = 'embedded'
PROFILE_SCALED = 'scaled'
#: The embedded Ironic behind Keystone, Glance, Placement, Nova (ironic
#: driver) and the Neutron API: the tenant path (bmc_lab.cloud).
PROFILE_CLOUD = 'cloud'
PROFILES = (PROFILE_EMBEDDED, PROFILE_SCALED, PROFILE_CLOUD)


#: The Wake-on-LAN listener's name among the ports (a UDP one).
WOL_LISTENER = 'Wake-on-LAN listener (UDP)'
#: The run-group network's name among the ports (UDP multicast).
GROUP_NET = 'run-group network (UDP multicast on loopback)'
#: The run-group network: its multicast group (on 127.0.0.1 only) and
#: the nodes' addresses on it (TEST-NET-1: nothing routes it).
GROUP_MCAST_ADDRESS = '230.0.0.1'
GROUP_NET_PREFIX = '192.0.2.'
GROUP_NET_PREFIXLEN = 24


@dataclasses.dataclass
class Ports:
    """Ports on 127.0.0.1 (TCP, but the IPMI and Wake-on-LAN ones),
    each named after what uses it."""

    ironic_api: int = 6385
    http: int = 8080
    registry: int = 5050
    #: nfs-ganesha (NFSv4, the nfs rootfs mode).
    nfs: int = 12049
    ipmi_base: int = 6230
    #: The agent API of node i is forwarded from 127.0.0.1:(agent_base+i).
    agent_base: int = 9900
    #: The Wake-on-LAN listener (UDP): magic packets start node domains.
    wol: int = 6229
    #: The container runs API (ironic-bmc-api), beside Ironic.
    runs_api: int = 6388
    #: The run-group network (UDP multicast on loopback): every node's
    #: second NIC, one L2 segment per lab.
    group_net: int = 6250

    def ipmi(self, index):
        return self.ipmi_base + index

    def agent(self, index):
        return self.agent_base + index

    def named(self, nodes):
        """All ports with a human name for each, for conflict checks."""
        names = {
            'ironic API': self.ironic_api,
            'container runs API': self.runs_api,
            'nginx (Ironic http_root)': self.http,
            'docker-registry': self.registry,
            'nfs-ganesha (NFSv4)': self.nfs,
            WOL_LISTENER: self.wol,
            GROUP_NET: self.group_net,
        }
        for i in range(nodes):
            names['virtual BMC of node %d (IPMI)' % i] = self.ipmi(i)
            names['agent API of node %d' % i] = self.agent(i)
        return names


class SavedState:
    """Save/load of a dataclass as JSON in its state directory, under
    the file name ``STATE_FILE``."""

    STATE_FILE = None

    def save(self):
        os.makedirs(self.state_dir, exist_ok=True)
        path = os.path.join(self.state_dir, self.STATE_FILE)
        tmp = path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(dataclasses.asdict(self), f, indent=2, sort_keys=True)
        os.replace(tmp, path)

    @classmethod
    def load(cls, state_dir):
        """What was saved in ``state_dir``, or None."""
        path = os.path.join(os.path.abspath(state_dir), cls.STATE_FILE)
        try:
            with open(path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return None
        return cls(**data)


@dataclasses.dataclass
class Settings(SavedState):
    STATE_FILE = 'lab.json'
    state_dir: str = DEFAULT_STATE_DIR
    profile: str = PROFILE_EMBEDDED
    nodes: int = 1
    #: ironic-conductor processes of the scaled profile, each with its own
    #: host name, artifact cache and report directory (one HTTP root and
    #: nginx for all, as nodes reach one host address).
    conductors: int = 1
    node_memory_mb: int = 2048
    node_cpus: int = 1
    node_disk_gb: int = 4
    name: str = 'bmc-lab'
    #: [conductor]deploy_callback_timeout: how long a deploy waits for
    #: the agent before it fails.
    deploy_callback_timeout: int = 600
    #: [container]workload_lost_timeout: how long a running workload's
    #: agent may stay silent before the run is declared lost.
    workload_lost_timeout: int = 120
    #: nginx limit_rate for rootfs artifacts only ('' = none), e.g. '4m':
    #: lets a test act while a node is still downloading one.
    artifact_rate_limit: str = ''
    #: Every node gets a second NIC on the lab's run-group network (a
    #: loopback multicast segment) and a port for it (run groups).
    group_network: bool = False
    #: Ironic's [DEFAULT]debug (the scale benchmark measures without it,
    #: as production runs).
    ironic_debug: bool = True
    ports: Ports = dataclasses.field(default_factory=Ports)
    #: MariaDB server of the scaled profile (database created on demand).
    mysql_url: str = 'mysql+pymysql://root@127.0.0.1:3306'
    #: RabbitMQ of the scaled profile.
    transport_url: str = 'rabbit://guest:guest@127.0.0.1:5672/'
    #: API ports of the cloud profile's services.
    cloud_ports: api_ports.CloudPorts = dataclasses.field(
        default_factory=api_ports.CloudPorts)

    def __post_init__(self):
        if isinstance(self.ports, dict):
            # Settings saved by older versions may name retired ports.
            self.ports = Ports(**{k: v for k, v in self.ports.items()
                                  if k in Ports.__dataclass_fields__})
        if isinstance(self.cloud_ports, dict):
            self.cloud_ports = api_ports.CloudPorts(**self.cloud_ports)
        if self.profile not in PROFILES:
            raise ValueError('unknown lab profile %r; expected one of %s'
                             % (self.profile, ', '.join(PROFILES)))
        if self.conductors < 1 or (self.conductors > 1
                                   and self.profile != PROFILE_SCALED):
            raise ValueError('conductors=%d: the %s profile runs one '
                             'conductor; several need the %s profile'
                             % (self.conductors, self.profile,
                                PROFILE_SCALED))
        self.state_dir = os.path.abspath(self.state_dir)
        if isinstance(self.ports, dict):
            self.ports = Ports(**self.ports)

    # --- paths -------------------------------------------------------------

    def path(self, *parts):
        return os.path.join(self.state_dir, *parts)

    @property
    def log_dir(self):
        return self.path('logs')

    def log(self, name):
        return self.path('logs', name)

    @property
    def http_root(self):
        return self.path('httpboot')

    @property
    def images_dir(self):
        """Files Ironic may read through file:// URLs."""
        return self.path('images')

    @property
    def database_name(self):
        return self.name.replace('-', '_') + '_ironic'

    @property
    def cloud_prefix(self):
        """Prefix of the cloud profile's databases (``<prefix>_nova``...)."""
        return self.name.replace('-', '_') + '_cloud'

    @property
    def is_cloud(self):
        return self.profile == PROFILE_CLOUD

    def conductor_process(self, index):
        """Process name of conductor ``index`` (0 = the first)."""
        if index == 0:
            return 'ironic-conductor'
        return 'ironic-conductor-%d' % (index + 1)

    def conductor_host(self, index):
        """Ironic's ``[DEFAULT]host`` of conductor ``index``."""
        return self.name if index == 0 else '%s-%d' % (self.name, index + 1)

    def conductor_dir(self, index, name):
        """A directory of conductor ``index``'s own (under ironic/)."""
        return self.path('ironic', name if index == 0
                         else '%s-%d' % (name, index + 1))

    def node_name(self, index):
        return '%s-node-%d' % (self.name, index)

    def node_mac(self, index):
        return '52:54:00:bc:%02x:%02x' % (index // 256, index % 256)

    def node_group_mac(self, index):
        """The MAC of node ``index``'s NIC on the run-group network."""
        return '52:54:00:bd:%02x:%02x' % (index // 256, index % 256)

    def node_group_address(self, index):
        """Node ``index``'s address on the run-group network."""
        return '%s%d/%d' % (GROUP_NET_PREFIX, 10 + index,
                            GROUP_NET_PREFIXLEN)

    # --- URLs --------------------------------------------------------------

    @property
    def api_url(self):
        return 'http://127.0.0.1:%d' % self.ports.ironic_api

    @property
    def runs_api_url(self):
        return 'http://127.0.0.1:%d' % self.ports.runs_api

    @property
    def guest_api_url(self):
        return 'http://%s:%d' % (GUEST_HOST_ADDRESS, self.ports.ironic_api)

    @property
    def guest_http_url(self):
        return 'http://%s:%d' % (GUEST_HOST_ADDRESS, self.ports.http)

    @property
    def registry_address(self):
        return '127.0.0.1:%d' % self.ports.registry
