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

"""The fault suite's table: one row per fault, printed after the run."""

import json

#: Rows of this session's fault tests, in order, as their reports came
#: in (under pytest-xdist: in the controller, from the workers' reports).
ROWS = []
#: Rows recorded by the running test, not yet attached to its report.
_PENDING = []
#: The report's user property that carries a row.
PROPERTY = 'fault_table_row'

COLUMNS = (('fault', 34), ('node', 22), ('report', 10), ('left over', 10),
           ('others', 9), ('last_error', 0))


def record(**row):
    _PENDING.append(row)


def take():
    """The rows recorded since the last call (for the test's report)."""
    rows = list(_PENDING)
    del _PENDING[:]
    return rows


def collect(user_properties):
    ROWS.extend(value for name, value in user_properties
                if name == PROPERTY)


def lines():
    out = ['  '.join(name.ljust(width) if width else name
                     for name, width in COLUMNS)]
    for row in ROWS:
        cells = [row.get('fault', ''),
                 '%s, %s' % (row.get('provision_state'), row.get('power')),
                 str(row.get('report_state')),
                 'nothing' if not row.get('left_over') else
                 ','.join(row['left_over']),
                 'untouched' if row.get('others_untouched') else 'CHANGED',
                 (row.get('last_error') or '-')[:110]]
        out.append('  '.join(c.ljust(w) if w else c
                             for c, (_n, w) in zip(cells, COLUMNS,
                                                       strict=True)))
    out.append('FAULTS_JSON ' + json.dumps(ROWS, sort_keys=True))
    return out
