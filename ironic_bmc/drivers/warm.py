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
  node is never warm.
* **The same**: the run's kernel, agent ramdisk, modules initrd and
  boot-time kernel arguments are those the agent was booted with.

Otherwise the deploy is cold, and the report says why not warm.
"""

import hashlib
import time

from ironic.common import states
from ironic.conductor import utils as manager_utils
from ironic.common import utils as ironic_utils
from oslo_log import log

from ironic_bmc.drivers import boot_files

LOG = log.getLogger(__name__)

#: driver_internal_info key: the agent cleaning booted, see module doc.
KEY = 'bmc_warm_agent'


def boot_identity(task, kernel_args=()):
    """What a container deploy of the node boots: kernel, agent ramdisk,
    modules initrd (hrefs) and the added kernel arguments."""
    images = boot_files.boot_images(task)
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
        'boot': boot_identity(task),
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
                'agent_secret_token_pregenerated')):
        node.del_driver_internal_info(KEY)
        return
    if mark.get('token_sha256') not in (None, digest):
        # Another boot than the one marked (a reboot nobody marked).
        node.del_driver_internal_info(KEY)
        return
    mark['token_sha256'] = digest
    node.set_driver_internal_info(KEY, mark)


def forget(node):
    node.del_driver_internal_info(KEY)


def claim(task, wanted):
    """Whether this deploy may use the agent that is up; consumes the mark.

    :param wanted: :func:`boot_identity` of this deploy.
    :returns: ``(warm, why)``: ``warm`` is ``{'agent_up_for_s': ...}`` or
        None, ``why`` says why the deploy is cold (None when warm).
    """
    node = task.node
    mark = node.del_driver_internal_info(KEY)
    if not ironic_utils.fast_track_enabled(node):
        return None, 'fast track is off'
    if not mark or not mark.get('token_sha256'):
        return None, 'no agent booted by cleaning'
    if mark['token_sha256'] != _token_digest(node):
        return None, 'the agent was booted again since cleaning'
    if not manager_utils.is_fast_track(task):
        return None, 'the agent is not up (no recent heartbeat)'
    if mark['boot'] != wanted:
        differs = sorted(k for k in wanted
                         if wanted[k] != mark['boot'].get(k))
        return None, ('the run boots another %s than the agent up'
                      % ', '.join(differs))
    return {'agent_up_for_s': round(time.time() - mark['booted_at'], 3)}, None


def may_be_warm(task):
    """Cheap test for ``prepare``: a mark bound to the current token and
    fast track usable (no power-off then; ``claim`` decides)."""
    node = task.node
    mark = node.driver_internal_info.get(KEY) or {}
    return bool(mark.get('token_sha256')
                and mark['token_sha256'] == _token_digest(node)
                and node.power_state == states.POWER_ON
                and manager_utils.fast_track_able(task))
