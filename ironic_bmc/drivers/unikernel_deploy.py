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

"""The ``unikernel`` deploy interface (operator-only).

Boots a multiboot image (``instance_info/unikernel_image``) through iPXE
on the whole node, with no agent and no operating system: the node is
ACTIVE once powered on, the image prints its protocol lines on the serial
console, which the conductor reads (:mod:`unikernel_console`), and the
run ends at its end line (the image powers the node off; the conductor
makes sure).  The run report has the same shape as a container job's:
stages (power-on, workload-started at the ``booted`` line,
workload-exited at the ``end`` line, powered-off), BMC energy, the
console as output, and the noise unikernel's results in ``noise``, so a
unikernel and a Linux run of the same node compare field for field.

Everything that needs an agent is refused at validate
(:mod:`ironic_bmc.unikernel_info`).
"""

from ironic.common import boot_modes
from ironic.common import exception
from ironic.common import metrics_utils
from ironic.common.i18n import _
from ironic.common import states
from ironic.conductor import periodics
from ironic.conductor import utils as manager_utils
from ironic.drivers import base
from ironic.drivers.modules import boot_mode_utils
from oslo_log import log

from bmc_common import protocol
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import energy
from ironic_bmc.drivers import node_boot
from ironic_bmc.drivers import unikernel_console
from ironic_bmc.drivers import unikernel_run
from ironic_bmc import report as run_report
from ironic_bmc import unikernel_info

LOG = log.getLogger(__name__)
METRICS = metrics_utils.get_metrics_logger(__name__)

NAME = 'unikernel'


class UnikernelDeploy(base.DeployInterface):
    """Boot a multiboot unikernel; read its run on the serial console."""

    def get_properties(self):
        return {}

    @METRICS.timer('UnikernelDeploy.validate')
    def validate(self, task):
        """instance_info, iPXE, a console this conductor reads.

        :raises: MissingParameterValue, InvalidParameterValue naming the
            key and the reason.
        """
        if not getattr(task.driver.boot, 'ipxe_enabled', False):
            raise exception.InvalidParameterValue(
                _('The unikernel deploy interface boots the node through '
                  'iPXE; node %(node)s uses boot interface %(boot)s. Set '
                  'boot_interface=ipxe.')
                % {'node': task.node.uuid,
                   'boot': task.node.boot_interface})
        if boot_mode_utils.get_boot_mode(task.node) == boot_modes.UEFI:
            raise exception.InvalidParameterValue(
                _('The unikernel deploy interface boots multiboot (v1) '
                  'images, which iPXE\'s EFI build cannot: node %(node)s '
                  'boots in UEFI mode. Set its boot mode to bios '
                  '(properties/capabilities boot_mode:bios).')
                % {'node': task.node.uuid})
        unikernel_console.path(task.node)
        unikernel_info.parse(task.node)

    @METRICS.timer('UnikernelDeploy.prepare')
    def prepare(self, task):
        """Power off; the provisioning network (iPXE fetches the image
        there; no tenant network is configured)."""
        node = task.node
        if node.provision_state == states.DEPLOYING:
            task.driver.network.validate(task)
            unikernel_run.end(task)
            manager_utils.node_power_action(task, states.POWER_OFF)
            task.driver.network.unconfigure_tenant_networks(task)
            task.driver.network.add_provisioning_network(task)

    @METRICS.timer('UnikernelDeploy.deploy')
    @base.deploy_step(priority=100)
    @run_report.written_once
    def deploy(self, task):
        """Stage the image and its iPXE script, power on: ACTIVE."""
        node = task.node
        info = unikernel_info.parse(node)
        report = run_report.new(node, info)
        report['kind'] = NAME
        run_report.update(node, report, kernel=info.image,
                          kernel_args=info.args.split())
        try:
            unikernel_run.stage_boot(task, info)
        except exception.IronicException as exc:
            run_report.update(node, report, state=protocol.RUN_FAILED,
                              error=str(exc))
            raise exception.InstanceDeployFailure(
                _('Cannot stage unikernel %(image)s for node %(node)s: '
                  '%(err)s') % {'image': info.image, 'node': node.uuid,
                                'err': exc}) from exc
        unikernel_run.start(task, info, report)
        return None

    @periodics.node_periodic(
        purpose='closing unikernel runs',
        spacing=lambda: CONF.container.workload_poll_interval,
        filters={'provision_state': states.ACTIVE, 'reserved': False,
                 'maintenance': False},
        predicate_extra_fields=['driver_internal_info'],
        predicate=unikernel_run.running,
    )
    def _close_runs(self, task, manager, context):
        """Close the runs no watcher thread of this conductor follows (it
        restarted or took the node over), at their end line or deadline;
        the watched ones close themselves."""
        run = task.node.driver_internal_info.get(unikernel_run.RUN_KEY)
        if not run or unikernel_run.watched(run['deploy_id']):
            return
        task.upgrade_lock()
        with run_report.batch(task.node):
            unikernel_run.close_if_due(task)

    @METRICS.timer('UnikernelDeploy.tear_down')
    @run_report.written_once
    def tear_down(self, task):
        """End a run still going; power off; remove the boot files."""
        unikernel_run.end(task)
        manager_utils.node_power_action(task, states.POWER_OFF)
        task.driver.network.unconfigure_tenant_networks(task)
        return states.DELETED

    @METRICS.timer('UnikernelDeploy.clean_up')
    @run_report.written_once
    def clean_up(self, task):
        node = task.node
        unikernel_run.end(task)
        unikernel_run.clean_boot(task)
        energy.stop(node)
        if node.power_state != states.POWER_OFF:
            node_boot.power_off_keeping_error(task)
        task.driver.network.remove_provisioning_network(task)
        node.save()

    @METRICS.timer('UnikernelDeploy.take_over')
    def take_over(self, task):
        """Nothing to move: the periodic task of the conductor that has
        the node now closes its run."""
