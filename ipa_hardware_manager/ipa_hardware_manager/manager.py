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

"""The ironic-python-agent hardware manager of Bare-Metal Container.

Registered under the ``ironic_python_agent.hardware_managers`` entry point
group as ``bmc_container``.  IPA 13 ships its own ``container`` entry point
and its own ``ContainerHardwareManager`` class (podman-based clean steps):
IPA keys the results of ``get_deploy_steps`` and the manager versions by
class name and ``HARDWARE_MANAGER_NAME``, so ours must be named apart.

It offers the in-band steps of ``bmc_common.protocol`` as deploy steps
(priority 0: only run when the conductor asks for them) and, with the same
code, as service steps, so the conductor can query or stop the workload of
an ACTIVE node.
"""

from ironic_python_agent import agent as ipa_agent
from ironic_python_agent import errors, hardware
from oslo_log import log

from ipa_hardware_manager import agent_quiet
from ipa_hardware_manager import boot_times as node_boot
from ipa_hardware_manager import configdrive as drive
from ipa_hardware_manager import group as run_group
from ipa_hardware_manager import kernel_profile as kprofile
from ipa_hardware_manager import kexec
from ipa_hardware_manager import rootfs as staging
from ipa_hardware_manager import rootfs_download
from ipa_hardware_manager import rootfs_stream
from ipa_hardware_manager import rootfs_verity
from ipa_hardware_manager import step_args
from ipa_hardware_manager import steps_tunables
from ipa_hardware_manager import workload
from ipa_hardware_manager import workload_args
from ipa_hardware_manager import workload_output
from bmc_common import protocol

LOG = log.getLogger(__name__)

def _step(name, argsinfo=None):
    step = {'step': name, 'priority': 0, 'interface': 'deploy',
            'reboot_requested': False, 'abortable': False}
    if argsinfo:
        step['argsinfo'] = argsinfo
    return step


