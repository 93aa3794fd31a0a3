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

"""One unikernel run: boot files, the console watch, the run's end.

A thread per run tails the node's console (``POLL`` seconds) and notes
when each protocol line first appeared, so that the report's stages are
timed to a fraction of a second, not to the periodic poll; at the end
line (or the deadline) it takes the node's lock and closes the run.  The
deploy interface's periodic task closes the runs no thread watches (this
conductor restarted, or took the node over), with the times it sees.
"""

import os
import threading
import time

from ironic.common import exception
from ironic.common.i18n import _
from ironic.common import pxe_utils
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils
from oslo_log import log

from bmc_common import protocol
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import energy
from ironic_bmc.drivers import unikernel_console
from ironic_bmc import report as run_report
from ironic_bmc import run_files

LOG = log.getLogger(__name__)

#: driver_internal_info key of a running unikernel.
RUN_KEY = 'bmc_unikernel_run'
LABEL = 'unikernel'
TEMPLATE = os.path.join(os.path.dirname(__file__), 'templates',
                        'unikernel_ipxe_config.template')
POLL = 0.25
#: {deploy id: {'booted': time, 'ended': time}}, filled by the watchers.
_seen = {}
_seen_lock = threading.Lock()


def _path(node):
    """Where the image is cached, in the node's HTTP directory."""
    return pxe_utils.get_file_path_from_label(node.uuid,
                                              CONF.deploy.http_root, LABEL)


def images(task, info):
    return {LABEL: (info.image, _path(task.node))}


def stage_boot(task, info):
    """The image in the node's HTTP directory, the iPXE script that boots
    it, the DHCP options, network boot."""
    boot_files.ipxe_dhcp(task)
    files = images(task, info)
    boot_files.cache_boot_files(task, files)
    options = {
        'unikernel_path': '/'.join([CONF.deploy.http_url, task.node.uuid,
                                    LABEL]),
        'unikernel_args': info.args,
        'ipxe_timeout': CONF.pxe.ipxe_timeout * 1000,
    }
    pxe_utils.create_pxe_config(task, options, TEMPLATE, ipxe_enabled=True)
    boot_files.set_pxe_boot(task)


def clean_boot(task):
    pxe_utils.clean_up_pxe_env(task, {LABEL: (None, _path(task.node))},
                               ipxe_enabled=True)


def start(task, info, report):
    """Power the node on and start watching its console; the node is
    ACTIVE when the deploy step returns."""
    node = task.node
    console = unikernel_console.path(node)
    offset = unikernel_console.mark(console)
    unavailable = energy.start(node)
    if unavailable:
        run_report.update(node, report, energy=unavailable)
    t_on = time.time()
    manager_utils.node_power_action(task, states.POWER_ON)
    powered = time.time()
    run_report.add_stage(node, report, protocol.STAGE_POWER_ON, t_on,
                         powered)
    node.set_driver_internal_info(RUN_KEY, {
        'deploy_id': report['deploy_id'],
        'console': console,
        'offset': offset,
        'powered_on': powered,
        'deadline': powered + info.timeout,
        'timeout': info.timeout,
    })
    run_report.update(node, report, state=protocol.RUN_RUNNING)
    watch(task.context, node.uuid, report['deploy_id'])


def running(node):
    """A unikernel run not closed yet (the periodic task's predicate)."""
    return bool((node.driver_internal_info or {}).get(RUN_KEY))


def watch(context, node_uuid, deploy_id):
    thread = threading.Thread(target=_watch,
                              args=(context, node_uuid, deploy_id),
                              name='bmc-unikernel-%s' % node_uuid,
                              daemon=True)
    with _seen_lock:
        _seen[deploy_id] = {}
    thread.start()
    return thread


def watched(deploy_id):
    with _seen_lock:
        return deploy_id in _seen


def _watch(context, node_uuid, deploy_id):
    run = last_size = None
    try:
        while True:
            if run is None:
                # The deploy step saves the node as it returns.
                run = _run_of(context, node_uuid, deploy_id)
                if run is False:
                    return
            if run:
                size = unikernel_console.mark(run['console'])
                # The console is read again only when it grew (or was
                # rotated): a quiet run costs a stat per poll.
                if size != last_size and _look(run, deploy_id):
                    break
                last_size = size
                if time.time() > run['deadline']:
                    break
            time.sleep(POLL)
        for _attempt in range(40):
            try:
                with task_manager.acquire(
                        context, node_uuid, purpose='unikernel run end') as t:
                    close_if_due(t)
                return
            except exception.NodeLocked:
                time.sleep(POLL * 4)
        LOG.warning('Node %s stayed locked; its unikernel run is closed by '
                    'the periodic task instead', node_uuid)
    except Exception:
        LOG.exception('Watching the unikernel run %(run)s of node %(node)s '
                      'failed; the periodic task closes it',
                      {'run': deploy_id, 'node': node_uuid})
    finally:
        with _seen_lock:
            _seen.pop(deploy_id, None)


