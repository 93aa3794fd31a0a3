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

"""The group report: the members' run reports side by side.

Built when asked (the ``run_group`` vendor method), from the reports
this conductor keeps: each member's state, exit code, T_ready and
energy; the group's total energy, its slowest T_ready, and the member
that ended it.  A member whose report another conductor keeps is listed
without its numbers (``"report": "elsewhere"``).
"""

from ironic.common import exception
from ironic.common.i18n import _

from bmc_common import protocol
from ironic_bmc import report as run_report


def _energy(report):
    """Joules of the run: the BMC's over the whole run, else RAPL's over
    the workload; ``(joules, source)`` or ``(None, None)``."""
    section = report.get('energy') or {}
    if section.get('bmc_joules_run') is not None:
        return section['bmc_joules_run'], 'bmc'
    if section.get('rapl_joules_workload') is not None:
        return section['rapl_joules_workload'], 'rapl'
    return None, None


def _row(entry, report):
    row = {k: entry.get(k) for k in ('rank', 'node', 'node_name',
                                     'hostname', 'address', 'deploy_id')}
    if report is None:
        row['report'] = 'elsewhere'
        return row
    joules, source = _energy(report)
    row.update(report='here', state=report.get('state'),
               exit_code=report.get('workload_exit_code'),
               t_ready_s=run_report.t_ready(report), energy_j=joules,
               energy_source=source, error=report.get('error'),
               barrier_wait_s=((report.get('group') or {}).get(
                   'barrier') or {}).get('waited_s'))
    return row


def build(report):
    """The group report of the run group ``report`` (a member's run
    report) belongs to.

    :raises: InvalidParameterValue when that run is not a group's.
    """
    group = report.get('group')
    if not group:
        raise exception.InvalidParameterValue(
            _('Run %(run)s of node %(node)s is not a member of a run group '
              '(instance_info/container_group)')
            % {'run': report['deploy_id'], 'node': report['node']})
    rows, ended_by = [], group.get('ended_by')
    for entry in group['members']:
        if entry['deploy_id'] == report['deploy_id']:
            other = report
        else:
            other = run_report.load(entry['node'], entry['deploy_id'])
        rows.append(_row(entry, other))
        ended_by = ended_by or ((other or {}).get('group') or {}).get(
            'ended_by')
    known = [r for r in rows if r['report'] == 'here']
    states = {r['state'] for r in known}
    if len(known) < len(rows):
        state = 'partial'
    elif not states <= set(protocol.RUN_FINAL_STATES):
        state = protocol.RUN_RUNNING
    elif (protocol.RUN_FAILED in states
          or (ended_by and not ended_by.get('ok'))):
        state = protocol.RUN_FAILED
    else:
        state = (protocol.RUN_FINISHED if states == {protocol.RUN_FINISHED}
                 else protocol.RUN_UNDEPLOYED)
    energies = [r['energy_j'] for r in known if r['energy_j'] is not None]
    ready = [r for r in known if r['t_ready_s'] is not None]
    slowest = max(ready, key=lambda r: r['t_ready_s']) if ready else None
    return {
        'name': group['name'], 'id': group['id'], 'size': group['size'],
        'launcher': group['launcher'], 'state': state,
        'ended_by': ended_by,
        'energy_j_total': (round(sum(energies), 3)
                           if len(energies) == len(rows) else None),
        'energy_j_known': round(sum(energies), 3) if energies else None,
        'slowest_t_ready_s': slowest['t_ready_s'] if slowest else None,
        'slowest_rank': slowest['rank'] if slowest else None,
        'members': rows,
    }