class BmcContainerHardwareManager(hardware.HardwareManager):
    """Stage a container rootfs in RAM and run its workload."""

    HARDWARE_MANAGER_NAME = 'BmcContainerHardwareManager'
    HARDWARE_MANAGER_VERSION = '1.1'

    def __init__(self):
        super().__init__()
        self._supervisor = None

    def evaluate_hardware_support(self):
        # Every machine can run a container; nothing to detect.  The level
        # only orders dispatch: this manager implements no inventory
        # method, so those still reach the generic manager.  A pure probe,
        # as IPA expects: it may ask at any time.
        return hardware.HardwareSupport.SERVICE_PROVIDER

    def initialize(self):
        """Once per agent, when IPA caches its managers: before the lookup,
        so before IPA builds its heartbeat thread, whose first wait (5 s
        after the lookup's heartbeat) would delay the end of the first
        step of every deploy (agent_quiet.prompt_heartbeats)."""
        agent_quiet.prompt_heartbeats(ipa_agent.IronicPythonAgentHeartbeater)

    @property
    def supervisor(self):
        if self._supervisor is None:
            self._supervisor = workload.Supervisor()
        return self._supervisor

    def _steps(self):
        args = step_args
        return [
            _step(protocol.STEP_STAGE_ROOTFS, args.STAGE_ROOTFS_ARGSINFO),
            _step(protocol.STEP_START_WORKLOAD,
                  args.START_WORKLOAD_ARGSINFO),
            _step(protocol.STEP_WORKLOAD_STATUS),
            _step(protocol.STEP_STOP_WORKLOAD, args.STOP_WORKLOAD_ARGSINFO),
            _step(protocol.STEP_COLLECT_OUTPUT, args.COLLECT_OUTPUT_ARGSINFO),
            _step(protocol.STEP_COLLECT_KERNEL_PROFILE,
                  args.COLLECT_KERNEL_PROFILE_ARGSINFO),
            _step(protocol.STEP_QUIET_AGENT),
            _step(protocol.STEP_KEXEC_LOAD, args.KEXEC_LOAD_ARGSINFO),
            _step(protocol.STEP_KEXEC_EXEC),
            _step(protocol.STEP_APPLY_TUNABLES,
                  steps_tunables.APPLY_TUNABLES_ARGSINFO),
            _step(protocol.STEP_NOISE_PROBE,
                  steps_tunables.NOISE_PROBE_ARGSINFO),
        ]

    def get_deploy_steps(self, node, ports):
        return self._steps()

    def get_service_steps(self, node, ports):
        return self._steps()

    # -- steps -------------------------------------------------------------

    def bmc_stage_rootfs(self, node, ports, url=None, digest=None,
                         format=None, size=None,
                         rootfs=protocol.ROOTFS_RAMFS, measure_link=False,
                         nfs=None, verity=None, stream=None,
                         boot_times=False, **kwargs):
        """Download, verify and mount the rootfs (protocol step)."""
        times = _boot_times(boot_times)
        if self.supervisor.status()['state'] == protocol.WORKLOAD_RUNNING:
            raise errors.DeploymentError(
                '%s: a workload is running; stop it before staging a new '
                'rootfs' % protocol.STEP_STAGE_ROOTFS)
        try:
            staging.validate(url, digest, format, size, rootfs, nfs, verity,
                             stream)
            current = staging.load()
            if current:
                LOG.info('Replacing the rootfs staged before (%s)',
                         current.get('digest'))
                staging.teardown()
            raw = (rootfs_download.measure_raw_transfer(url)
                   if measure_link and url else None)
            result = staging.Staging().stage(url, digest, format, size,
                                             rootfs, nfs, verity, stream)
            if raw:
                result['timings']['raw_transfer'] = raw[0]
            if times:
                result['boot_times'] = times
            return result
        except (staging.StagingError, rootfs_download.DownloadError) as exc:
            raise errors.DeploymentError(
                '%s: %s' % (protocol.STEP_STAGE_ROOTFS, exc)) from exc

    def _idle(self):
        """Refuse to touch what a running workload uses."""
        if self.supervisor.status()['state'] == protocol.WORKLOAD_RUNNING:
            raise workload.WorkloadError('a workload is running; stop it '
                                         'first')

    def bmc_start_workload(self, node, ports, command=None, env=None,
                           workdir=None, user=None,
                           mode=protocol.MODE_JOB, stop_signal=None,
                           walltime=None, privileged=True, rlimits=None,
                           stop_grace=workload.DEFAULT_GRACE,
                           output_max=workload.DEFAULT_OUTPUT_MAX,
                           configdrive=None, kernel_profile=None,
                           group=None, **kwargs):
        """Start the workload in the staged root (protocol step)."""
        staged = staging.load()
        given = None
        profiled = None
        member = ready = None
        extra = {}
        try:
            if not staged:
                raise workload.WorkloadError('no rootfs staged: run %s first'
                                             % protocol.STEP_STAGE_ROOTFS)
            if kernel_profile not in (None,) + protocol.KERNEL_PROFILES:
                raise workload.WorkloadError(
                    'kernel_profile must be one of %s, got %r' % (
                        ', '.join(protocol.KERNEL_PROFILES), kernel_profile))
            if group is not None:
                member = run_group.validate(group)
                # Rank 0 may wait for its peers: not for a start that
                # its own arguments would fail afterwards.
                workload_args.validate(command, env, workdir, mode,
                                       stop_signal, walltime, privileged,
                                       stop_grace, output_max)
            mounts = []
            if configdrive is not None:
                self._idle()
                try:
                    files, given = drive.prepare(configdrive, staged['root'])
                except drive.ConfigDriveError as exc:
                    raise workload.WorkloadError(str(exc)) from None
                mounts.append(drive.mount(files))
            if member is not None:
                self._idle()
                member.check_image(staged['root'], user, privileged)
                member.setup(staged['root'], privileged)
                extra = {'group': member}
                # Before the kernel profile's reset: the wait is no part
                # of the workload.
                ready = member.wait_for_peers()
            if kernel_profile:
                self._idle()
                try:
                    profiled = kernel_profile_reset()
                except kprofile.KernelProfileError as exc:
                    raise workload.WorkloadError(str(exc)) from None
            result = self.supervisor.start(
                staged['root'], command, env=env, workdir=workdir,
                user=user, mode=mode, stop_signal=stop_signal,
                walltime=walltime, privileged=privileged, rlimits=rlimits,
                stop_grace=stop_grace, output_max=output_max,
                mounts=mounts, **extra)
        except workload.WorkloadError as exc:
            # (A group.GroupError is one.)
            problem = rootfs_verity.integrity_problem()
            raise errors.DeploymentError('%s: %s%s' % (
                protocol.STEP_START_WORKLOAD, exc,
                '; ' + problem if problem else '')) from exc
        if given:
            result['configdrive'] = given
        if member is not None:
            result['group'] = member.result(ready)
        if profiled:
            result['kernel_profile'] = {'reset': round(profiled, 3)}
        partitions = steps_tunables.partitions_at_start(
            result.get('container_pid'))
        if partitions:
            result['partitions'] = partitions
        return result

    def bmc_workload_status(self, node, ports, notify_exit=False, **kwargs):
        """Report the workload state (protocol step); a workload that
        failed on a corrupted rootfs block says so in ``integrity``.

        ``notify_exit``: the conductor accepts this agent's heartbeats
        again; one is sent when the workload ends on its own, so that the
        conductor need not wait for its next poll.
        """
        # Each poll's result is read once, when it returns.
        agent_quiet.forget_status_results()
        if notify_exit:
            self.supervisor.exit_hook = agent_quiet.heartbeat_now
        status = self.supervisor.status()
        stream = rootfs_stream.progress(staging.BASE)
        if stream is not None:
            status['stream'] = stream
        if (status['state'] == protocol.WORKLOAD_EXITED
                and status.get('exit_code')):
            problem = rootfs_verity.integrity_problem()
            if problem:
                status['integrity'] = problem
        return status

    def bmc_stop_workload(self, node, ports, grace=workload.DEFAULT_GRACE,
                          reason=protocol.STOP_REQUEST, **kwargs):
        """Stop the workload: its StopSignal, then SIGKILL to its cgroup
        (protocol step)."""
        if reason not in protocol.STOP_REASONS:
            raise errors.DeploymentError(
                '%s: unknown reason %r (known: %s)' % (
                    protocol.STEP_STOP_WORKLOAD, reason,
                    ', '.join(protocol.STOP_REASONS)))
        try:
            return self.supervisor.stop(grace, reason=reason)
        except workload.WorkloadError as exc:
            raise errors.DeploymentError(
                '%s: %s' % (protocol.STEP_STOP_WORKLOAD, exc)) from exc

    def bmc_kexec_load(self, node, ports, kernel=None, initrds=None,
                       cmdline=None, **kwargs):
        """Download and load a kernel for kexec (protocol step).

        No prompt heartbeat when it ends (the conductor waits for its
        result itself, and the agent is about to be replaced)."""
        if self.supervisor.status()['state'] == protocol.WORKLOAD_RUNNING:
            raise errors.DeploymentError(
                '%s: a workload is running; a warm agent never kexecs '
                'next to one' % protocol.STEP_KEXEC_LOAD)
        try:
            return kexec.load(kernel, initrds, cmdline)
        except kexec.KexecError as exc:
            raise errors.DeploymentError(
                '%s: %s' % (protocol.STEP_KEXEC_LOAD, exc))

    def bmc_kexec_exec(self, node, ports, **kwargs):
        """Stop heartbeating, answer, then jump into the loaded kernel
        (protocol step)."""
        try:
            result = kexec.exec_soon()
        except kexec.KexecError as exc:
            raise errors.DeploymentError(
                '%s: %s' % (protocol.STEP_KEXEC_EXEC, exc))
        # The conductor forgets this agent's token: no more heartbeats.
        agent_quiet.stop_heartbeats()
        return result

    def bmc_quiet_agent(self, node, ports, **kwargs):
        """The deploy is over: no more heartbeats (protocol step)."""
        stopped = agent_quiet.stop_heartbeats()
        return {'heartbeats': 'stopped' if stopped else 'none'}

    def bmc_collect_output(self, node, ports, results=None,
                           max_bytes=workload.DEFAULT_OUTPUT_MAX, **kwargs):
        """Return the workload's kept output and its result files
        (protocol step); refused while it runs."""
        name = protocol.STEP_COLLECT_OUTPUT
        status = self.supervisor.status()
        if status['state'] == protocol.WORKLOAD_RUNNING:
            raise errors.DeploymentError(
                '%s: the workload is running; its output and results are '
                'collected once it has exited' % name)
        if status['state'] == protocol.WORKLOAD_ABSENT:
            raise errors.DeploymentError('%s: no workload ran here' % name)
        if (not isinstance(results, (list, type(None)))
                or not all(isinstance(p, str) and p.startswith('/')
                           for p in results or ())):
            raise errors.DeploymentError(
                '%s: results must be a list of absolute paths, got %r'
                % (name, results))
        if (not isinstance(max_bytes, int) or isinstance(max_bytes, bool)
                or max_bytes < 0):
            raise errors.DeploymentError(
                '%s: max_bytes must be a number of bytes, got %r'
                % (name, max_bytes))
        staged = staging.load()
        found = {}
        if results:
            if not staged:
                found = {p: {'error': 'the rootfs is no longer staged'}
                         for p in results}
            else:
                found = workload_output.results(staged['root'], results,
                                                max_bytes)
        return {'output': workload_output.output(
            self.supervisor.state_dir), 'results': found}

    def bmc_collect_kernel_profile(self, node, ports, max_bytes=None,
                                   **kwargs):
        """Return the kernel's gcov counters (protocol step); refused
        while the workload runs."""
        name = protocol.STEP_COLLECT_KERNEL_PROFILE
        if self.supervisor.status()['state'] == protocol.WORKLOAD_RUNNING:
            raise errors.DeploymentError(
                '%s: the workload is running; the profile is read once it '
                'has exited' % name)
        if (not isinstance(max_bytes, int) or isinstance(max_bytes, bool)
                or max_bytes <= 0):
            raise errors.DeploymentError(
                '%s: max_bytes must be a number of bytes, got %r'
                % (name, max_bytes))
        try:
            return kprofile.collect(max_bytes)
        except (kprofile.KernelProfileError, OSError) as exc:
            raise errors.DeploymentError('%s: %s' % (name, exc)) from exc

    def bmc_apply_tunables(self, node, ports, tunables=None, strict=False,
                           boot_times=False, **kwargs):
        """Apply run-time tunables, verify boot-time ones (protocol step)."""
        times = _boot_times(boot_times)
        result = steps_tunables.bmc_apply_tunables(node, ports, tunables,
                                                   strict=strict)
        if times:
            result['boot_times'] = times
        return result

    def bmc_noise_probe(self, node, ports, cpus=None, duration=None,
                        threshold_us=None, **kwargs):
        """Measure OS noise on each CPU (protocol step)."""
        if self.supervisor.status()['state'] == protocol.WORKLOAD_RUNNING:
            raise errors.DeploymentError(
                '%s: a workload is running; the probe would compete with it '
                'for the CPUs' % protocol.STEP_NOISE_PROBE)
        return steps_tunables.bmc_noise_probe(
            node, ports, cpus=cpus, duration=duration,
            threshold_us=threshold_us)


def kernel_profile_reset():
    """Reset the kernel's gcov counters (a function: tests replace it)."""
    return kprofile.reset()


def _boot_times(wanted):
    """The node's boot marks when the conductor asks for them (with the
    first in-band step it sends), read as the step begins."""
    if not wanted:
        return None
    try:
        return node_boot.collect()
    except Exception:
        LOG.exception('Could not read the boot times')
        return None


#: Alias for the name the design used first; the class name stays unique.
ContainerHardwareManager = BmcContainerHardwareManager
