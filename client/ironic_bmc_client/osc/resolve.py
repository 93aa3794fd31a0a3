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

"""Which run a command's argument names.

The argument of ``show``, ``logs``, ``results`` and ``chart`` is a
run (its deploy id), a server (UUID or name: its newest run) or a node
(UUID or name: its newest run), tried in that order.  Server names are
looked up with the compute client when OSC has one; without it, or when
the lookup fails, a name is tried as a node's.
"""

import logging

from oslo_utils import uuidutils
from osc_lib import exceptions

from ironic_bmc_client import runs

LOG = logging.getLogger(__name__)


def run_report(app, client, target, run_id=None):
    """The run report ``target`` names (or ``run_id``, one of its runs).

    :raises osc_lib.exceptions.CommandError: no run of the caller's
        project is recorded for ``target``.
    """
    if run_id:
        report = _get(client, run_id)
        if report is None:
            raise exceptions.CommandError(
                'no run %s of your project is recorded' % run_id)
        names = {target} | set(_server_ids(app, target))
        if target and not names & _identities(report):
            raise exceptions.CommandError(
                'run %s is not a run of %s (it ran on node %s, server %s)'
                % (run_id, target, report.get('node_name')
                   or report.get('node'), report.get('instance_uuid')))
        return report
    if uuidutils.is_uuid_like(target):
        report = _get(client, target)
        if report is not None:
            return report
    for server in _server_ids(app, target):
        report = _newest(client, instance_uuid=server)
        if report is not None:
            return report
    report = _newest(client, node=target)
    if report is not None:
        return report
    raise exceptions.CommandError(
        'no run recorded yet for %s (not a run id, nor a server or a node '
        'with a run of your project)' % target)


def server_ids(app, target):
    """The server UUIDs ``target`` may name: itself if it is a UUID,
    else the server of that name the compute client finds."""
    return _server_ids(app, target)


def _get(client, run_id):
    try:
        return client.get(run_id)
    except runs.NotFound:
        return None


def _newest(client, **where):
    found = client.list(limit=1, **where)
    if not found:
        return None
    return _get(client, found[0]['deploy_id'])


def _identities(report):
    return {report.get(key) for key in ('deploy_id', 'node', 'node_name',
                                        'instance_uuid')} - {None}


def _server_ids(app, target):
    if not target:
        return []
    if uuidutils.is_uuid_like(target):
        return [target]
    server = _find_server(app, target)
    return [server] if server else []


def _find_server(app, name):
    """The UUID of the server named ``name``, or None (no compute client,
    no such server, or the lookup failed: then the name is a node's)."""
    try:
        compute = app.client_manager.compute
    except Exception as exc:    # noqa: BLE001 - no compute service
        LOG.debug('No compute client to look server %s up: %s', name, exc)
        return None
    try:
        if hasattr(compute, 'find_server'):     # openstacksdk
            server = compute.find_server(name, ignore_missing=True)
        else:                                   # python-novaclient
            server = compute.servers.find(name=name)
    except Exception as exc:    # noqa: BLE001 - not a server's name
        LOG.debug('No server %s: %s', name, exc)
        return None
    return getattr(server, 'id', None) if server else None
