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

"""ironic.conf for the lab's three profiles.

``embedded``: the combined ``ironic`` service, sqlite, no RPC bus (what
bifrost runs).  ``cloud``: the same behind Keystone, with Glance and Nova
credentials (bmc_lab.cloud.profile.ironic_sections).  ``scaled``:
``ironic-api`` and ``ironic-conductor`` as two processes on MariaDB,
talking over RabbitMQ through oslo.messaging (how a production cloud
scales out across conductors).
"""

from bmc_lab.cloud import profile as cloud_profile
from bmc_lab import inifile
from bmc_lab import settings as lab_settings

#: Interfaces the lab enables.  ``fake-hardware`` is kept for API tests.
HARDWARE_TYPES = ['container-ipmi', 'container-wol', 'ipmi',
                  'fake-hardware']
DEPLOY_INTERFACES = ['container', 'unikernel', 'ramdisk', 'direct', 'fake']
#: Agent boot files of container deploys (see bmc_lab.agent).
AGENT_KERNEL = 'agent.kernel'
AGENT_RAMDISK = 'agent.initramfs'


def nfs_exports_file(settings):
    """The exports file the conductor owns and the lab's nfs-ganesha
    includes ([container]nfs_exports_file)."""
    return settings.path('nfs', 'exports.conf')


def nfs_pid_file(settings):
    """nfs-ganesha's own pid file ([container]nfs_pid_file)."""
    return settings.path('run', 'ganesha.nfsd.pid')


def database_url(settings):
    if settings.profile == lab_settings.PROFILE_SCALED:
        return '%s/%s?charset=utf8' % (settings.mysql_url,
                                       settings.database_name)
    return 'sqlite:///%s' % settings.path('ironic', 'ironic.sqlite')


