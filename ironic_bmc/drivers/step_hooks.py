
"""What the conductor keeps of the agent's in-band step results.

Ironic stores no step return values; these post-deploy-step hooks copy
what the run report needs (stages timed on the node, tunables read back,
staging timings) as each in-band step of a container deploy succeeds.
"""

import time

from ironic.drivers.modules import agent_base

from bmc_common import protocol
from ironic_bmc.drivers import stream_report
from ironic_bmc import report as run_report

#: driver_internal_info key of the container deploy (see container_deploy).
DEPLOY_KEY = 'bmc_deploy'


def _result(task, command):
    """(node, report, step result) with the node's stages recorded."""
    node = task.node
    result = command['command_result'].get('deploy_result') or {}
    report = run_report.get(node)
    for stage in result.get('stages', []):
        run_report.add_stage(node, report, stage['name'], stage['start'],
                             stage['end'])
    return node, report, result


@agent_base.post_deploy_step_hook(interface='deploy',
                                  step=protocol.STEP_APPLY_TUNABLES)
def after_apply_tunables(task, command):
    node, report, result = _result(task, command)
    run_report.update(
        node, report, tunables=result.get('tunables') or {},
        kernel_args=node.driver_internal_info[DEPLOY_KEY]['kernel_args'])
    node.save()


@agent_base.post_deploy_step_hook(interface='deploy',
                                  step=protocol.STEP_STAGE_ROOTFS)
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
    node.save()


@agent_base.post_deploy_step_hook(interface='deploy',
                                  step=protocol.STEP_START_WORKLOAD)
def after_start_workload(task, command):
    node = task.node
    result = command['command_result'].get('deploy_result') or {}
    report = run_report.get(node)
    started = result.get('started') or time.time()
    stages = {s['name']: s for s in report['stages']}
    begin = stages.get(protocol.STAGE_ROOTFS_STAGED, {}).get('end', started)
    run_report.add_stage(node, report, protocol.STAGE_WORKLOAD_STARTED,
                         begin, started)
    node.save()
