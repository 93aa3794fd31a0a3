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

"""The ``container`` deploy interface.

Runs a container image on the whole node, its rootfs in RAM.  The deploy
is a timeline of steps (priority, where it runs):

* 100 ``deploy`` (conductor): resolve the image, stage the boot files,
  power the node on; a worker builds and publishes the rootfs artifact
  while the node boots ("early boot"), outside the node's lock.
* 85 ``bmc_apply_tunables`` (agent): apply the run-time kernel tunables,
  check the boot-time ones, read every one back.
* 80 ``bmc_stage_rootfs`` (agent): fetch the artifact into RAM, verify
  its digest, mount it with a writable overlay.  Waits for the build
  when the agent is up first.
* 75 ``bmc_group_barrier`` (conductor): a run group's member waits until
  every member has staged its root (:mod:`ironic_bmc.group`).
* 70 ``bmc_start_workload`` (agent): start the workload in that root.
* 10 ``bmc_record_start`` (conductor): the node becomes ACTIVE.

The agent keeps running next to the workload; a periodic task asks it
for the workload's state.  In ``job`` mode the workload's exit ends the
run: exit code and output are recorded and the node is powered off.
"""

import time

from ironic.common import exception
from ironic.common import metrics_utils
from ironic.common.i18n import _
from ironic.common import states
from ironic.conductor import deployments
from ironic.conductor import utils as manager_utils
from ironic.drivers import base
from ironic.drivers.modules import agent_base
from oslo_log import log

from ironic_bmc import deploy_info
from ironic_bmc import deploy_record
from ironic_bmc import stream_cache
from ironic_bmc import image_properties
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import boot_report
from ironic_bmc.drivers import cleaning
from ironic_bmc.drivers import configdrive
from ironic_bmc.drivers import deploy_checks
from ironic_bmc.drivers import deploy_periodics
from ironic_bmc.drivers import energy
from ironic_bmc.drivers import local_state
from ironic_bmc.drivers import node_boot
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import rootfs_build
from ironic_bmc.drivers import run_close
from ironic_bmc.drivers import service_steps
from ironic_bmc.drivers import step_hooks  # noqa: F401 (registers the hooks)
from ironic_bmc.drivers import tuning
from ironic_bmc.drivers import warm
from ironic_bmc.drivers import workload_watch
from ironic_bmc.group import barrier as group_barrier
from ironic_bmc.group import info as group_info
from ironic_bmc.group import lifecycle as group_lifecycle
from bmc_common import protocol
from ironic_bmc import report as run_report

LOG = log.getLogger(__name__)
METRICS = metrics_utils.get_metrics_logger(__name__)


TUNABLES_ARGSINFO = service_steps.TUNABLES_ARGSINFO
#: The in-band steps that can be the first: the one sent first also
#: reads the node's boot marks.
BOOT_TIMES_STEPS = (protocol.STEP_APPLY_TUNABLES, protocol.STEP_STAGE_ROOTFS)
SUPPORTED_NETWORKS = deploy_checks.SUPPORTED_NETWORKS


