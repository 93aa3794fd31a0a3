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

"""What this conductor keeps on its own disk for a node, and its release.

A deploy pins the node's rootfs artifact in this conductor's cache and
publishes it under this conductor's HTTP root.  The deploy's own
``clean_up`` releases both, on the conductor that runs it.  When the node
has moved to another conductor meanwhile (this one died or left the hash
ring and another took the node over), or the node was deleted, nobody
would: :func:`sweep` does, for every node that is not deploying, active
or being serviced *on this conductor*.

The boot files (kernel, ramdisk, iPXE script) are left alone, as Ironic's
own PXE boot leaves them: the new conductor writes its own, and this
conductor's are replaced at the node's next deploy here.
"""

import os
import shutil
import time

from ironic.common import exception
from ironic.common import states
from ironic.conductor import task_manager
from ironic.drivers.modules import deploy_utils
from oslo_log import log

from bmc_common import protocol
from ironic_bmc import deploy_record
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import energy
from ironic_bmc.drivers import rootfs
from ironic_bmc.power import sampler
from ironic_bmc import report as run_report

LOG = log.getLogger(__name__)

#: Provision states in which a node's run may still need what this
#: conductor holds for it.
IN_USE_STATES = (states.DEPLOYING, states.DEPLOYWAIT, states.ACTIVE,
                 states.SERVICING, states.SERVICEWAIT, states.SERVICEFAIL)

_ARTIFACT_PREFIX = 'rootfs-'


def _published(node_uuid):
    """Artifact directories (relative to the HTTP root) of a node."""
    try:
        names = os.listdir(os.path.join(CONF.deploy.http_root, node_uuid))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [os.path.join(node_uuid, n) for n in names
            if n.startswith(_ARTIFACT_PREFIX)]


def _nodes_with_artifacts():
    try:
        names = os.listdir(CONF.deploy.http_root)
    except FileNotFoundError:
        return set()
    return {n for n in names if _published(n)}


def _releasable(node_uuid, holders, keep, serving=False):
    """What this conductor holds for a node, but for ``keep`` (and its
    pins while it ``serving`` the node's running root over NFS)."""
    stale = [rel for rel in _published(node_uuid) if rel != keep]
    return (node_uuid in holders and not serving), stale


def _serving(node):
    """Whether this conductor's NFS export is the root of the node's
    running workload: a take-over moves the node's management, not its
    root, which stays exported from here until the run ends."""
    report = run_report.get(node) or {}
    return (report.get('state') == protocol.RUN_RUNNING
            and report.get('rootfs') == protocol.ROOTFS_NFS)


def _release(node_uuid, keep=None, serving=False):
    if not serving:
        rootfs.release_holder(node_uuid)
    for rel in _published(node_uuid):
        if rel != keep:
            shutil.rmtree(os.path.join(CONF.deploy.http_root, rel),
                          ignore_errors=True)


def _ours(node, conductor_id):
    return (node.conductor_affinity == conductor_id
            and node.provision_state in IN_USE_STATES)


def sweep(context, conductor_id):
    """Release the pins and artifacts of nodes that are not ours.

    A node is read under a shared lock; its exclusive lock is taken only
    when there is something to release (conductors sharing one HTTP root
    see each other's current artifacts, which stay).

    :returns: the UUIDs of the nodes released.
    """
    released = []
    holders = rootfs.get_cache().holders()
    sampled = set(sampler.REGISTRY.active())
    candidates = holders | _nodes_with_artifacts() | sampled
    for node_uuid in sorted(candidates):
        try:
            with task_manager.acquire(
                    context, node_uuid, shared=True,
                    purpose='releasing container artifacts') as task:
                node = task.node
                if _ours(node, conductor_id):
                    continue
                if node_uuid in sampled:
                    # Its BMC is sampled by the conductor that has it now.
                    energy.stop(node)
                # Another conductor may publish this node's artifact in a
                # shared HTTP root: its current directory stays.
                keep = node.driver_internal_info.get(
                    boot_files.ARTIFACT_DIR_KEY)
                pinned, stale = _releasable(node_uuid, holders, keep,
                                            _serving(node))
                if not pinned and not stale:
                    continue
                task.upgrade_lock()
                node = task.node
                if _ours(node, conductor_id):
                    continue
                _release(node_uuid, keep=node.driver_internal_info.get(
                    boot_files.ARTIFACT_DIR_KEY), serving=_serving(node))
        except exception.NodeNotFound:
            _release(node_uuid)
        except exception.NodeLocked:
            continue
        released.append(node_uuid)
        LOG.info('Released the cache pins and published artifacts this '
                 'conductor held for node %s: it is not deploying or '
                 'active here', node_uuid)
    return released


def take_over(task):
    """This conductor takes over an ACTIVE node from another one.

    What the run needs from its conductor moves here: the iPXE script
    and boot files (as Ironic's PXE boot re-creates them on take-over)
    and the BMC power sampling.  The previous conductor's samples are
    lost; the report says from when its energy counts.
    """
    node = task.node
    report = run_report.get(node)
    if not report or report.get('state') not in (protocol.RUN_RUNNING,
                                                  protocol.RUN_EXITED):
        return
    info = deploy_record.get(node)
    boot_files.prepare(task, deploy_utils.build_agent_options(node),
                       extra_kernel_args=info.get('kernel_args') or ())
    fields = {'takeovers': list(report.get('takeovers') or []) + [
        {'conductor': CONF.host, 'time': time.time()}]}
    if report.get('state') == protocol.RUN_RUNNING:
        unavailable = energy.start(node)
        if unavailable:
            fields['energy'] = unavailable
    run_report.update(node, report, **fields)
    LOG.info('Took over container node %(node)s (run %(run)s, %(state)s)',
             {'node': node.uuid, 'run': report.get('deploy_id'),
              'state': report.get('state')})
    node.save()
