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

"""The rootfs build of a deploy: while the node boots, outside its lock.

The ``deploy`` step powers the node on, hands the build to a worker
thread of this conductor and returns ``DEPLOYWAIT``: the node's lock is
released, so the agent's lookup and heartbeats (which need it) go on
while a large image is still being built.  When the build ends the worker
takes the node's lock and records the outcome in the deploy's
``driver_internal_info``:

* ``ready``: the artifact is published, ``stage_args`` hold its URL;
* ``failed``: the deploy fails with the build's error, as a failed step
  does (Ironic's deploying error handler: ``last_error``, ``clean_up``,
  ``deploy failed``).

A step that needs the artifact before it is ready (``bmc_stage_rootfs``)
calls :func:`wait`: Ironic is told to run that step again, heartbeats stop
driving the deploy, and the worker resumes it when it records the outcome.

A build whose deploy has ended meanwhile (undeploy, abort, a new deploy)
only gives back its cache pin.
"""

import copy
import dataclasses
import json
import threading
import time

import futurist
from ironic.common import context as ironic_context
from ironic.common import async_steps
from ironic.common import exception
from ironic.common.i18n import _
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils
from ironic.db import api as db_api
from ironic import objects
from oslo_log import log

from bmc_common import protocol
from ironic_bmc import deploy_record
from ironic_bmc.conf import CONF
from ironic_bmc import deploy_info
from ironic_bmc.image import reference
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import rootfs
from ironic_bmc import report as run_report

LOG = log.getLogger(__name__)

#: Key of the build's state in the deploy's driver_internal_info.
BUILD_KEY = 'build'
BUILDING = 'building'
READY = 'ready'
FAILED = 'failed'

#: Key of the artifact's URL in the deploy's driver_internal_info ("token":
#: masked by Ironic's API for whoever may not see driver secrets).
URL_KEY = 'artifact_token_url'
#: Deploy step that needs the artifact.
STAGE_STEP = 'bmc_stage_rootfs'
#: Bytes (as JSON) of driver_internal_info a deploy may leave: the
#: column is a TEXT of 64 KiB on MariaDB; Ironic's own keys need room.
INTERNAL_INFO_MAX = 56 * 1024
#: Attempts (one second apart) to take the node's lock to record a build.
LOCK_ATTEMPTS = 60

_executor = None
_executor_lock = threading.Lock()
#: (node UUID, deploy ID) of the builds this conductor process runs.
_in_progress = set()


def _get_executor():
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = futurist.ThreadPoolExecutor(
                max_workers=CONF.container.build_workers)
        return _executor


def start(task, container, resolved, started_at):
    """Build the artifact of ``resolved`` for this deploy, in a worker.

    Call with the node's exclusive lock held; the deploy's
    ``driver_internal_info`` (``deploy_record.KEY``) must name the run's
    ``deploy_id``.  The worker needs the lock only to record the outcome.
    Nothing is saved here: the caller saves the node (for the deploy
    step, Ironic does as the deploy waits, or as the next step or an
    error handler ends; :func:`restart` itself), and the worker reads the
    node only once it holds the lock, after that save.  (One node save
    less per deploy: about 14 % of the plugin's conductor CPU in the
    200-node scale run.)
    """
    node = task.node
    info = node.driver_internal_info[deploy_record.KEY]
    # A restarted build keeps the flag of a step waiting for it.
    waiting = (info.get(BUILD_KEY) or {}).get('waiting', False)
    info[BUILD_KEY] = {'state': BUILDING, 'waiting': waiting,
                       'conductor': CONF.host}
    node.set_driver_internal_info(deploy_record.KEY, info)
    # The build reads the node's properties only: a copy, never saved.
    node_copy = node.obj_clone()
    deploy_id = info['deploy_id']
    context = ironic_context.get_admin_context()
    _in_progress.add((node.uuid, deploy_id))

    def _build():
        artifact = workload_args = error = None
        try:
            artifact = rootfs.prepare(node_copy, container, resolved)
            # The image's own config (entrypoint, env, user) is known
            # once its config blob is in.
            workload_args = deploy_info.workload_args(container,
                                                      artifact.config)
        except Exception as exc:
            LOG.info('Rootfs build for node %(node)s failed: %(err)s',
                     {'node': node_copy.uuid, 'err': exc})
            error = exc
        try:
            record(context, node_copy.uuid, deploy_id, started_at, artifact,
                   workload_args, error)
        except Exception:
            # Nobody reads the future: say it here.
            LOG.exception('The rootfs build of node %s ended without a '
                          'record', node_copy.uuid)
        finally:
            _in_progress.discard((node_copy.uuid, deploy_id))

    return _get_executor().submit(_build)


