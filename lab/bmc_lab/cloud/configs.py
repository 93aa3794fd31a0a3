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

"""Configuration files of the cloud's services, rendered like ironic.conf
(bmc_lab.inifile): dictionaries written by configparser.

Every function takes a ``bmc_lab.cloud.layout.Cloud``: its state
directory, ports, database prefix, RabbitMQ transport URL and the URL of
the Ironic API the cloud fronts.  Everything binds to 127.0.0.1 and runs
one worker; services authenticate to each other with passwords.
"""

from bmc_lab.cloud import layout
from bmc_lab import inifile

HEADER = ('# Written by bmc-lab for the cloud profile (%s); do not edit, '
          'it is rewritten by bmc_lab.cloud.services.up.\n')


def password_auth(cloud, username):
    """keystoneauth password plugin options of a service user."""
    return {
        'auth_type': 'password',
        'auth_url': cloud.keystone_url,
        'username': username,
        'password': cloud.password,
        'project_name': 'service',
        'user_domain_name': 'Default',
        'project_domain_name': 'Default',
        'region_name': layout.REGION,
    }


def authtoken(cloud, username):
    """[keystone_authtoken] of a service validating tokens as ``username``."""
    section = password_auth(cloud, username)
    section['www_authenticate_uri'] = cloud.keystone_url
    return section


def _common(cloud, service):
    """Sections every service gets."""
    return {
        'oslo_concurrency': {'lock_path': cloud.data(service, 'locks')},
        # Nothing listens to notifications in the lab.
        'oslo_messaging_notifications': {'driver': 'noop'},
    }


def keystone(cloud):
    conf = {
        'DEFAULT': {'debug': 'false'},
        'database': {'connection': cloud.db_url('keystone')},
        'token': {'provider': 'fernet'},
        'fernet_tokens': {
            'key_repository': cloud.data('keystone', 'fernet-keys')},
        'credential': {
            'key_repository': cloud.data('keystone', 'credential-keys')},
    }
    conf.update(_common(cloud, 'keystone'))
    return _write(conf, 'keystone')


def glance_api(cloud):
    conf = {
        'DEFAULT': {
            'debug': 'false',
            'bind_host': '127.0.0.1',
            'bind_port': str(cloud.ports.glance),
            'workers': '1',
            'enabled_backends': 'fs:file',
        },
        'glance_store': {'default_backend': 'fs'},
        'fs': {'filesystem_store_datadir': cloud.data('glance', 'images')},
        'os_glance_staging_store': {
            'filesystem_store_datadir': cloud.data('glance', 'staging')},
        'os_glance_tasks_store': {
            'filesystem_store_datadir': cloud.data('glance', 'tasks')},
        'database': {'connection': cloud.db_url('glance')},
        'keystone_authtoken': authtoken(cloud, 'glance'),
        'paste_deploy': {
            'flavor': 'keystone',
            'config_file': cloud.etc('glance', 'glance-api-paste.ini'),
        },
    }
    conf.update(_common(cloud, 'glance'))
    return _write(conf, 'glance-api')


def placement(cloud):
    conf = {
        'DEFAULT': {'debug': 'false'},
        'api': {'auth_strategy': 'keystone'},
        'placement_database': {'connection': cloud.db_url('placement')},
        'keystone_authtoken': authtoken(cloud, 'placement'),
    }
    conf.update(_common(cloud, 'placement'))
    return _write(conf, 'placement')


