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

"""Run groups in the lab: one job across lab nodes (the operator path).

Each node gets the same ``container_group`` and ``container_group_size``
in its instance_info and is deployed; the conductor holds every
workload until all have staged their root.  The group report comes from
any member (the ``run_group`` vendor method).
"""

import json

from bmc_common import protocol
from bmc_lab import client as lab_client
from bmc_lab import container_job


def deploy(settings, image, name, indexes, extra=None, out=print,
           launcher=None):
    """Deploy ``image`` on lab nodes ``indexes`` as run group ``name``
    (job mode); return their state watchers, without waiting."""
    cli = lab_client.get_client(settings)
    keys = dict(extra or {})
    keys.update({protocol.II_GROUP: name,
                 protocol.II_GROUP_SIZE: len(indexes)})
    if launcher:
        keys[protocol.II_GROUP_LAUNCHER] = launcher
    watchers = []
    for index in indexes:
        node = settings.node_name(index)
        if cli.node.get(node).provision_state != 'available':
            container_job.reclaim(settings, index, out=out)
        container_job.use_container_interfaces(settings, node)
        patch = [{'op': 'add', 'path': '/instance_info/%s' % key,
                  'value': value}
                 for key, value in dict(
                     keys, container_image=image,
                     container_mode=protocol.MODE_JOB).items()]
        cli.node.update(node, patch)
    out('Deploying %s on %s as run group %s ...'
        % (image, ', '.join(settings.node_name(i) for i in indexes), name))
    for index in indexes:
        node = settings.node_name(index)
        watchers.append(lab_client.StateWatcher(cli, node))
        cli.node.set_provision_state(node, 'active')
    return watchers


def report(settings, index=0, name=None):
    """The group report, asked of member ``index`` (or node ``name``)."""
    cli = lab_client.get_client(settings)
    found = cli.node.vendor_passthru(name or settings.node_name(index),
                                     'run_group', http_method='GET')
    return found.to_dict() if hasattr(found, 'to_dict') else found


def format_report(group):
    lines = ['run group %s (%s, %d nodes, %s launcher): %s'
             % (group['name'], group['id'], group['size'],
                group['launcher'], group['state'])]
    for m in group['members']:
        lines.append('  rank %(rank)s %(hostname)s %(address)s node '
                     '%(node_name)s: %(state)s, exit %(exit_code)s, '
                     'T_ready %(t_ready_s)s s, %(energy_j)s J, barrier '
                     'wait %(barrier_wait_s)s s' % dict(
                         {k: None for k in ('state', 'exit_code',
                                            't_ready_s', 'energy_j',
                                            'barrier_wait_s')}, **m))
    lines.append('  total energy %s J, slowest T_ready %s s (rank %s)'
                 % (group['energy_j_total'], group['slowest_t_ready_s'],
                    group['slowest_rank']))
    if group.get('ended_by'):
        lines.append('  ended by: %s' % json.dumps(group['ended_by']))
    return '\n'.join(lines)