def _run_of(context, node_uuid, deploy_id):
    """The run's record once saved; False when the node moved on."""
    try:
        with task_manager.acquire(context, node_uuid, shared=True,
                                  purpose='unikernel run watch') as task:
            run = task.node.driver_internal_info.get(RUN_KEY)
            deploying = task.node.provision_state in (states.DEPLOYING,
                                                      states.DEPLOYWAIT)
    except exception.NodeNotFound:
        return False
    if not run:
        return None if deploying else False
    return run if run['deploy_id'] == deploy_id else False


def _look(run, deploy_id):
    """Note the times of the lines seen so far; True at the end line."""
    text, _restarted = unikernel_console.read(run['console'], run['offset'])
    console = unikernel_console.parse(text)
    now = time.time()
    with _seen_lock:
        seen = _seen.setdefault(deploy_id, {})
        if console.booted:
            seen.setdefault('booted', now)
        if console.ended:
            seen.setdefault('ended', now)
    return console.ended


def close_if_due(task):
    """Close the node's run when its console has the end line or its
    deadline has passed; True when it was closed."""
    node = task.node
    run = node.driver_internal_info.get(RUN_KEY)
    if not run:
        return False
    text, restarted = unikernel_console.read(run['console'], run['offset'])
    console = unikernel_console.parse(text)
    if not console.ended and time.time() <= run['deadline']:
        return False
    with run_report.batch(node):
        _close(task, run, text, console, restarted)
    return True


def _close(task, run, text, console, restarted, undeploying=False):
    node = task.node
    cut_short = undeploying and not console.ended
    report = run_report.get(node)
    now = time.time()
    with _seen_lock:
        seen = dict(_seen.get(run['deploy_id']) or {})
    booted = seen.get('booted') or (now if console.booted else None)
    ended = seen.get('ended') or now
    if booted:
        run_report.add_stage(node, report, protocol.STAGE_WORKLOAD_STARTED,
                             run['powered_on'], booted)
        run_report.add_stage(node, report, protocol.STAGE_WORKLOAD_EXITED,
                             booted, ended)
    t_off = time.time()
    manager_utils.node_power_action(task, states.POWER_OFF)
    run_report.add_stage(node, report, protocol.STAGE_POWERED_OFF, t_off,
                         time.time())
    error = None if cut_short else _error(node, run, console, restarted)
    data = text.encode('utf-8')
    run_report.update(
        node, report,
        state=(protocol.RUN_UNDEPLOYED if cut_short
               else protocol.RUN_FAILED if error
               else protocol.RUN_FINISHED),
        error=error,
        workload_exit_code=console.exit_code,
        output_tail=data[-protocol.OUTPUT_TAIL_BYTES:].decode(
            'utf-8', errors='replace'),
        output=run_files.save_output(node.uuid, run['deploy_id'], data),
        noise={protocol.NOISE_LABEL_UNIKERNEL: {'noise': {
            'method': (console.results[0]['cycles']['counter']
                       if console.results else None),
            'cpus': console.results}}},
        unikernel={'booted': console.booted,
                   'bad_lines': console.bad_lines,
                   'errors': console.errors,
                   'console_restarted': restarted})
    _energy(node, report, booted, ended if booted else None)
    node.del_driver_internal_info(RUN_KEY)
    if error:
        LOG.error(error)
        manager_utils.node_history_record(node, event=error,
                                          event_type='monitoring',
                                          error=True)
    node.save()


def _error(node, run, console, restarted):
    if console.ended and console.exit_code == 0 and not console.errors:
        return None
    if console.ended:
        why = (_('it ended with rc=%(rc)d: %(errors)s')
               % {'rc': console.exit_code,
                  'errors': '; '.join(console.errors) or _('no error line')})
    elif console.booted:
        why = (_('it booted but printed no end line within %d s')
               % run['timeout'])
    else:
        why = (_('nothing of it appeared on the console within %(t)d s '
                 '(%(file)s from byte %(offset)d): the node did not boot '
                 'it (see its iPXE output there), or it is not a bmc '
                 'unikernel') % {'t': run['timeout'],
                                 'file': run['console'],
                                 'offset': run['offset']})
    if restarted:
        why += _(' (the console file was rotated during the run: its '
                 'start may be missing)')
    return (_('Unikernel run on node %(node)s failed: %(why)s')
            % {'node': node.uuid, 'why': why})


def _energy(node, report, start, end):
    rapl = {'state': 'unavailable',
            'reason': 'a unikernel boot has no agent to read RAPL'}
    unavailable = report.get('energy') or {}
    if unavailable.get('available') is False:
        energy.stop(node)
        section = energy.with_rapl(unavailable, rapl)
    else:
        section = energy.finish(node, start, end, rapl=rapl,
                                deploy_id=report['deploy_id'])
    run_report.update(node, report, energy=section)


def end(task):
    """Undeploy or rebuild: a run still going ends as undeployed, its
    console read up to now."""
    node = task.node
    run = node.driver_internal_info.get(RUN_KEY)
    if not run:
        return
    with run_report.batch(node):
        text, restarted = unikernel_console.read(run['console'],
                                                 run['offset'])
        console = unikernel_console.parse(text)
        _close(task, run, text, console, restarted, undeploying=True)