def orphaned(node):
    """A build recorded as running that no worker of this conductor runs:
    the conductor that started it restarted, or the node moved here (see
    :func:`builder_gone` for the latter)."""
    info = deploy_record.get(node)
    return (state(node) == BUILDING
            and (node.uuid, info.get('deploy_id')) not in _in_progress)


def builder_gone(task):
    """Whether the conductor running an orphaned build is gone.

    It is when it is this conductor (restarted: its workers are gone), or
    another one that is no longer registered or has not heartbeated
    within ``[conductor]heartbeat_timeout`` (Ironic's own test for a dead
    conductor).  A build on a live conductor is left to it, also when the
    node's hash ring moved the node here meanwhile (a conductor joined):
    it records its outcome and resumes the deploy through the API's RPC.
    """
    info = deploy_record.get(task.node)
    builder = (info.get(BUILD_KEY) or {}).get('conductor')
    if builder in (None, CONF.host):
        return True
    try:
        objects.Conductor.get_by_hostname(task.context, builder,
                                          online=True)
    except exception.ConductorNotFound:
        return True
    return builder in db_api.get_instance().get_offline_conductors()


def restart(task):
    """Start an orphaned build again, here, for the image digest the
    deploy resolved (a tag that moved meanwhile does not matter)."""
    node = task.node
    container = deploy_info.parse(node)
    report = run_report.get(node) or {}
    digest = report.get('image_digest')
    if digest:
        ref = reference.parse(container.image)
        container = dataclasses.replace(
            container, image=str(ref.with_digest(digest)))
    LOG.warning('The rootfs build of node %(node)s was lost (conductor '
                'restart or take-over); building %(image)s again here',
                {'node': node.uuid, 'image': container.image})
    try:
        resolved = rootfs.resolve(node, container)
    except Exception as exc:
        msg = (_('Cannot deploy container image %(image)s: %(err)s')
               % {'image': container.image, 'err': exc})
        manager_utils.deploying_error_handler(task, msg, msg)
        return False
    report = run_report.get(node)
    if report:
        run_report.update(node, report, build_restarts=int(
            report.get('build_restarts') or 0) + 1)
    start(task, container, resolved, time.time())
    # A periodic, not a step: nobody else saves the node.
    node.save()
    return True


def state(node):
    """The build's state: ``building``, ``ready``, ``failed`` or None."""
    info = deploy_record.get(node)
    return (info.get(BUILD_KEY) or {}).get('state')


def wait(task):
    """Have Ironic run the current step again once the build is recorded.

    :returns: ``DEPLOYWAIT``, for the step to return.
    """
    node = task.node
    info = node.driver_internal_info[deploy_record.KEY]
    info[BUILD_KEY]['waiting'] = True
    node.set_driver_internal_info(deploy_record.KEY, info)
    # The step is re-entered, and heartbeats do not drive the deploy
    # meanwhile: the worker resumes it.
    async_steps.set_node_flags(node, skip_current_step=False, polling=True)
    # (Ironic saves the node as the step returns DEPLOYWAIT: the step
    # runs in DEPLOYING, also when the build's record resumes it.)
    LOG.info('Node %(node)s waits for its rootfs artifact (%(step)s)',
             {'node': node.uuid, 'step': STAGE_STEP})
    return states.DEPLOYWAIT


def record(context, node_id, deploy_id, started_at, artifact,
           workload_args, error):
    """Record a build's outcome under the node's lock (worker side)."""
    why = _('its lock stayed taken')
    for _attempt in range(LOCK_ATTEMPTS):
        try:
            with task_manager.acquire(
                    context, node_id,
                    purpose='recording a container rootfs build') as task:
                try:
                    _record_locked(task, deploy_id, started_at, artifact,
                                   workload_args, error)
                except Exception as exc:
                    # Whatever it is (the database refusing the record),
                    # the deploy fails with it rather than stay building
                    # (and be rebuilt) for ever.
                    LOG.exception('Recording the rootfs build of node %s '
                                  'failed', node_id)
                    task.node.refresh()
                    if _current(task.node, deploy_id):
                        _fail(task, _('the build\'s result could not be '
                                      'recorded: %s') % exc)
                    if artifact is not None:
                        rootfs.unpin(artifact.cache_key, node_id)
            return
        except exception.NodeLocked:
            time.sleep(1)
        except exception.NodeNotFound:
            why = _('the node is gone')
            break
    LOG.error('Could not record the rootfs build of node %(node)s: '
              '%(why)s', {'node': node_id, 'why': why})
    if artifact is not None:
        rootfs.unpin(artifact.cache_key, node_id)


