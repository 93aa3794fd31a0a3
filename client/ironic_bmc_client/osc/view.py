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

"""How the commands show a run: the report's rows and the list's columns.

Field names are the API's (``deploy_id``, ``t_ready_s``, ...), so
``-f json`` gives a script the same keys as the API; the table is for
people.
"""

import datetime

from osc_lib.cli import format_columns

from bmc_common import protocol

#: How many of the output tail's last lines ``show`` prints.
TAIL_LINES = 10

REPORT_FIELDS = ('deploy_id', 'node', 'node_name', 'instance_uuid',
                 'state', 'workload_exit_code', 'image', 'mode', 'rootfs',
                 't_ready_s', 'workload_s', 'bmc_joules_workload',
                 'rapl_joules_workload', 'tunables', 'error', 'output_tail')

LIST_FIELDS = ('deploy_id', 'node', 'instance_uuid', 'state',
               'workload_exit_code', 'image', 'mode', 'created',
               't_ready_s', 'bmc_joules_workload', 'rapl_joules_workload')


def report_rows(report):
    """(columns, values) of a run report for a ShowOne command."""
    energy = report.get('energy') or {}
    values = {key: report.get(key) for key in REPORT_FIELDS}
    values.update(
        workload_s=workload_seconds(report),
        bmc_joules_workload=energy.get('bmc_joules_workload'),
        rapl_joules_workload=energy.get('rapl_joules_workload'),
        tunables=format_columns.DictColumn(tunables(report)),
        output_tail=tail(report.get('output_tail')))
    return REPORT_FIELDS, tuple(values[key] for key in REPORT_FIELDS)


def list_rows(rows):
    """(columns, rows of values) of the runs list for a Lister command."""
    def node(row):
        return row.get('node_name') or row.get('node')

    def created(row):
        return when(row.get('created'))
    special = {'node': node, 'created': created}
    return LIST_FIELDS, [
        tuple(special[key](row) if key in special else row.get(key)
              for key in LIST_FIELDS) for row in rows]


def workload_seconds(report):
    """How long the workload ran (or has run so far), or None."""
    for stage in report.get('stages') or ():
        if stage.get('name') == protocol.STAGE_WORKLOAD_EXITED:
            duration = stage.get('duration_s')
            if duration is None and stage.get('end') is not None:
                duration = round(stage['end'] - stage['start'], 3)
            return duration
    return (report.get('energy') or {}).get('workload_s')


def tunables(report):
    """{knob: what it was set to} of the tunables the run read back; a
    knob that did not apply says why."""
    out = {}
    for knob, item in sorted((report.get('tunables') or {}).items()):
        if not isinstance(item, dict):
            out[knob] = item
        elif item.get('supported') is False:
            out[knob] = 'unsupported: %s' % item.get('reason', '?')
        elif item.get('ok') is False:
            out[knob] = 'not applied: %s' % item.get('error', '?')
        else:
            out[knob] = item.get('actual')
    return out


def tail(text, lines=TAIL_LINES):
    """The last ``lines`` lines of an output tail."""
    if not text:
        return text
    kept = text.rstrip('\n').split('\n')
    return '\n'.join(kept[-lines:])


def when(epoch):
    """An epoch time as ISO 8601 UTC, to the second."""
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(
        epoch, datetime.timezone.utc).isoformat(timespec='seconds')
