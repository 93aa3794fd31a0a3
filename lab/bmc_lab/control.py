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

"""Bring a lab up, tear it down, tell whether it runs."""

import os
import shutil

from bmc_lab import client as lab_client
from bmc_lab.cloud import horizon
from bmc_lab.cloud import profile as cloud_profile
from bmc_lab.cloud import services as cloud_services
from bmc_lab import content_servers
from bmc_lab import host_libvirt
from bmc_lab import ironic_service
from bmc_lab import nodes
from bmc_lab import osc
from bmc_lab import procs
from bmc_lab import programs
from bmc_lab import services
from bmc_lab import settings as lab_settings
from bmc_lab import supervisor
from bmc_lab import virtual_bmcs
from bmc_lab import wol_listener

#: Runtime state recreated by every ``up`` (logs are kept).
RUNTIME_DIRS = ('ironic', 'httpboot', 'tftpboot', 'registry', 'nodes',
                'etc', 'run', 'cloud', 'nfs')
#: What nodes of the cloud profile run by default: Nova deploys them with
#: the container interface, whatever instance_info says.
CLOUD_NODE_INTERFACES = {'deploy_interface': 'container',
                         'vendor_interface': 'container',
                         'resource_class': cloud_profile.RESOURCE_CLASS}


def is_up(settings):
    if settings.is_cloud and not cloud_profile.is_up(settings):
        return False
    return all(procs.running(settings, name)
               for name in ironic_service.ironic_processes(settings))


def _say(out, msg):
    if out is not None:
        out(msg)


def up(settings, out=print, hardware_types=None, deploy_interfaces=None,
       **enroll_interfaces):
    """Bring the lab up; a no-op (returning False) when it already runs."""
    current = lab_settings.Settings.load(settings.state_dir)
    if current is not None and is_up(current):
        _say(out, 'Lab in %s is already up (profile %s, %d node(s)); '
             'nothing to do.' % (current.state_dir, current.profile,
                                 current.nodes))
        return False
    programs.check_host_built()
    if current is not None:
        # Leftovers of a lab that died or was half torn down.
        down(current, out=None)
    ports = settings.ports.named(settings.nodes)
    if settings.is_cloud:
        ports.update(settings.cloud_ports.named(horizon=True))
        enroll_interfaces = dict(CLOUD_NODE_INTERFACES, **enroll_interfaces)
    procs.check_ports_free(
        ports, udp={'virtual BMC of node %d (IPMI)' % i
                    for i in range(settings.nodes)}
        | {lab_settings.WOL_LISTENER})
    for d in RUNTIME_DIRS:
        shutil.rmtree(settings.path(d), ignore_errors=True)
    os.makedirs(settings.log_dir, exist_ok=True)
    settings.save()
    try:
        _say(out, 'Starting libvirt, nginx, docker-registry, nfs-ganesha ...')
        with host_libvirt.libvirt_held():
            # (Defined, shut off: the lab's claim on the shared libvirtd.)
            for i in range(settings.nodes):
                nodes.define(settings, i)
        content_servers.start_nginx(settings)
        content_servers.start_registry(settings)
        content_servers.start_nfs(settings)
        # (For nodes enrolled as container-wol: bmc_lab.wol_node.)
        wol_listener.start(settings)
        if settings.is_cloud:
            _say(out, 'Starting the cloud: Keystone, Glance, Placement, '
                 'Nova, Neutron API (the first run builds their '
                 'virtualenv) ...')
            cloud_profile.start(settings, out=out)
        _say(out, 'Starting Ironic (%s profile) ...' % settings.profile)
        if settings.profile == lab_settings.PROFILE_SCALED:
            ironic_service.drop_database(settings)
        ironic_service.start_ironic(settings, hardware_types,
                                    deploy_interfaces)
        cli = lab_client.wait_api(settings)
        for i in range(settings.nodes):
            _say(out, 'Creating node %s (IPMI on 127.0.0.1:%d) ...'
                 % (settings.node_name(i), settings.ports.ipmi(i)))
            virtual_bmcs.start_bmc(settings, i)
            node = nodes.enroll(cli, settings, i, **enroll_interfaces)
            cli.node.set_provision_state(node.uuid, 'manage')
            lab_client.StateWatcher(cli, node.uuid).wait('manageable', 180)
            cli.node.set_provision_state(node.uuid, 'provide')
            lab_client.StateWatcher(cli, node.uuid).wait('available', 180)
        if settings.is_cloud:
            _say(out, 'Deploy templates, traits and flavors of the '
                 'tunables profiles; starting nova-compute ...')
            cloud_profile.add_deploy_templates(settings, cli, out=out)
            cloud_profile.start_compute(settings)
        osc.write_clouds_yaml(settings)
        # Last: a BMC, nginx, the registry or ganesha that dies from now
        # on is started again (bmc_lab.supervisor).
        supervisor.start(settings)
    except Exception:
        down(settings, out=None)
        raise
    _say(out, describe(settings))
    return True