def _fail(task, error):
    """The build failed (or its result cannot be kept): fail the deploy
    with the reason."""
    node = task.node
    deploy_record.update(node, **{BUILD_KEY: {'state': FAILED,
                                              'error': str(error)[:2000]}})
    msg = (_('Cannot deploy container image %(image)s: %(err)s')
           % {'image': node.instance_info.get(protocol.II_IMAGE),
              'err': error})
    manager_utils.deploying_error_handler(
        task, 'Container deploy of node %s failed: %s' % (node.uuid, error),
        msg)


def _current(node, deploy_id):
    info = deploy_record.get(node)
    return (info.get('deploy_id') == deploy_id
            and state(node) == BUILDING
            and node.provision_state in (states.DEPLOYING,
                                         states.DEPLOYWAIT))


def _record_locked(task, deploy_id, started_at, artifact, workload_args,
                   error):
    node = task.node
    if not _current(node, deploy_id):
        LOG.info('The deploy of node %(node)s that a rootfs build was for '
                 'has ended; dropping the build', {'node': node.uuid})
        info = deploy_record.get(node)
        if artifact is not None and not info:
            # No deploy holds the node: nobody else will unpin.
            rootfs.unpin(artifact.cache_key, node.uuid)
        return
    info = node.driver_internal_info[deploy_record.KEY]
    waiting = info[BUILD_KEY].get('waiting', False)
    url = None
    if error is None and artifact.format != protocol.FORMAT_TREE:
        try:
            url = boot_files.publish_artifact(task, artifact.path,
                                              artifact.format,
                                              artifact.verity_path)
        except OSError as exc:
            error = exc
    if error is not None:
        _fail(task, error)
        return
    before = copy.deepcopy(node.driver_internal_info)
    info[BUILD_KEY] = {'state': READY}
    # The URL is a capability: under a key Ironic's API masks, and given
    # to the agent only in the staging step's arguments.
    if url:
        info[URL_KEY] = url
    info['stage_args'].update({'digest': artifact.digest,
                               'format': artifact.format,
                               'size': artifact.size})
    if artifact.format == protocol.FORMAT_TREE:
        info['stage_args']['nfs'] = rootfs.nfs_stage_args(artifact)
    if info['stage_args'].get('rootfs') == protocol.ROOTFS_STREAM:
        info['stage_args']['stream'] = rootfs.stream_stage_args(
            node, info.get('stream_cache'), artifact.size)
    if artifact.verity:
        # The trust anchor: the node checks every block against it.
        info['stage_args']['verity'] = {
            'root_hash': artifact.verity['root_hash'],
            'size': artifact.verity['size']}
    info['workload_args'] = workload_args
    node.set_driver_internal_info(deploy_record.KEY, info)
    report = run_report.get(node)
    run_report.add_stage(node, report, protocol.STAGE_ARTIFACT_READY,
                         started_at, time.time())
    run_report.update(node, report, artifact=artifact.to_dict())
    size = len(json.dumps(node.driver_internal_info))
    if size > INTERNAL_INFO_MAX:
        node.driver_internal_info = before
        if artifact is not None:
            rootfs.unpin(artifact.cache_key, node.uuid)
        _fail(task, _('the run\'s record would take %(size)d bytes of the '
                      'node\'s driver_internal_info, more than %(max)d '
                      '(the database column holds 64 KiB)')
              % {'size': size, 'max': INTERNAL_INFO_MAX})
        return
    node.save()
    if (waiting and node.provision_state == states.DEPLOYWAIT
            and (node.deploy_step or {}).get('step') == STAGE_STEP):
        LOG.info('Rootfs artifact of node %(node)s ready; resuming the '
                 'deploy', {'node': node.uuid})
        manager_utils.notify_conductor_resume_deploy(task)
