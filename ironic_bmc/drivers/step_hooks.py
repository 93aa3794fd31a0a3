
"""What the conductor keeps of the agent's in-band step results.

Ironic stores no step return values; these post-deploy-step hooks copy
what the run report needs (stages timed on the node, tunables read back,
staging timings) as each in-band step of a container deploy succeeds.

The hooks change the node and leave its saving to Ironic, which saves it
as the deploy resumes after a hook (or as it fails, if a hook raised):
one database write per step less, on the path every deploy takes.
"""

import time

from ironic.drivers.modules import agent_base

from bmc_common import protocol
from ironic_bmc import deploy_record
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import boot_http_log
from ironic_bmc.drivers import boot_report
from ironic_bmc.drivers import configdrive
from ironic_bmc.drivers import stream_report
from ironic_bmc import report as run_report



def _result(task, command):
    """(node, report, step result) with the node's stages recorded."""
    node = task.node
    result = command['command_result'].get('deploy_result') or {}
    report = run_report.get(node)
    for stage in result.get('stages', []):
        run_report.add_stage(node, report, stage['name'], stage['start'],
                             stage['end'])
    if result.get('boot_times') and 'boot' not in report:
        _boot(node, report, result['boot_times'])
    return node, report, result


def _boot(node, report, times):
    info = deploy_record.get(node)
    agent_up = next((s for s in report['stages']
                     if s['name'] == protocol.STAGE_AGENT_UP), None)
    sent = info.get(boot_report.SENT_KEY)
    if not agent_up or not sent:
        return
    kexec = info.get(boot_report.KIND_KEY) == boot_report.KIND_KEXEC
    boot = boot_report.breakdown(
        agent_up['start'], agent_up['end'], sent, times,
        first_heartbeat=info.get(boot_report.HEARTBEAT_KEY), kexec=kexec)
    kernel_start = (boot.get('marks') or {}).get('kernel_start')
    if CONF.container.boot_http_log and kernel_start and not kexec:
        boot['http'] = boot_http_log.split(
            CONF.container.boot_http_log, node.uuid, agent_up['start'],
            kernel_start)
    run_report.update(node, report, boot=boot)


@agent_base.post_deploy_step_hook(interface='deploy',
                                  step=protocol.STEP_APPLY_TUNABLES)
@run_report.written_once
def after_apply_tunables(task, command):
    node, report, result = _result(task, command)
    run_report.update(
        node, report, tunables=result.get('tunables') or {},
        kernel_args=node.driver_internal_info[deploy_record.KEY]['kernel_args'])


@agent_base.post_deploy_step_hook(interface='deploy',
                                  step=protocol.STEP_STAGE_ROOTFS)
@run_report.written_once
def after_stage_rootfs(task, command):
    node, report, result = _result(task, command)
    timings = result.get('timings') or {}
    staging = {
        'rootfs': result.get('rootfs'),
        # How the root's content is checked: sha256 of the whole artifact
        # before mounting, or dm-verity block by block when read.
        'verify': result.get('verify'),
        'bytes': result.get('bytes'),
        # What crossed the wire before the workload could start.
        'bytes_before_start': result.get('bytes'),
        'download_s': timings.get('download'),
        'mount_s': timings.get('mount'),
        'hash_s': timings.get('hash'),
        'write_s': timings.get('write'),
        'raw_transfer_s': timings.get('raw_transfer'),
    }
    nfs = result.get('nfs')
    if nfs:
        staging['nfs_export'] = nfs.get('export')
        staging['nfs_mount_s'] = nfs.get('mount')
    run_report.update(node, report, staging=staging)
    stream_report.start(node, report, result)


@agent_base.post_deploy_step_hook(interface='deploy',
                                  step=protocol.STEP_START_WORKLOAD)
@run_report.written_once
def after_start_workload(task, command):
    node = task.node
    result = command['command_result'].get('deploy_result') or {}
    report = run_report.get(node)
    started = result.get('started') or time.time()
    stages = {s['name']: s for s in report['stages']}
    begin = stages.get(protocol.STAGE_ROOTFS_STAGED, {}).get('end', started)
    run_report.add_stage(node, report, protocol.STAGE_WORKLOAD_STARTED,
                         begin, started)
    section = report.get('configdrive')
    if section and section.get('used') and 'configdrive' in result:
        run_report.update(node, report, configdrive=dict(
            section, node=configdrive.node_facts(result['configdrive'])))
    partitions = result.get('partitions')
    if partitions:
        run_report.update(node, report, tunables=with_partitions(
            report.get('tunables') or {}, partitions))


def with_partitions(tunables, partitions):
    """The tunables section with the NodeOS partitions as the agent read
    them back once the workload ran: each partition knob gains
    ``at_start``, and is ``ok`` only if it still held then.  When they
    could not be read (``error``), or the job ended first (``ended``),
    ``at_start`` says so and ``ok`` is as applied."""
    out = dict(tunables)
    if partitions.get('error') or partitions.get('ended'):
        for name in ('housekeeping_cpus', 'workload_cpus'):
            if name in out:
                out[name] = dict(out[name], at_start=partitions)
        return out
    for name, back in partitions.items():
        if name not in out or not isinstance(back, dict):
            continue
        knob = dict(out[name], at_start=back)
        if not back.get('ok'):
            knob['ok'] = False
            knob['error'] = '; '.join(e for e in (
                knob.get('error'), 'at the start: %s' % back.get(
                    'error', 'not read back')) if e)
        out[name] = knob
    return out
