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

"""Virtual bare-metal nodes: QEMU domains, their BMCs, their Ironic records.

A node is a libvirt domain of type ``qemu`` (TCG: KVM guests hang on these
machines) whose NIC uses QEMU user-mode networking with ``restrict=on``:
the node can reach only the ``guestfwd`` ports that lead to the lab's
services on the host's loopback.  The built-in DHCP hands iPXE the URL of
Ironic's ``boot.ipxe``.
"""

import os
from xml.sax import saxutils

from bmc_lab import host_libvirt
from bmc_lab import logcursor
from bmc_lab import procs
from bmc_lab import programs
from bmc_lab import settings as lab_settings
from bmc_lab import virtual_bmcs

SOCAT = '/usr/bin/socat'

DOMAIN_XML = """\
<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{name}</name>
  <memory unit='MiB'>{memory}</memory>
  <vcpu>{cpus}</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <boot dev='network'/>
  </os>
  <features><acpi/><apic/></features>
  <cpu mode='custom' match='exact'><model>qemu64</model></cpu>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{emulator}</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='unsafe'/>
      <source file='{disk}'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <serial type='file'>
      <source path='{console}' append='on'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
  <qemu:commandline>
    <qemu:arg value='-accel'/>
    <qemu:arg value='tcg'/>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='{netdev}'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='{nic}'/>{group_nic}
  </qemu:commandline>
</domain>
"""


#: Where ironic-python-agent listens on the node.
AGENT_PORT = 9999


def netdev_spec(settings, index):
    """QEMU user-mode network: DHCP bootfile + loopback-only forwards.

    Node to host: ``guestfwd`` from 10.0.2.100 to the lab's services.
    Host to node: ``hostfwd`` from a loopback port to the agent's API,
    which the agent advertises (see :func:`kernel_append_params`).
    """
    if not os.path.exists(SOCAT):
        raise procs.LabError('%s is missing: install the Debian package '
                             'socat (tools/host-setup.sh does)' % SOCAT)
    addr = lab_settings.GUEST_HOST_ADDRESS
    forwards = [settings.ports.http, settings.ports.ironic_api,
                settings.ports.registry, settings.ports.nfs]
    parts = ['user', 'id=n0', 'restrict=on',
             'bootfile=%s/boot.ipxe' % settings.guest_http_url]
    # "cmd:" spawns one socat per guest connection; a "tcp:" chardev would
    # carry a single host connection for the life of the VM.
    parts += ['guestfwd=tcp:%s:%d-cmd:%s STDIO TCP:127.0.0.1:%d'
              % (addr, p, SOCAT, p) for p in forwards]
    parts.append('hostfwd=tcp:127.0.0.1:%d-:%d'
                 % (settings.ports.agent(index), AGENT_PORT))
    return ','.join(parts)


#: The second NIC's QEMU arguments (see :func:`group_nic_args`).
GROUP_NIC_XML = """
    <qemu:arg value='-netdev'/>
    <qemu:arg value='{netdev}'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='{nic}'/>"""


def group_nic_args(settings, index):
    """The run-group NIC: every node of the lab on one L2 segment that
    is UDP multicast on the host's loopback (QEMU's socket netdev joins
    the group on 127.0.0.1 only: nothing leaves the host).  No option
    ROM: the node boots from its first NIC only."""
    netdev = 'socket,id=n1,mcast=%s:%d,localaddr=127.0.0.1' % (
        lab_settings.GROUP_MCAST_ADDRESS, settings.ports.group_net)
    nic = ('virtio-net-pci,netdev=n1,mac=%s,romfile=,bus=pci.0,addr=0xa'
           % settings.node_group_mac(index))
    return netdev, nic


def kernel_append_params(settings, index):
    """Kernel arguments that make the agent reachable from the host."""
    return ('%%default%% ipa-advertise-host=127.0.0.1 '
            'ipa-advertise-port=%d' % settings.ports.agent(index))


def console_log(settings, index):
    return settings.log('%s.console.log' % settings.node_name(index))


def console_cursor(settings, index):
    """Mark the node's console now; ``.text()`` is what it printed since."""
    return logcursor.Cursor(console_log(settings, index))


def domain_xml(settings, index):
    name = settings.node_name(index)
    esc = saxutils.escape
    return DOMAIN_XML.format(
        name=esc(name), memory=settings.node_memory_mb,
        cpus=settings.node_cpus,
        emulator=programs.system_bin('qemu-system-x86_64',
                                     'qemu-system-x86'),
        disk=esc(settings.path('nodes', name + '.qcow2')),
        console=esc(console_log(settings, index)),
        netdev=esc(netdev_spec(settings, index), {"'": '&apos;'}),
        # Boot index 2: when the BMC sets the boot device to disk, libvirt
        # gives the disk index 1 (and nothing when it is "network"), so
        # the NIC boots first unless the disk was asked for.
        nic='virtio-net-pci,netdev=n0,mac=%s,bootindex=2,bus=pci.0,addr=0x9'
            % settings.node_mac(index),
        group_nic=_group_nic_xml(settings, index))


