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

"""Service steps of a running container node (``openstack baremetal node
service``).

They run in the conductor, in place (no reboot, the workload keeps
running), and call the agent next to the workload themselves.
"""

import time

from ironic.common import exception
from ironic.common import metrics_utils
from ironic.common.i18n import _
from ironic.drivers import base

from bmc_common import protocol
from ironic_bmc import deploy_info
from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import tuning
from ironic_bmc import report as run_report

METRICS = metrics_utils.get_metrics_logger(__name__)

TUNABLES_ARGSINFO = {
    'tunables': {
        'description': 'A tunables profile name, or an object of knobs '
                       '(optionally naming a "profile"), laid over '
                       'instance_info/container_tunables.',
        'required': False,
    },
}


def noise_probe(task, label, args=None):
    """Run the agent's OS-noise probe now; keep it in the report.

    ``args`` default to the deploy's ``container_noise_probe``; without
    it nothing runs.
    """
    node = task.node
    if args is None:
        args = deploy_info.noise_probe_args(node)
        if not args:
            return
    result = agent_calls.call(task, protocol.STEP_NOISE_PROBE, args,
                              timeout=int(args.get('duration', 5)) + 60)
    report = run_report.get(node)
    noise = dict(report.get('noise') or {})
    noise[label] = result
    run_report.update(node, report, noise=noise)
    node.save()


class ServiceStepsMixin:
    """The deploy interface's service steps (mixed into ContainerDeploy,
    before Ironic's agent mixins so that these methods win)."""

    @METRICS.timer('ContainerDeploy.bmc_noise_probe')
    @base.service_step(priority=0, requires_ramdisk=False, argsinfo={
        'duration': {'description': 'seconds per CPU (default 5, at most '
                                    '30)', 'required': False},
        'cpus': {'description': 'cpulist to probe (default: the workload '
                                'CPUs)', 'required': False},
        'threshold_us': {'description': 'interruption threshold in '
                                        'microseconds', 'required': False},
    })
    def bmc_noise_probe(self, task, duration=5, cpus=None,
                        threshold_us=None):
        """Measure OS noise on a running container node."""
        if not agent_calls.reachable(task.node):
            raise exception.NodeServicingFailure(
                node=task.node.uuid,
                reason=_('the agent next to the workload is not reachable'))
        args = {'duration': duration}
        if cpus is not None:
            args['cpus'] = cpus
        if threshold_us is not None:
            args['threshold_us'] = threshold_us
        try:
            noise_probe(task, 'service-%d' % int(time.time()), args)
        except exception.IronicException as exc:
            raise exception.NodeServicingFailure(node=task.node.uuid,
                                                 reason=str(exc))

    @METRICS.timer('ContainerDeploy.bmc_set_tunables')
    @base.service_step(priority=0, argsinfo=TUNABLES_ARGSINFO,
                       requires_ramdisk=False)
    def bmc_set_tunables(self, task, tunables=None):
        """Change run-time tunables of a running container node."""
        node = task.node
        knobs = tuning.runtime_only(
            tunables, 'service step bmc_set_tunables, argument tunables')
        if not agent_calls.reachable(node):
            raise exception.NodeServicingFailure(
                node=node.uuid,
                reason=_('the agent next to the workload is not reachable: '
                         'tunables can change only while the container '
                         'runs'))
        try:
            result = agent_calls.call(task, tuning.STEP,
                                      {'tunables': knobs})
        except exception.IronicException as exc:
            raise exception.NodeServicingFailure(node=node.uuid,
                                               reason=str(exc))
        report = run_report.get(node)
        if report:
            merged = dict(report.get('tunables') or {})
            merged.update(result.get('tunables') or {})
            run_report.update(node, report, tunables=merged)
            node.save()

    def get_service_steps(self, task):
        """This interface's own service steps (not the agent's).

        They run in the conductor and call the agent next to the workload
        themselves; ``AgentBaseMixin`` would offer the agent's cached
        service steps instead and hand every step to the agent.
        """
        return base.DeployInterface.get_service_steps(self, task)

    def execute_service_step(self, task, step):
        """Run one of this interface's service steps, synchronously."""
        return base.DeployInterface.execute_service_step(self, task, step)

    def prepare_service(self, task):
        """Service a running container node in place: no reboot."""
        return None

    def tear_down_service(self, task):
        """The workload and its agent keep running."""
        return None
