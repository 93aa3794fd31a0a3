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

"""Cleaning for container nodes: it boots the agent a warm deploy reuses.

A container deploy boots the agent with the node's default kernel and its
modules initrd (:mod:`boot_files`), not through the boot interface; so
does cleaning here, and it marks that boot (:mod:`warm`).  With fast
track the agent stays up after cleaning and the next deploy reuses it.
Nothing of a container deploy is on the disks: IPA's disk erasure runs
only when the operator asks for it.
"""

from ironic.common import faults
from ironic.common import metrics_utils
from ironic.conductor import utils as manager_utils
from ironic.drivers.modules import deploy_utils

from ironic_bmc.conf import CONF
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import warm

METRICS = metrics_utils.get_metrics_logger(__name__)


class WarmCleaningMixin:
    """Cleaning steps' boot and tear-down, for the container deploy."""

    @METRICS.timer('ContainerDeploy.prepare_cleaning')
    def prepare_cleaning(self, task):
        """Boot the agent for cleaning as a container deploy boots it (the
        default kernel and its modules initrd), and mark that boot: with
        fast track, the next deploy may reuse that agent."""
        if not manager_utils.is_fast_track(task):
            boot_files.prepare(task, deploy_utils.build_agent_options(
                task.node), agent_only=True)
            warm.booting_for_cleaning(task)
        result = deploy_utils.prepare_inband_cleaning(task,
                                                      manage_boot=False)
        if result is None:
            # Fast track: the agent is up, its steps are read now.
            self.refresh_steps(task, 'clean')
        return result

    @METRICS.timer('ContainerDeploy.tear_down_cleaning')
    def tear_down_cleaning(self, task):
        """Power off, unless fast track leaves the agent up: then the
        cleaning's boot mark is tied to that agent (the node is warm)."""
        node = task.node
        if (manager_utils.is_fast_track(task)
                and node.fault != faults.CLEAN_FAILURE):
            warm.bind(task)
        else:
            warm.forget(node)
        deploy_utils.tear_down_inband_cleaning(task, manage_boot=False)
        boot_files.clean_up(task)

    def get_clean_steps(self, task):
        """The agent's clean steps; IPA's disk erasure only when asked.

        A container deploy writes nothing to the node's disks, so the
        erase steps get priority 0 (not run by automated cleaning) unless
        ``[container]erase_disks_on_cleaning`` is set or the operator
        gave their priorities in ``[deploy]``.
        """
        steps = super().get_clean_steps(task)
        if CONF.container.erase_disks_on_cleaning:
            return steps
        explicit = {
            'erase_devices': CONF.deploy.erase_devices_priority,
            'erase_devices_metadata':
                CONF.deploy.erase_devices_metadata_priority,
        }
        for step in steps:
            if step.get('step') in explicit and explicit[step['step']] is None:
                step['priority'] = 0
        return steps