def _group_nic_xml(settings, index):
    if not settings.group_network:
        return ''
    netdev, nic = group_nic_args(settings, index)
    return GROUP_NIC_XML.format(netdev=saxutils.escape(netdev),
                                nic=saxutils.escape(nic))


def virsh(*args, check=True, log_path=None):
    return procs.run(['virsh', '-c', host_libvirt.LIBVIRT_URI] + list(args),
                     'virsh %s' % ' '.join(args), check=check,
                     log_path=log_path)


def domain_exists(name):
    return virsh('domstate', name, check=False).returncode == 0


def define(settings, index):
    """Define the domain (shut off) and its disk; idempotent."""
    name = settings.node_name(index)
    os.makedirs(settings.path('nodes'), exist_ok=True)
    disk = settings.path('nodes', name + '.qcow2')
    if not os.path.exists(disk):
        procs.run(['qemu-img', 'create', '-q', '-f', 'qcow2', disk,
                   '%dG' % settings.node_disk_gb], 'qemu-img create')
    xml_path = settings.path('nodes', name + '.xml')
    with open(xml_path, 'w') as f:
        f.write(domain_xml(settings, index))
    log = settings.log('virsh.log')
    if domain_exists(name):
        virsh('destroy', name, check=False, log_path=log)
        virsh('undefine', name, check=False, log_path=log)
    virsh('define', xml_path, log_path=log)


def ipmitool(settings, index, *args):
    return procs.run(
        ['ipmitool', '-I', 'lanplus', '-H', '127.0.0.1', '-p',
         str(settings.ports.ipmi(index)), '-U', 'admin', '-P', 'password',
         '-R', '3', '-N', '2'] + list(args), 'ipmitool %s' % ' '.join(args))


def bmc_power_state(settings, index):
    """'on' or 'off' as the node's BMC answers it over IPMI."""
    out = ipmitool(settings, index, 'power', 'status').stdout
    return 'on' if out.strip().endswith('on') else 'off'


def remove(settings, index):
    virtual_bmcs.stop_bmc(settings, index)
    name = settings.node_name(index)
    log = settings.log('virsh.log')
    if domain_exists(name):
        virsh('destroy', name, check=False, log_path=log)
        virsh('undefine', name, check=False, log_path=log)


def defined_lab_domains(settings):
    """Names of libvirt domains that belong to this lab."""
    prefix = settings.name + '-node-'
    return [n for n in host_libvirt.libvirt_domains() or ()
            if n.startswith(prefix)]


#: [container]group_physical_network's default: the run-group ports'.
GROUP_PHYSICAL_NETWORK = 'bmc-group'
#: The hardware type of a node without a BMC, and its interfaces.
WOL_DRIVER = 'container-wol'
WOL_INTERFACES = {'power_interface': 'wol', 'management_interface': 'noop'}


def ipmi_driver_info(settings, index):
    """driver_info of lab node ``index`` managed through its virtual BMC."""
    return {
        'ipmi_address': '127.0.0.1',
        'ipmi_port': settings.ports.ipmi(index),
        'ipmi_username': 'admin',
        'ipmi_password': 'password',
        'kernel_append_params': kernel_append_params(settings, index),
    }


def wol_driver_info(settings, index):
    """driver_info of lab node ``index`` as a machine without a BMC: woken
    by the lab's Wake-on-LAN listener (bmc_lab.wol_listener)."""
    return {
        'wol_host': '127.0.0.1',
        'wol_port': settings.ports.wol,
        'kernel_append_params': kernel_append_params(settings, index),
    }


def enroll(cli, settings, index, driver='container-ipmi', **interfaces):
    """Create (or update) the Ironic node for lab node ``index``
    (``driver`` ``container-wol``: a node without a BMC)."""
    name = settings.node_name(index)
    if driver == WOL_DRIVER:
        driver_info = wol_driver_info(settings, index)
        interfaces = dict(WOL_INTERFACES, **interfaces)
    else:
        driver_info = ipmi_driver_info(settings, index)
    properties = {
        'memory_mb': settings.node_memory_mb,
        'cpus': settings.node_cpus,
        'cpu_arch': 'x86_64',
        'local_gb': settings.node_disk_gb - 1,
        'capabilities': 'boot_mode:bios',
    }
    fields = dict(driver=driver, driver_info=driver_info,
                  properties=properties, boot_interface='ipxe',
                  deploy_interface='ramdisk')
    fields.update(interfaces)
    existing = [n for n in cli.node.list(fields=['uuid', 'name'])
                if n.name == name]
    for node in existing:
        cli.node.delete(node.uuid)
    node = cli.node.create(name=name, **fields)
    cli.port.create(address=settings.node_mac(index), node_uuid=node.uuid)
    if settings.group_network:
        # Its address is the operator's (see [container]
        # group_physical_network); no PXE from it.
        cli.port.create(address=settings.node_group_mac(index),
                        node_uuid=node.uuid, pxe_enabled=False,
                        physical_network=GROUP_PHYSICAL_NETWORK,
                        extra={'bmc_group_address':
                               settings.node_group_address(index)})
    return node
