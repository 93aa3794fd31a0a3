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

"""Warm nodes: a deploy that reuses the agent cleaning left running.

With Ironic's fast track (``[deploy]fast_track`` or the node's
``driver_info/fast_track``), cleaning leaves the agent up in AVAILABLE.
A container deploy then skips the power cycle and the boot (firmware,
iPXE, kernel, the agent's start) and goes straight to the tunables,
staging and start of the workload, when it is safe and the same:

* **Safe**: the agent was booted by this deploy interface for cleaning
  (:func:`booting_for_cleaning`), and it is still that boot's agent.
  Ironic issues a new agent token at the lookup of every boot and
  forgets it at every power action; :func:`bind` records a digest of the
  token when cleaning ends, and :func:`claim` compares it.  A workload
  never ran on that boot: every deploy consumes the mark (warm or cold),
  and the mark is only made again by a cleaning that rebooted the node.
  A pre-generated token (virtual media) survives power actions: such a
  node is never warm; nor is a Wake-on-LAN node, whose power-off is the
  agent's word (:func:`power_proven`).  Cleaning boots the operator's
  agent files only (``boot_files.boot_images(agent_only=True)``), so the
  agent a mark binds is always the operator's.
* **The same**: the run's kernel, agent ramdisk, modules initrd and
  boot-time kernel arguments are those the agent was booted with.  When
  they differ, the safe agent kexecs into the run's (:mod:`kexec_boot`).

Otherwise the deploy is cold, and the report says why not warm.
"""

import dataclasses
import hashlib
import time

from ironic.common import states
from ironic.conductor import utils as manager_utils
from ironic.common import utils as ironic_utils
from oslo_log import log

from ironic_bmc.conf import CONF

from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import boot_report
from ironic_bmc.drivers import wol_power

LOG = log.getLogger(__name__)

#: driver_internal_info key: the agent cleaning booted, see module doc.
KEY = 'bmc_warm_agent'


def boot_identity(images, kernel_args=()):
    """What a container deploy boots: kernel, agent ramdisk, modules
    initrd (hrefs, from :func:`boot_files.boot_images`) and the added
    kernel arguments."""
    return {
        'kernel': images[boot_files.LABEL_KERNEL][0],
        'ramdisk': images[boot_files.LABEL_RAMDISK][0],
        'modules': images.get(boot_files.LABEL_MODULES, (None,))[0],
        'kernel_args': list(kernel_args),
    }


def _token_digest(node):
    token = node.driver_internal_info.get('agent_secret_token')
    if not token:
        return None
    return hashlib.sha256(token.encode()).hexdigest()


def booting_for_cleaning(task):
    """Cleaning reboots the node into the agent with these boot files."""
    node = task.node
    node.set_driver_internal_info(KEY, {
        'boot': boot_identity(boot_files.boot_images(task,
                                                     agent_only=True)),
        'booted_at': round(time.time(), 3),
    })


def bind(task):
    """Cleaning ends with the agent left up (fast track): tie the mark to
    that agent's token.  Without a mark of this cleaning's boot (a
    cleaning that reused an agent nobody marked), nothing is bound."""
    node = task.node
    mark = node.driver_internal_info.get(KEY)
    digest = _token_digest(node)
    if (not mark or not digest
            or node.driver_internal_info.get(
                'agent_secret_token_pregenerated')
            or not power_proven(task)):
        node.del_driver_internal_info(KEY)
        return
    if mark.get('token_sha256') not in (None, digest):
        # Another boot than the one marked (a reboot nobody marked).
        node.del_driver_internal_info(KEY)
        return
    mark['token_sha256'] = digest
    node.set_driver_internal_info(KEY, mark)


def power_proven(task):
    """Whether a power-off of the node is the BMC's word.  A Wake-on-LAN
    node's "off" means its agent stopped answering, which a workload can
    fake: the agent that answers next may be the previous run's code, so
    such a node is never warm."""
    return not isinstance(task.driver.power, wol_power.WakeOnLanPower)


def forget(node):
    node.del_driver_internal_info(KEY)


#: What :func:`claim` decides.
WARM = 'warm'
KEXEC = boot_report.KIND_KEXEC
COLD = 'cold'


@dataclasses.dataclass(frozen=True)
class Claim:
    """How a deploy boots: ``mode`` (WARM, KEXEC or COLD), how long the
    reused agent had been up, and why not warm (``reason``)."""

    mode: str
    agent_up_for_s: float = None
    reason: str = None


def claim(task, wanted):
    """Whether this deploy may use the agent that is up; consumes the mark.

    :param wanted: :func:`boot_identity` of this deploy.
    :returns: a :class:`Claim`: WARM when the agent runs what the deploy
        boots; KEXEC when it may be reused but boots something else (and
        ``[container]warm_kexec`` is on); otherwise COLD, with the reason.
    """
    node = task.node
    mark = node.del_driver_internal_info(KEY)
    if not ironic_utils.fast_track_enabled(node):
        return Claim(COLD, reason='fast track is off')
    if not power_proven(task):
        return Claim(COLD, reason='a Wake-on-LAN node is never warm (its '
                                  'power-off cannot be proven)')
    if not mark or not mark.get('token_sha256'):
        return Claim(COLD, reason='no agent booted by cleaning')
    if mark['token_sha256'] != _token_digest(node):
        return Claim(COLD,
                     reason='the agent was booted again since cleaning')
    if not manager_utils.is_fast_track(task):
        return Claim(COLD,
                     reason='the agent is not up (no recent heartbeat)')
    up_for = round(time.time() - mark['booted_at'], 3)
    if mark['boot'] == wanted:
        return Claim(WARM, agent_up_for_s=up_for)
    differs = sorted(k for k in wanted if wanted[k] != mark['boot'].get(k))
    reason = ('the run boots another %s than the agent up'
              % ', '.join(differs))
    if CONF.container.warm_kexec:
        return Claim(KEXEC, agent_up_for_s=up_for, reason=reason)
    return Claim(COLD, reason=reason)


def may_be_warm(task):
    """Cheap test for ``prepare``: a mark bound to the current token and
    fast track usable (no power-off then; ``claim`` decides)."""
    node = task.node
    mark = node.driver_internal_info.get(KEY) or {}
    return bool(power_proven(task) and mark.get('token_sha256')
                and mark['token_sha256'] == _token_digest(node)
                and node.power_state == states.POWER_ON
                and manager_utils.fast_track_able(task))
