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

"""Run reports: one JSON document per deploy.

While a deploy runs its report lives in the node's driver_internal_info
(so every conductor sees it) and is written to ``[container]report_dir``;
the file stays after undeploy.  Within :func:`batch` (a deploy step, a
step's result) the changes are made in memory and the file is written
once, at the end; outside one, at every change.
"""

import contextlib
import functools
import inspect
import json
import os
import threading
import time
import uuid

from bmc_common import protocol
from ironic_bmc import ownership
from ironic_bmc import run_store
from ironic_bmc.conf import CONF

INTERNAL_KEY = 'bmc_run_report'

def new(node, container):
    return {
        'version': protocol.REPORT_VERSION,
        'deploy_id': str(uuid.uuid4()),
        'node': node.uuid,
        'node_name': node.name,
        # Who may read the run (the container runs API): the project
        # it is for (ironic_bmc.ownership) and the node's owner.
        'project_id': ownership.run_project(node),
        'node_owner': node.owner,
        'instance_uuid': node.instance_uuid,
        'image': container.image,
        'image_digest': None,
        'rootfs': container.rootfs,
        'mode': container.mode,
        'kernel': None,
        'ramdisk': None,
        'kernel_modules': None,
        'artifact': None,
        'state': protocol.RUN_DEPLOYING,
        'workload_exit_code': None,
        'output_tail': '',
        'error': None,
        'stages': [],
        # Conductors that took the node over during the run.
        'takeovers': [],
        'created': round(time.time(), 3),
    }


def get(node):
    return node.driver_internal_info.get(INTERNAL_KEY)


_local = threading.local()


def _batches():
    """{node UUID: {deploy id: report to write}} of this thread."""
    if not hasattr(_local, 'batches'):
        _local.batches = {}
    return _local.batches


@contextlib.contextmanager
def batch(node):
    """Write the node's reports once, when the block ends (however it
    ends: a failed step's report is written too).  Nested: the outermost
    block writes."""
    batches = _batches()
    outer = node.uuid not in batches
    if outer:
        batches[node.uuid] = {}
    try:
        yield
    finally:
        if outer:
            for report in batches.pop(node.uuid).values():
                _write(report)


def written_once(func):
    """Decorate a step, a step hook or a handler: the run report's file is
    written once per call, however many fields it records (its argument
    named ``task`` holds the node)."""
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        task = signature.bind(*args, **kwargs).arguments['task']
        with batch(task.node):
            return func(*args, **kwargs)
    return wrapper


def update(node, report, **fields):
    """Merge ``fields`` into the report, store it on the node and on disk
    (at the end of the batch, within one).

    The caller saves the node.
    """
    report.update(fields)
    node.set_driver_internal_info(INTERNAL_KEY, report)
    pending = _batches().get(node.uuid)
    if pending is None:
        _write(report)
    else:
        pending[report['deploy_id']] = report
    return report


def add_stage(node, report, name, start, end):
    report['stages'] = [s for s in report['stages'] if s['name'] != name]
    report['stages'].append(protocol.stage(name, start, end))
    report['stages'].sort(key=lambda s: protocol.STAGES.index(s['name']))
    return update(node, report)


def _path(node_uuid, deploy_id):
    return os.path.join(CONF.container.report_dir, node_uuid,
                        deploy_id + '.json')


def _write(report):
    path = _path(report['node'], report['deploy_id'])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(report, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    run_store.index(report)


def load(node_uuid, deploy_id=None):
    """A node's report by deploy id, else its newest; None if none."""
    directory = os.path.join(CONF.container.report_dir, node_uuid)
    if deploy_id:
        candidates = [_path(node_uuid, deploy_id)]
    else:
        try:
            names = [n for n in os.listdir(directory)
                     if n.endswith('.json')]
        except FileNotFoundError:
            return None
        candidates = sorted((os.path.join(directory, n) for n in names),
                            key=os.path.getmtime, reverse=True)[:1]
    for path in candidates:
        try:
            with open(path) as f:
                return json.load(f)
        except FileNotFoundError:
            return None
    return None


def t_ready(report):
    """Seconds from the deploy request (the report's creation) to the
    workload's start, or None before it starts."""
    for stage in report.get('stages') or ():
        if stage.get('name') == protocol.STAGE_WORKLOAD_STARTED:
            try:
                return round(stage['end'] - report['created'], 3)
            except (KeyError, TypeError):
                return None
    return None
