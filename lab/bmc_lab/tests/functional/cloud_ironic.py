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

"""An Ironic behind the test cloud, as the cloud profile's recipe runs it.

One ``ironic`` process (API and conductor, sqlite, no RPC bus) from the
lab's own environment, fake-hardware only, authenticating with the cloud's
Keystone.  Its files live under the cloud's state directory (etc/ironic,
cloud/ironic, logs/ironic.log).
"""

import os
import sys
import time

from bmc_lab.cloud import configs
from bmc_lab.cloud import register
from bmc_lab import inifile
from bmc_lab import procs

NAME = 'ironic'
#: Ironic resource class of the enrolled node; Placement's name for it
#: is bmc_lab.cloud.register.RESOURCE_CLASS.
RESOURCE_CLASS = 'baremetal-container'
_FAKE = ('boot', 'deploy', 'power', 'management', 'inspect', 'console',
         'vendor', 'raid', 'bios', 'firmware', 'rescue', 'storage')
_NO = {'inspect': 'no-inspect', 'console': 'no-console',
       'vendor': 'no-vendor', 'raid': 'no-raid', 'bios': 'no-bios',
       'firmware': 'no-firmware', 'rescue': 'no-rescue',
       'storage': 'noop'}


def _bin(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def render(cloud, port):
    default = {
        'host': cloud.prefix.replace('_', '-') + '-ironic',
        'debug': 'false',
        'auth_strategy': 'keystone',
        'rpc_transport': 'none',
        # nova's "ironic" user (role service in project service) must see
        # every node, not only its project's.
        'rbac_service_role_elevated_access': 'true',
        'enabled_hardware_types': 'fake-hardware',
        'enabled_network_interfaces': 'noop',
        'default_network_interface': 'noop',
    }
    for iface in _FAKE:
        default['enabled_%s_interfaces' % iface] = ','.join(
            ['fake'] + ([_NO[iface]] if iface in _NO else []))
    conf = {
        'DEFAULT': default,
        'api': {'host_ip': '127.0.0.1', 'port': str(port)},
        'database': {'connection': 'sqlite:///%s'
                     % cloud.data('ironic', 'ironic.sqlite')},
        'conductor': {'automated_clean': 'false'},
        'dhcp': {'dhcp_provider': 'none'},
        'keystone_authtoken': configs.authtoken(cloud, 'ironic'),
        'service_catalog': configs.password_auth(cloud, 'ironic'),
        'glance': configs.password_auth(cloud, 'ironic'),
        'oslo_concurrency': {'lock_path': cloud.data('ironic', 'locks')},
    }
    path = cloud.etc('ironic', 'ironic.conf')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.makedirs(cloud.data('ironic', 'locks'), exist_ok=True)
    with open(path, 'w') as f:
        f.write(inifile.ini_text(conf, '# The functional test\'s '
                                     'Ironic in front of the cloud.\n'))
    return path


def start(cloud, port, timeout=120):
    """Start Ironic on ``port`` (a fresh database); wait for its API."""
    conf = render(cloud, port)
    db = cloud.data('ironic', 'ironic.sqlite')
    if os.path.exists(db):
        os.unlink(db)
    procs.run([_bin('ironic-dbsync'), '--config-file', conf,
               'create_schema'], 'ironic-dbsync create_schema',
              log_path=cloud.log('ironic-dbsync.log'))
    proc = procs.spawn(cloud, NAME, [_bin('ironic'), '--config-file', conf])
    procs.wait_for_port(port, NAME, cloud.log('ironic.log'), proc=proc,
                        timeout=timeout)
    return proc


def stop(cloud):
    return procs.stop(cloud, NAME)


def enroll_fake_node(cloud, name, timeout=120):
    """One fake-hardware node, available and powered off (a node whose
    power state is unknown is reported reserved by nova)."""
    conn = register.connect_system(cloud)
    deadline = time.monotonic() + timeout
    while True:     # the conductor registers its drivers after start-up
        if any(d.name == 'fake-hardware' for d in conn.baremetal.drivers()):
            break
        if time.monotonic() > deadline:
            raise procs.LabError('Ironic serves no fake-hardware driver; '
                                 'see %s' % cloud.log('ironic.log'))
        time.sleep(1)
    node = conn.baremetal.create_node(
        driver='fake-hardware', name=name, resource_class=RESOURCE_CLASS,
        properties={'cpu_arch': 'x86_64', 'cpus': 1, 'memory_mb': 2048,
                    'local_gb': 10})
    for target in ('manage', 'provide'):
        conn.baremetal.set_node_provision_state(node, target, wait=True,
                                                timeout=timeout)
    conn.baremetal.set_node_power_state(node, 'power off', wait=True,
                                        timeout=timeout)
    return conn.baremetal.get_node(node.id)
