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

"""The container deploy interface's periodic tasks.

Watching running workloads (through the watch pool of
:mod:`workload_watch`), restarting rootfs builds a conductor lost, and
releasing what this conductor holds for nodes that left it.
"""

from ironic.common import states
from ironic.conductor import periodics
from oslo_log import log

from ironic_bmc.conf import CONF
from ironic_bmc.drivers import local_state
from ironic_bmc.drivers import rootfs_build
from ironic_bmc.drivers import workload_watch
from ironic_bmc.group import barrier as group_barrier
from ironic_bmc import run_files

LOG = log.getLogger(__name__)


class DeployPeriodicsMixin:
    """Periodic tasks of the container deploy interface."""

    @periodics.node_periodic(
        purpose='watching container workloads',
        spacing=lambda: CONF.container.workload_poll_interval,
        filters=workload_watch.FILTERS,
        predicate_extra_fields=['driver_internal_info'],
        predicate=workload_watch.running,
    )
    def _watch_workload(self, task, manager, context):
        # Handed to the watch pool: one slow or silent agent must not
        # hold up the other nodes' polls (this loop is serial).
        return workload_watch.check_soon(context, task.node.uuid)

    @periodics.node_periodic(
        purpose='watching run group barriers',
        spacing=lambda: CONF.container.group_poll_interval,
        filters={'provision_state': states.DEPLOYWAIT, 'reserved': False,
                 'maintenance': False},
        predicate_extra_fields=['driver_internal_info', 'deploy_step'],
        predicate=group_barrier.waiting,
    )
    def _watch_group_barriers(self, task, manager, context):
        """Wake a member waiting at its group's barrier when the group is
        complete (its wake-up was lost), failed, or out of time: the
        barrier step decides what happens."""
        group_barrier.poll(task)

    @periodics.node_periodic(
        purpose='restarting lost rootfs builds',
        spacing=lambda: CONF.container.workload_poll_interval,
        filters={'provision_state': states.DEPLOYWAIT, 'reserved': False,
                 'maintenance': False},
        predicate_extra_fields=['driver_internal_info'],
        predicate=lambda n: rootfs_build.orphaned(n),
    )
    def _restart_lost_builds(self, task, manager, context):
        """A conductor restart or death loses its build workers: start
        the builds of its waiting deploys again (here: the node is mapped
        to this conductor), or they would wait until Ironic's deploy
        callback timeout."""
        if not rootfs_build.builder_gone(task):
            return
        task.upgrade_lock()
        if (task.node.provision_state == states.DEPLOYWAIT
                and rootfs_build.orphaned(task.node)
                and rootfs_build.builder_gone(task)):
            rootfs_build.restart(task)

    @periodics.periodic(
        spacing=lambda: CONF.container.local_state_sweep_interval,
        enabled=lambda: CONF.container.local_state_sweep_interval > 0)
    def _release_local_state(self, manager, context):
        """Release what this conductor holds for nodes that left it, and
        the files of runs past [container]report_retention_days."""
        local_state.sweep(context, manager.conductor.id)
        deleted = run_files.prune(CONF.container.report_retention_days)
        if deleted:
            LOG.info('Deleted the reports and files of %d runs older than '
                     '%d days', deleted,
                     CONF.container.report_retention_days)
