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

"""What the container deploy interface checks at validate.

Every check Ironic asks for before a deploy (and ``openstack baremetal
node validate``), in one place: the container keys, the network and boot
interfaces, the rootfs mode against this conductor's set-up, the boot
files, the image's size against the node's RAM, the tunables.  Nothing
is staged or written; the Glance image is read once per task
(image_properties.fetch).
"""

from ironic.common import exception
from ironic.common.i18n import _
from ironic.drivers.modules import deploy_utils

from bmc_common import protocol
from ironic_bmc.conf import CONF
from ironic_bmc.group import info as group_info
from ironic_bmc import deploy_info
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import configdrive
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import tuning
from ironic_bmc import image_properties
from ironic_bmc import ownership
from ironic_bmc.drivers import warm

def _check_wake_on_lan(task):
    """A project's deploy on a node whose power-off cannot be proven is
    the operator's choice (``[container]wol_project_deploys``)."""
    node = task.node
    if (warm.power_proven(task) or CONF.container.wol_project_deploys
            or ownership.is_operators(node)):
        return
    raise exception.InvalidParameterValue(
        _('Node %(node)s powers off through its agent (Wake-on-LAN, power '
          'interface %(power)s): a workload can keep the machine running '
          'while it looks off, and the next boot of the node could be '
          'answered by it.  It is deployed for project %(project)s '
          '(%(why)s), and conductor %(host)s lets only the operator\'s '
          'own runs deploy there ([container]wol_project_deploys is '
          'false).') % {'node': node.uuid, 'power': node.power_interface,
                         'project': ownership.run_project(node),
                         'why': ownership.source(node), 'host': CONF.host})


#: Network interfaces that leave the agent reachable while the workload
#: runs (no switch to a tenant network).
SUPPORTED_NETWORKS = ('noop', 'flat')


def validate(task):
    """Validate a container deploy of ``task.node``.

    :raises: MissingParameterValue, InvalidParameterValue naming the key
        and the reason.
    """
    node = task.node
    # The Glance image's keys, as the deploy would snapshot them (in
    # memory only: validate may hold a shared lock).
    image_properties.snapshot(task)
    container = deploy_info.for_task(task)
    # (The configdrive itself arrives with the deploy request, after
    # validate: the deploy step checks it.)
    configdrive.optional(node)
    if container.group:
        group_info.network_port(task)
    if node.network_interface not in SUPPORTED_NETWORKS:
        raise exception.InvalidParameterValue(
            _('The container deploy interface needs a network interface '
              'that keeps the agent reachable (%(ok)s); node %(node)s '
              'uses %(net)s') % {'ok': ', '.join(SUPPORTED_NETWORKS),
                                 'node': node.uuid,
                                 'net': node.network_interface})
    if (container.rootfs == protocol.ROOTFS_NFS
            and not rootfs.nfs_configured()):
        raise exception.InvalidParameterValue(
            _('%(where)s: "nfs" needs the conductor\'s NFS server, and '
              '[container]nfs_server_address is not set on conductor '
              '%(host)s') % {
                'where': image_properties.where(node, protocol.II_ROOTFS),
                'host': CONF.host})
    if (container.rootfs == protocol.ROOTFS_STREAM
            and not rootfs.with_verity(
                rootfs.artifact_format(container.rootfs)[0])):
        raise exception.InvalidParameterValue(
            _('%(where)s: "stream" checks every block with dm-verity as '
              'it arrives, and conductor %(host)s builds no hash tree '
              '([container]rootfs_verity is %(verity)s, '
              '[container]rootfs_format is %(fmt)s; stream needs '
              'rootfs_verity = true and erofs or squashfs)') % {
                'where': image_properties.where(node, protocol.II_ROOTFS),
                'host': CONF.host,
                'verity': CONF.container.rootfs_verity,
                'fmt': CONF.container.rootfs_format})
    _check_wake_on_lan(task)
    task.driver.boot.validate(task)
    boot_files.validate(task)
    rootfs.check_known_size(node, container)
    tuning.requested(node)
    tuning.check_confined(node, container)
    tuning.check_templates(task)
    deploy_info.noise_probe_args(node)
    deploy_utils.validate_capabilities(node)
