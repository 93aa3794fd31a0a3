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

"""How a container deploy gets its agent up: reused, kexec'd or booted.

:func:`warm.claim` decides; this carries it out and records it in the run
report (``warm``, ``agent_up_for_s``, ``cold_reason``, ``kexec``) and in
the deploy's ``driver_internal_info`` (``powered_on``: where agent-up is
measured from; ``boot_kind``).
"""

import time

from ironic.common import exception
from ironic.common import states
from ironic.conductor import utils as manager_utils
from ironic.drivers.modules import deploy_utils
from oslo_log import log

from bmc_common import protocol
from ironic_bmc import deploy_record
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import boot_report
from ironic_bmc.drivers import kexec_boot
from ironic_bmc.drivers import warm
from ironic_bmc import report as run_report

LOG = log.getLogger(__name__)

#: What the report keeps of ``bmc_kexec_load``'s reply (the protocol's).
KEXEC_FIELDS = ('method', 'download_s', 'load_s', 'initrd_bytes')


def _mark(node, started, kind):
    info = node.driver_internal_info[deploy_record.KEY]
    info['powered_on'] = started
    info[boot_report.KIND_KEY] = kind
    if kind == warm.WARM:
        # No boot to report: the node's boot marks are the old boot's.
        info[boot_report.SENT_KEY] = None
    node.set_driver_internal_info(deploy_record.KEY, info)


def bring_up(task, report, kernel_args, claim):
    """Reuse, kexec or boot, as ``claim`` says (kexec falls back to a
    boot).

    :returns: True when the agent is up already (warm): the deploy goes
        on in this call.
    """
    node = task.node
    if claim.mode == warm.WARM:
        LOG.info('Warm container deploy of node %(node)s: the agent has '
                 'been up for %(up).0f s',
                 {'node': node.uuid, 'up': claim.agent_up_for_s})
        run_report.update(node, report, warm=True,
                          agent_up_for_s=claim.agent_up_for_s)
        _mark(node, time.time(), warm.WARM)
        return True
    # (The iPXE script too: a kexec that fails boots it.  The boot device
    # is set only for a firmware boot: two IPMI commands, 1 to 2 s.)
    kexec = claim.mode == warm.KEXEC
    staged = boot_files.prepare(task, deploy_utils.build_agent_options(node),
                                extra_kernel_args=kernel_args,
                                pxe_boot=not kexec)
    reason = claim.reason
    if kexec:
        started = time.time()
        try:
            loaded = kexec_boot.kexec(task, *staged)
        except exception.IronicException as exc:
            LOG.warning('kexec on node %(node)s failed, booting it through '
                        'its firmware instead: %(err)s',
                        {'node': node.uuid, 'err': exc})
            reason = '%s; kexec failed: %s' % (reason, exc)
            boot_files.set_pxe_boot(task)
        else:
            LOG.info('Container deploy of node %(node)s: the agent up for '
                     '%(up).0f s kexecs into the run\'s boot (%(why)s)',
                     {'node': node.uuid, 'up': claim.agent_up_for_s,
                      'why': reason})
            # Only the protocol's fields of the agent's reply are kept.
            run_report.update(node, report, warm=False, cold_reason=reason,
                              agent_up_for_s=claim.agent_up_for_s,
                              kexec={k: loaded.get(k) for k in KEXEC_FIELDS})
            run_report.add_stage(node, report, protocol.STAGE_KEXEC,
                                 started, time.time())
            _mark(node, started, warm.KEXEC)
            return False
    run_report.update(node, report, warm=False, cold_reason=reason)
    started = time.time()
    # On with an agent that is not reused (warm.claim): a reboot.
    manager_utils.node_power_action(
        task, states.REBOOT if node.power_state == states.POWER_ON
        else states.POWER_ON)
    run_report.add_stage(node, report, protocol.STAGE_POWER_ON, started,
                         time.time())
    _mark(node, started, warm.COLD)
    return False


def power_off_keeping_error(task):
    """Power the node off, its ``last_error`` kept.

    Ironic's power action clears ``last_error`` unless the node is in a
    failure state, and a failed deploy's clean-up runs before the node
    becomes DEPLOYFAIL: the reason Ironic's error handler just recorded
    would be gone (Nova then reports "Failed to provision instance ...:
    None").  Seen when a deploy failed on a node that fast track had left
    powered on.
    """
    node = task.node
    error = node.last_error
    manager_utils.node_power_action(task, states.POWER_OFF)
    if error and not node.last_error:
        node.last_error = error
        node.save()