def render(settings, hardware_types=None, deploy_interfaces=None):
    """Return ironic.conf for ``settings`` as a string."""
    scaled = settings.profile == lab_settings.PROFILE_SCALED
    conf = {
        'DEFAULT': {
            'host': settings.name,
            'debug': 'true' if settings.ironic_debug else 'false',
            'auth_strategy': 'noauth',
            'rpc_transport': 'oslo' if scaled else 'none',
            'enabled_hardware_types': ','.join(
                hardware_types or HARDWARE_TYPES),
            'enabled_boot_interfaces': 'ipxe,fake',
            'enabled_deploy_interfaces': ','.join(
                deploy_interfaces or DEPLOY_INTERFACES),
            'default_deploy_interface': 'ramdisk',
            # (wol and noop: container-wol nodes, bmc_lab.wol_node.)
            'enabled_power_interfaces': 'ipmitool,wol,fake',
            'enabled_management_interfaces': 'ipmitool,noop,fake',
            'enabled_network_interfaces': 'noop',
            'default_network_interface': 'noop',
            'enabled_inspect_interfaces': 'no-inspect,fake',
            'enabled_console_interfaces': 'no-console,fake',
            'enabled_vendor_interfaces': 'container,ipmitool,no-vendor,fake',
            'enabled_raid_interfaces': 'no-raid,fake',
            'enabled_bios_interfaces': 'no-bios,fake',
            'enabled_firmware_interfaces': 'no-firmware,fake',
            'enabled_rescue_interfaces': 'no-rescue,fake',
            'enabled_storage_interfaces': 'noop,fake',
        },
        'api': {
            'host_ip': '127.0.0.1',
            'port': str(settings.ports.ironic_api),
            # One worker: a second one cannot bind the same port (cheroot,
            # no SO_REUSEPORT), dies and is forked again every 5 s.
            'api_workers': '1',
        },
        'database': {
            'connection': database_url(settings),
        },
        'conductor': {
            'automated_clean': 'false',
            # (and the kernel builds' artifacts, booted as file:// URLs)
            'file_url_allowed_paths': '%s,%s' % (
                settings.images_dir, settings.path('kernel-builds')),
            'deploy_callback_timeout': str(settings.deploy_callback_timeout),
            'sync_power_state_interval': '20',
            'heartbeat_interval': '5',
            'check_provision_state_interval': '10',
            # The agent ramdisk: container deploys boot it (with the
            # image's kernel) when instance_info names no other.
            'deploy_kernel': 'file://' + settings.path('images',
                                                       AGENT_KERNEL),
            'deploy_ramdisk': 'file://' + settings.path('images',
                                                        AGENT_RAMDISK),
        },
        # The container runs API (ironic_service.RUNS_API): noauth as
        # this Ironic; the cloud profile checks Keystone tokens.
        'container_api': {
            'host_ip': '127.0.0.1',
            'port': str(settings.ports.runs_api),
            'auth_strategy': 'noauth',
        },
        'container': {
            'image_cache_dir': settings.path('ironic', 'container_cache'),
            'report_dir': settings.path('reports'),
            # Kernel builds (kernel_build vendor method) stay in the lab.
            'kernel_build_dir': settings.path('kernel-builds'),
            # The boot section splits firmware from the boot-file
            # downloads (the lab's nginx logs $msec $request_time).
            'boot_http_log': settings.log('nginx-access.log'),
            # libvirt's file console of each node (bmc_lab.nodes): what
            # the unikernel deploy reads.
            'console_log_template': settings.log('{node_name}.console.log'),
            # Every registry on loopback (the lab's, and the tests' own):
            # the lab's own network, listed as an operator lists its
            # internal registries (loopback is refused otherwise).
            'insecure_registries': '127.0.0.1',
            # (And registry.example: the placeholder registry of the
            # tempest plugin's API tests, which validate and never pull.)
            'allowed_registries': '127.0.0.1,registry.example',
            # The operator's pull secret goes to the lab's registry only.
            'credential_registries': settings.registry_address,
            'default_kernel_modules': 'file://' + settings.path(
                'images', 'modules-default.cpio.gz'),
            'workload_poll_interval': '3',
            'workload_lost_timeout': str(settings.workload_lost_timeout),
            # Run groups: waiting members look every few seconds; the
            # barrier gives up before Ironic's callback timeout would.
            'group_poll_interval': '3',
            'group_barrier_timeout': str(max(
                30, min(600, settings.deploy_callback_timeout - 60))),
            # The nfs rootfs mode: the lab's nfs-ganesha, which nodes
            # reach through their guestfwd.
            'nfs_server_address': lab_settings.GUEST_HOST_ADDRESS,
            'nfs_port': str(settings.ports.nfs),
            'nfs_exports_file': nfs_exports_file(settings),
            # Every lab node reaches ganesha through its guestfwd, a
            # forwarder on the host's loopback: the one client address of
            # every export (a real node's own address is added to each).
            'nfs_clients': '127.0.0.1',
            'nfs_pid_file': nfs_pid_file(settings),
        },
        'deploy': {
            'http_root': settings.http_root,
            'http_url': settings.guest_http_url,
            # The lab's nodes boot with SeaBIOS.
            'default_boot_mode': 'bios',
        },
        'pxe': {
            'tftp_root': settings.path('tftpboot'),
            'tftp_master_path': settings.path('tftpboot', 'master_images'),
            'images_path': settings.path('ironic', 'images'),
            'instance_master_path': settings.path('ironic', 'master_images'),
            'loader_file_paths': '',
            'kernel_append_params': 'nofb vga=normal console=ttyS0,115200',
        },
        'dhcp': {
            'dhcp_provider': 'none',
        },
        'ipmi': {
            'min_command_interval': '1',
            'command_retry_timeout': '30',
        },
        'service_catalog': {
            # What the nodes use to reach the API (agent lookup/heartbeat).
            'endpoint_override': settings.guest_api_url,
        },
        'oci': {
            'permit_fallback_to_http_transport': 'true',
        },
        'oslo_concurrency': {
            'lock_path': settings.path('ironic', 'locks'),
        },
        'agent': {
            'deploy_logs_collect': 'never',
        },
    }
    if scaled:
        conf['DEFAULT']['transport_url'] = settings.transport_url
        conf['oslo_messaging_rabbit'] = {
            'rabbit_ha_queues': 'false',
        }
        # A conductor that stops heartbeating leaves the hash ring within
        # about half a minute and another takes its ACTIVE nodes over at
        # its next local-state sync (Ironic's defaults: 60 s, 15 s, 180 s).
        conf['conductor'].update({
            'heartbeat_timeout': '20',
            'sync_local_state_interval': '15',
        })
        conf['DEFAULT']['hash_ring_reset_interval'] = '10'
        conf['container']['local_state_sweep_interval'] = '15'
    if settings.is_cloud:
        for section, values in cloud_profile.ironic_sections(
                settings).items():
            conf.setdefault(section, {}).update(values)
    return inifile.ini_text(
        conf, '# Written by bmc-lab for profile %r; do not edit, it is '
        'rewritten by "bmc-lab up".\n' % settings.profile)


def render_conductor(settings, index):
    """The overlay (a second --config-file) of conductor ``index`` >= 1:
    its own host name, artifact cache and report directory."""
    return inifile.ini_text({
        'DEFAULT': {'host': settings.conductor_host(index)},
        'container': {
            'image_cache_dir': settings.conductor_dir(index,
                                                      'container_cache'),
            'report_dir': settings.conductor_dir(index, 'reports'),
        },
    }, '# Written by bmc-lab: conductor %d of profile %r, read after '
       'ironic.conf.\n' % (index + 1, settings.profile))