class ContainerDeploy(service_steps.ServiceStepsMixin,
                      cleaning.WarmCleaningMixin,
                      deploy_periodics.DeployPeriodicsMixin,
                      agent_base.AgentBaseMixin, agent_base.HeartbeatMixin,
                      base.DeployInterface):
    """Run a container image on the whole node from a RAM root."""

    collect_deploy_logs = False

    def get_properties(self):
        return {
            'container_kernel_modules': _(
                'Kernel modules initrd for the deploy kernel. Optional; '
                'defaults to [container]default_kernel_modules.'),
        }

    def supports_deploy(self, task):
        """For ``deploy_interface=autodetect``: a container deploy when
        instance_info or the Glance image names a container image."""
        if task.node.instance_info.get(protocol.II_IMAGE):
            return True
        try:
            return bool(image_properties.fetch(task).get(protocol.II_IMAGE))
        except exception.IronicException as exc:
            LOG.warning('Cannot read the Glance image of node %(node)s to '
                        'detect a container deploy: %(err)s',
                        {'node': task.node.uuid, 'err': exc})
            return False

    @METRICS.timer('ContainerDeploy.validate')
    def validate(self, task):
        """Validate the deploy: instance_info, boot files, network, size.

        :raises: MissingParameterValue, InvalidParameterValue naming the
            key and the reason.
        """
        deploy_checks.validate(task)

    @METRICS.timer('ContainerDeploy.prepare')
    def prepare(self, task):
        """Power off and put the node on the provisioning network, as
        Ironic's agent deploy does; the agent stays there next to the
        workload, so no tenant network is ever configured.  A node whose
        agent cleaning left up (fast track, :mod:`warm`) stays on: the
        deploy step decides whether it is reused."""
        node = task.node
        if node.provision_state == states.DEPLOYING:
            task.driver.network.validate(task)
            # A rebuild of a node whose workload runs: the workload gets
            # its graceful stop (and its output is collected) before the
            # power goes.
            run_close.close(task)
            if not warm.may_be_warm(task):
                manager_utils.node_power_action(task, states.POWER_OFF)
            task.driver.network.unconfigure_tenant_networks(task)
            task.driver.network.add_provisioning_network(task)

    @METRICS.timer('ContainerDeploy.deploy')
    @base.deploy_step(priority=100)
    @run_report.written_once
    def deploy(self, task):
        """Resolve the image, get the agent up, build the rootfs meanwhile.

        The build runs outside the node's lock (:mod:`rootfs_build`): the
        step returns as soon as the node is powered on (or kexecs).  With
        the agent cleaning left up (:mod:`warm`), the next step runs in
        this call.
        """
        node = task.node
        image_properties.snapshot(task)
        container = deploy_info.for_task(task)
        run_close.end_previous(task)
        report = run_report.new(node, container)
        # Before anything is staged or powered: a refused configdrive
        # fails the deploy here (unless the operator lets it go on).
        drive_args, drive_report, server = self._configdrive(task)
        if drive_report:
            run_report.update(node, report, configdrive=drive_report)
        group, group_port = self._group(task, container, server)
        images = boot_files.boot_images(task)
        run_report.update(
            node, report,
            kernel=images[boot_files.LABEL_KERNEL][0],
            ramdisk=images[boot_files.LABEL_RAMDISK][0],
            kernel_modules=images.get(boot_files.LABEL_MODULES,
                                      (None,))[0])
        knobs = tuning.requested(node)
        _runtime, kernel_args = tuning.split(knobs)
        # (Claimed first: a deploy that fails from here on consumed it.)
        claim = warm.claim(task, warm.boot_identity(images, kernel_args))
        t_start = time.time()
        resolved = self._resolve(task, container)
        run_report.update(node, report,
                          image_digest=resolved[0].manifest_digest)

        node.set_driver_internal_info(deploy_record.KEY, {
            'deploy_id': report['deploy_id'],
            # url, digest, format and size come with the artifact.
            'stage_args': {
                'rootfs': container.rootfs,
                'measure_link': container.measure_link,
            },
            'tunables': knobs,
            'kernel_args': kernel_args,
            'stream_cache': stream_cache.for_container(node, container),
            'tunables_strict': container.tunables_strict,
            'results': container.results,
            'configdrive': drive_args,
            'kernel_profile': container.kernel_profile,
        })
        if group:
            group_barrier.join(task, group, report['deploy_id'],
                               group_port)
        up = node_boot.bring_up(task, report, kernel_args, claim)
        unavailable = energy.start(node)
        if unavailable:
            run_report.update(node, report, energy=unavailable)
        # Early boot: the node boots while the artifact is built (saved
        # as the step returns).
        rootfs_build.start(task, container, resolved, t_start)
        if up:
            # As Ironic's agent deploy does under fast track: the agent's
            # steps are read now, and the next step runs in this call.
            self.refresh_steps(task, 'deploy')
            deployments.validate_deploy_steps(task)
            return None
        return states.DEPLOYWAIT

    def _resolve(self, task, container):
        try:
            if container.rootfs == protocol.ROOTFS_NFS:
                rootfs.check_nfs_server()
            return rootfs.resolve(task.node, container)
        except Exception as exc:
            # Nothing is staged or powered yet.
            raise exception.InstanceDeployFailure(
                _('Cannot deploy container image %(image)s: %(err)s')
                % {'image': container.image, 'err': exc})

    def _group(self, task, container, server):
        """The run group the deploy joins (instance_info's, else the
        Nova server's properties) and the node's port on the group
        network; ``(None, None)`` outside a group."""
        try:
            group = container.group or group_info.from_server(task.node,
                                                              server)
            return group, group_info.network_port(task) if group else None
        except exception.IronicException as exc:
            raise exception.InstanceDeployFailure(str(exc)) from None

    def _configdrive(self, task):
        try:
            return configdrive.prepare(task)
        except exception.InvalidParameterValue as exc:
            raise exception.InstanceDeployFailure(str(exc)) from None

    def _execute_in_band(self, task, args):
        node = task.node
        info = node.driver_internal_info[deploy_record.KEY]
        if (boot_report.SENT_KEY not in info
                and node.deploy_step.get('step') in BOOT_TIMES_STEPS):
            # The first in-band step also reads the node's boot marks
            # (the report's boot section); when it was sent places them.
            args = dict(args, boot_times=True)
            info[boot_report.SENT_KEY] = time.time()
            node.set_driver_internal_info(deploy_record.KEY, info)
        step = dict(node.deploy_step, args=args)
        agent_calls.bound_ironic_client(task)
        return agent_base.execute_step(task, step, 'deploy')

    def _agent_up(self, task):
        """Record agent-up once, at the first step the agent runs."""
        node = task.node
        report = run_report.get(node)
        if not any(s['name'] == protocol.STAGE_AGENT_UP
                   for s in report['stages']):
            info = deploy_record.update(node, **{
                boot_report.HEARTBEAT_KEY: boot_report.heartbeat_time(node)})
            run_report.add_stage(
                node, report, protocol.STAGE_AGENT_UP, info['powered_on'],
                time.time())

    @METRICS.timer('ContainerDeploy.bmc_apply_tunables')
    @base.deploy_step(priority=85, argsinfo=TUNABLES_ARGSINFO)
    @run_report.written_once
    def bmc_apply_tunables(self, task, tunables=None):
        """Have the agent apply (and read back) the kernel tunables.

        Deploy templates select it with arguments, e.g. a flavor trait
        ``CUSTOM_BMC_TUNABLES_THP_NEVER`` mapped to ``{"tunables":
        "thp-never"}`` (see ironic_bmc.deploy_templates).
        """
        self._agent_up(task)
        node = task.node
        knobs = tuning.requested(node, step_args=tunables)
        service_steps.noise_probe(task, 'before-tunables')
        if not knobs:
            return None
        args = {'tunables': knobs}
        if node.driver_internal_info[deploy_record.KEY].get('tunables_strict'):
            # The agent fails the step naming each knob that did not apply.
            args['strict'] = True
        return self._execute_in_band(task, args)

    @METRICS.timer('ContainerDeploy.bmc_stage_rootfs')
    @base.deploy_step(priority=80)
    @run_report.written_once
    def bmc_stage_rootfs(self, task):
        """Have the agent stage the rootfs artifact in RAM."""
        self._agent_up(task)
        node = task.node
        info = node.driver_internal_info[deploy_record.KEY]
        if info.get('tunables') and not info.get('probed_after_tunables'):
            service_steps.noise_probe(task, 'after-tunables')
            # Once, also when the step runs again after waiting.
            deploy_record.update(node, probed_after_tunables=True)
            node.save()
        if (rootfs_build.orphaned(node) and rootfs_build.builder_gone(task)
                and not rootfs_build.restart(task)):
            return None     # the deploy failed
        if rootfs_build.state(node) == rootfs_build.BUILDING:
            return rootfs_build.wait(task)
        args = dict(info['stage_args'])
        if args.get('rootfs') == protocol.ROOTFS_NFS:
            # The node's agent is up: its address may mount the export.
            rootfs.sync_exports(task.context)
        if info.get(rootfs_build.URL_KEY):
            args['url'] = info[rootfs_build.URL_KEY]
            if args.get('verity'):
                args['verity'] = dict(
                    args['verity'],
                    url=args['url'] + boot_files.VERITY_SUFFIX)
        return self._execute_in_band(task, args)

    @METRICS.timer('ContainerDeploy.bmc_group_barrier')
    @base.deploy_step(priority=75)
    @run_report.written_once
    def bmc_group_barrier(self, task):
        """A run group's member waits here until every member has staged
        its root; then all start (a no-op outside a group)."""
        return group_barrier.arrive(task)

    @METRICS.timer('ContainerDeploy.bmc_start_workload')
    @base.deploy_step(priority=70)
    @run_report.written_once
    def bmc_start_workload(self, task):
        """Have the agent start the workload in the staged root."""
        node = task.node
        info = node.driver_internal_info[deploy_record.KEY]
        if info['stage_args'].get('rootfs') == protocol.ROOTFS_RAMFS:
            # The node holds the whole rootfs now: its URL is no longer
            # needed by anyone, so it stops existing.
            boot_files.unpublish_artifact(task)
            info.pop(rootfs_build.URL_KEY, None)
            node.set_driver_internal_info(deploy_record.KEY, info)
        args = info['workload_args']
        drive = configdrive.step_arg(info.get('configdrive'))
        if drive:
            args = dict(args, configdrive=drive)
        if info.get('kernel_profile'):
            args = dict(args, kernel_profile=info['kernel_profile'])
        group = group_barrier.start_args(node)
        if group:
            args = dict(args, group=group)
        return self._execute_in_band(task, args)

    @METRICS.timer('ContainerDeploy.bmc_record_start')
    @base.deploy_step(priority=10)
    @run_report.written_once
    def bmc_record_start(self, task):
        """The workload runs: the node becomes ACTIVE."""
        node = task.node
        # The agent holds the configdrive now.
        configdrive.unpublish(task)
        agent_calls.remember(node)
        run_report.update(node, run_report.get(node),
                          state=protocol.RUN_RUNNING)
        # (Ironic saves the node as the deploy ends, before the first
        # check armed below reads it.)
        # Ironic forgets the agent's token once the deploy is over, and
        # refuses (and logs at ERROR) every heartbeat after; the periodic
        # poll watches the workload instead.
        try:
            agent_calls.call(task, protocol.STEP_QUIET_AGENT, timeout=30)
        except exception.IronicException as exc:
            LOG.warning('The agent of node %(node)s goes on heartbeating '
                        '(the conductor refuses each heartbeat): %(err)s',
                        {'node': node.uuid, 'err': exc})
        else:
            workload_watch.arm_soon(task.context, node.uuid,
                                    run_report.get(node)['deploy_id'])

    @METRICS.timer('ContainerDeploy.heartbeat')
    @run_report.written_once
    def heartbeat(self, task, callback_url, agent_version, *args,
                  **kwargs):
        """A heartbeat; from the agent next to a running workload, it
        means the workload ended (see workload_watch): look now."""
        node = task.node
        if node.provision_state == states.ACTIVE and run_report.get(node):
            workload_watch.on_heartbeat(task)
            return
        if (node.provision_state in (states.DEPLOYING, states.DEPLOYWAIT)
                and task.shared):
            # The agent heartbeats as soon as a step ends, which can be
            # before this conductor has let go of the lock it sent the
            # step under (the node still DEPLOYING), or the rootfs
            # builder of its own.  Ironic skips
            # a heartbeat on a locked node, and the deploy would then wait
            # for the agent's next one (IPA: 90-180 s later).  Wait for
            # the lock instead; the heartbeat runs in a worker of its own.
            agent_calls.wait_for_lock(task, CONF.container.heartbeat_lock_wait)
            if (not task.shared and not task.node.driver_internal_info.get(
                    'agent_secret_token')):
                # Its token was checked before the wait, and is gone now:
                # the agent was rebooted meanwhile (a kexec, a power
                # action).  Its agent_url must not be recorded.
                LOG.info('Ignoring a heartbeat of node %s from an agent '
                         'rebooted while it waited for the lock', node.uuid)
                return
        # What Ironic reads of the agent now (the steps' results) is
        # bounded as our own calls are.
        agent_calls.bound_ironic_client(task)
        return super().heartbeat(task, callback_url, agent_version, *args,
                                 **kwargs)

    # --- tear down (see run_close) -----------------------------------------

    @METRICS.timer('ContainerDeploy.tear_down')
    @run_report.written_once
    def tear_down(self, task):
        """Power off and unconfigure networks; the run is closed already
        (by clean_up) unless another caller skipped it."""
        run_close.close(task)
        result = super().tear_down(task)
        energy.stop(task.node)
        return result

    @METRICS.timer('ContainerDeploy.clean_up')
    @run_report.written_once
    def clean_up(self, task):
        """Close the run, remove staged files, release the cache entry."""
        node = task.node
        run_close.close(task)
        boot_files.clean_up(task)
        configdrive.unpublish(task)
        rootfs.release(node)
        warm.forget(node)
        # (While the group record is still there.)
        group_lifecycle.left(task)
        node.del_driver_internal_info(deploy_record.KEY)
        image_properties.forget(node)
        agent_calls.forget(node)
        energy.stop(node)
        if node.power_state != states.POWER_OFF:
            node_boot.power_off_keeping_error(task)
        task.driver.network.remove_provisioning_network(task)
        node.save()

    @METRICS.timer('ContainerDeploy.take_over')
    @run_report.written_once
    def take_over(self, task):
        """This conductor takes over an ACTIVE node (local_state)."""
        local_state.take_over(task)