def nova(cloud):
    """nova.conf of nova-api, -conductor, -scheduler and -compute."""
    ironic = password_auth(cloud, 'ironic')
    ironic['endpoint_override'] = cloud.ironic_api_url
    service_user = password_auth(cloud, 'nova')
    service_user['send_service_user_token'] = 'true'
    conf = {
        'DEFAULT': {
            'debug': 'false',
            'host': cloud.nova_host,
            'my_ip': '127.0.0.1',
            'state_path': cloud.data('nova'),
            'instances_path': cloud.data('nova', 'instances'),
            'transport_url': cloud.transport_url,
            # Named after the cloud; the RabbitMQ virtual host (not this
            # exchange: oslo.messaging names queues by topic alone) keeps
            # it apart from other clouds on the broker.
            'control_exchange': cloud.prefix,
            'compute_driver': 'ironic.IronicDriver',
            'enabled_apis': 'osapi_compute',
            'osapi_compute_listen': '127.0.0.1',
            'osapi_compute_listen_port': str(cloud.ports.nova),
            'osapi_compute_workers': '1',
            'metadata_workers': '1',
            'heal_instance_info_cache_interval': '0',
            'reserved_host_memory_mb': '0',
        },
        'api_database': {'connection': cloud.db_url('nova_api')},
        'database': {'connection': cloud.db_url('nova')},
        'api': {'auth_strategy': 'keystone'},
        'wsgi': {'api_paste_config': cloud.etc('nova', 'api-paste.ini')},
        'conductor': {'workers': '1'},
        'scheduler': {
            'workers': '1',
            # Maps a new nova-compute to cell1 without nova-manage.
            'discover_hosts_in_cells_interval': '30',
            # No reschedule of a failed build: the server's fault is then
            # the deploy's own error (e.g. which image property is
            # wrong), not "Exceeded maximum number of retries".
            'max_attempts': '1',
        },
        'keystone_authtoken': authtoken(cloud, 'nova'),
        'service_user': service_user,
        'placement': password_auth(cloud, 'placement'),
        'ironic': ironic,
        'neutron': password_auth(cloud, 'neutron'),
        'glance': {'region_name': layout.REGION},
        'oslo_messaging_rabbit': {'rabbit_ha_queues': 'false'},
    }
    conf.update(_common(cloud, 'nova'))
    return _write(conf, 'nova')


def neutron(cloud):
    """neutron.conf of the Neutron API: ML2, no agents, no Nova events."""
    conf = {
        'DEFAULT': {
            'debug': 'false',
            'bind_host': '127.0.0.1',
            'bind_port': str(cloud.ports.neutron),
            'api_workers': '1',
            'rpc_workers': '0',
            'rpc_state_report_workers': '0',
            'state_path': cloud.data('neutron'),
            'transport_url': cloud.transport_url,
            'control_exchange': cloud.prefix + '_neutron',
            'core_plugin': 'ml2',
            'service_plugins': '',
            'auth_strategy': 'keystone',
            'api_paste_config': cloud.etc('neutron', 'api-paste.ini'),
            'dhcp_agent_notification': 'false',
            'notify_nova_on_port_status_changes': 'false',
            'notify_nova_on_port_data_changes': 'false',
        },
        'database': {'connection': cloud.db_url('neutron')},
        'keystone_authtoken': authtoken(cloud, 'neutron'),
    }
    conf.update(_common(cloud, 'neutron'))
    return _write(conf, 'neutron')


def ml2_conf(cloud):
    """plugins/ml2/ml2_conf.ini: flat provider networks on physnet1,
    recorded only (no mechanism driver wires anything)."""
    return _write({
        'ml2': {
            'type_drivers': 'flat',
            'tenant_network_types': '',
            'mechanism_drivers': '',
            'extension_drivers': 'port_security',
        },
        'ml2_type_flat': {'flat_networks': 'physnet1'},
    }, 'ml2')


#: (service, file under its config directory) -> renderer.
FILES = {
    ('keystone', 'keystone.conf'): keystone,
    ('glance', 'glance-api.conf'): glance_api,
    ('placement', 'placement.conf'): placement,
    ('nova', 'nova.conf'): nova,
    ('neutron', 'neutron.conf'): neutron,
    ('neutron', 'plugins/ml2/ml2_conf.ini'): ml2_conf,
}


def render_all(cloud):
    """{path of the file: its text} of every configuration file."""
    return {cloud.etc(service, name): render(cloud)
            for (service, name), render in FILES.items()}


def _write(conf, what):
    return inifile.ini_text(conf, HEADER % what)
