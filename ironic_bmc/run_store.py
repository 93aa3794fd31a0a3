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

"""Runs across nodes: who they belong to, and where their files are.

The reports themselves live in ``[container]report_dir/<node>/<deploy
id>.json`` (:mod:`ironic_bmc.report`).  This module adds what the
container runs API needs to serve them without reading every report:

* ``<report_dir>/.projects/<project id>/<deploy id>``: one small file
  per run that a project owns (its content: the node's UUID), written
  with the run's first report;
* ``<report_dir>/<node>/<deploy id>.power``: the BMC power samples of
  the run (JSON), at most ``[container]power_series_points`` of them,
  written when the run's energy is summed.  They stay out of the report
  itself, which lives in the node's ``driver_internal_info`` while the
  run goes on.
"""

import json
import os

from oslo_utils import uuidutils

from ironic_bmc.conf import CONF

PROJECTS_DIR = '.projects'
POWER_SUFFIX = '.power'


def _root():
    return CONF.container.report_dir


def _safe_id(value):
    """A project or node id fit for a file name (Keystone project ids are
    hex; anything else is refused rather than escaped)."""
    return (isinstance(value, str) and 0 < len(value) <= 64
            and all(c.isalnum() or c in '-_' for c in value))


def _projects(report):
    """The projects that list the run: the one it is for and the node's
    owner (the runs API's policy says what each may read of it)."""
    return {p for p in (report.get('project_id'), report.get('node_owner'))
            if _safe_id(p)}


def index(report):
    """Record which projects list the run of ``report`` (idempotent)."""
    for project in _projects(report):
        path = os.path.join(_root(), PROJECTS_DIR, project,
                            report['deploy_id'])
        if os.path.exists(path):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + '.tmp'
        with open(tmp, 'w') as f:
            f.write(report['node'])
        os.replace(tmp, path)


def unindex(report):
    for project in _projects(report):
        try:
            os.remove(os.path.join(_root(), PROJECTS_DIR, project,
                                   report['deploy_id']))
        except FileNotFoundError:
            pass


def _read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None


def find(deploy_id):
    """The report of run ``deploy_id`` on any node, or None."""
    if not uuidutils.is_uuid_like(deploy_id):
        return None
    try:
        nodes = os.listdir(_root())
    except FileNotFoundError:
        return None
    for node in nodes:
        if node.startswith('.'):
            continue
        report = _read(os.path.join(_root(), node, deploy_id + '.json'))
        if report is not None:
            return report
    return None


def _newest_first(paths):
    stamped = []
    for path in paths:
        try:
            stamped.append((os.path.getmtime(path), path))
        except OSError:
            continue
    return [path for _, path in sorted(stamped, reverse=True)]


def runs(project_id=None, node=None, instance_uuid=None, limit=50):
    """Reports of runs, newest first.

    :param project_id: only the runs this project is for or whose node
        it owns (read through the project's index, not by reading every
        report).  None: every run
        (the operator's view).
    :param node: only the runs of this node (UUID or name: the name it
        had when the run began).
    :param instance_uuid: only the runs of this instance (Nova server).
    :param limit: at most this many reports.
    """
    root = _root()
    node_name = None
    if node and not uuidutils.is_uuid_like(node):
        node, node_name = None, node
    if project_id is not None:
        if not _safe_id(project_id):
            return []
        directory = os.path.join(root, PROJECTS_DIR, project_id)
        try:
            entries = os.listdir(directory)
        except FileNotFoundError:
            return []
        paths = []
        for deploy_id in entries:
            if deploy_id.endswith('.tmp'):
                continue
            try:
                with open(os.path.join(directory, deploy_id)) as f:
                    owner_node = f.read().strip()
            except OSError:
                continue
            if node and owner_node != node:
                continue
            paths.append(os.path.join(root, owner_node, deploy_id + '.json'))
    else:
        try:
            nodes = [node] if node else [
                n for n in os.listdir(root) if not n.startswith('.')]
        except FileNotFoundError:
            return []
        paths = []
        for name in nodes:
            try:
                paths.extend(os.path.join(root, name, n)
                             for n in os.listdir(os.path.join(root, name))
                             if n.endswith('.json'))
            except (FileNotFoundError, NotADirectoryError):
                continue
    found = []
    for path in _newest_first(paths):
        report = _read(path)
        if report is None:
            continue
        if project_id is not None and project_id not in (
                report.get('project_id'), report.get('node_owner')):
            continue
        if instance_uuid and report.get('instance_uuid') != instance_uuid:
            continue
        if node_name and report.get('node_name') != node_name:
            continue
        found.append(report)
        if len(found) >= limit:
            break
    return found


def _power_path(node_uuid, deploy_id):
    return os.path.join(_root(), node_uuid, deploy_id + POWER_SUFFIX)


def save_power_series(node_uuid, deploy_id, series):
    path = _power_path(node_uuid, deploy_id)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(series, f, separators=(',', ':'))
    os.replace(tmp, path)


def power_series(node_uuid, deploy_id):
    """The run's power series, or None when none was kept."""
    return _read(_power_path(node_uuid, deploy_id))