def down(settings, out=print, purge=False):
    """Tear the lab down; nothing running is not an error."""
    loaded = lab_settings.Settings.load(settings.state_dir) or settings
    domains = (nodes.defined_lab_domains(loaded)
               if host_libvirt.libvirt_reachable() else [])
    for name in domains:
        nodes.virsh('destroy', name, check=False)
        nodes.virsh('undefine', name, check=False)
    stopped = cloud_profile.stop(loaded)
    stopped += services.stop_all(loaded)
    if purge:
        if loaded.profile == lab_settings.PROFILE_SCALED:
            ironic_service.drop_database(loaded)
        shutil.rmtree(loaded.state_dir, ignore_errors=True)
    if not stopped and not domains:
        _say(out, 'No lab is running in %s; nothing to tear down.'
             % loaded.state_dir)
    else:
        _say(out, 'Lab in %s is down (stopped: %s; removed nodes: %s).%s'
             % (loaded.state_dir, ', '.join(stopped) or 'none',
                ', '.join(domains) or 'none',
                '' if purge else ' Logs are kept in %s.' % loaded.log_dir))
    return bool(stopped or domains)


def describe(settings):
    p = settings.ports
    ironic_auth = ('(Keystone auth)' if settings.is_cloud else
                   '(export OS_AUTH_TYPE=none OS_ENDPOINT=%s)'
                   % settings.api_url)
    lines = [
        'Lab is up: profile %s%s, state in %s' % (
            settings.profile,
            ' (%d conductors: %s)' % (settings.conductors, ', '.join(
                settings.conductor_host(i)
                for i in range(settings.conductors)))
            if settings.conductors > 1 else '', settings.state_dir),
        '  Ironic API      %s   %s' % (settings.api_url, ironic_auth),
        '  HTTP root       http://127.0.0.1:%d -> %s' % (
            p.http, settings.http_root),
        '  OCI registry    %s' % settings.registry_address,
        '  Wake-on-LAN     udp://127.0.0.1:%d (starts the node whose MAC '
        'a magic packet names)' % p.wol,
        '  Nodes see the host as %s' % lab_settings.GUEST_HOST_ADDRESS,
    ]
    if settings.is_cloud:
        c = settings.cloud_ports
        lines += [
            '  Keystone        http://127.0.0.1:%d/v3  (Glance %d, '
            'Placement %d, Nova %d, Neutron %d)' % (
                c.keystone, c.glance, c.placement, c.nova, c.neutron),
            '  Horizon         http://127.0.0.1:%d  (user demo or admin, '
            'password bmc-cloud)' % c.horizon,
            '  credentials     export OS_CLIENT_CONFIG_FILE=%s '
            'OS_CLOUD=bmc-lab-demo  (or bmc-lab-admin: system scope, '
            'for "openstack baremetal")' % settings.path(
                cloud_profile.CLOUDS_YAML),
        ]
    for i in range(settings.nodes):
        lines.append('  node %-18s IPMI 127.0.0.1:%d  console %s' % (
            settings.node_name(i), p.ipmi(i), nodes.console_log(settings,
                                                                i)))
    lines.append('  logs            %s' % settings.log_dir)
    return '\n'.join(lines)


def status(settings):
    loaded = lab_settings.Settings.load(settings.state_dir)
    if loaded is None:
        return 'No lab in %s.' % settings.state_dir
    names = list(services.ORDER) + [supervisor.NAME] + [
        n for n in ironic_service.ironic_processes(loaded)
        if n not in services.ORDER]
    if loaded.is_cloud:
        names += list(cloud_services.ORDER) + [horizon.NAME]
    running = [n for n in names if procs.running(loaded, n)]
    head = describe(loaded) if is_up(loaded) else (
        'Lab in %s is down.' % loaded.state_dir)
    return '%s\n  running processes: %s' % (head,
                                            ', '.join(running) or 'none')
