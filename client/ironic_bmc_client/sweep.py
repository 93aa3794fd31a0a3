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

"""A sweep: one image over kernels x tunables profiles x problem sizes,
each cell repeated; what each run measured, and per cell the spread and
the break-even.

The plan and every finished run are kept in a state file
(:class:`State`), written after each run, so an interrupted sweep
resumes where it stopped; a state file of another plan is refused.

The break-even is the BMC paper's (Table V): the baseline configuration
is the one a node already runs, so choosing another costs its boot (its
T_ready, the time from the deploy to the workload's start); it pays off
once the work it does gains that back.  With ``t_b`` and ``t_c`` the
workload seconds per unit of work of the baseline and of the cell, the
break-even is ``T_ready(c) / (t_b - t_c)`` units of work (the problem
size when sizes are swept, else runs of the workload); a cell that is
not faster never breaks even.  The energy break-even is the same with
the joules of the boot (the run's BMC energy less the workload's) and
joules per unit of work.
"""

import csv
import dataclasses
import hashlib
import json
import os
import re
import statistics

from bmc_common import protocol

#: Columns of a run in the CSV, in order.
RUN_FIELDS = ('kernel', 'profile', 'size', 'repeat', 'node', 'deploy_id',
              'state', 'exit_code', 'metric', 'workload_s', 't_ready_s',
              'boot_s', 'bmc_joules_run', 'bmc_joules_workload',
              'rapl_joules_workload', 'work', 'seconds_per_unit',
              'joules_per_unit', 'uname_v', 'error')
#: What a cell's summary holds, in order.
CELL_FIELDS = ('kernel', 'profile', 'size', 'runs', 'ok', 'metric_median',
               'metric_min', 'metric_max', 'workload_s', 't_ready_s',
               'boot_s', 'bmc_joules_workload', 'rapl_joules_workload',
               'joules_per_unit', 'break_even_work', 'break_even_energy')
STATE_VERSION = 1


class SweepError(Exception):
    """The sweep cannot go on; says why."""


@dataclasses.dataclass(frozen=True)
class Cell:
    kernel: str
    profile: str
    size: str = ''

    @property
    def key(self):
        return '%s|%s|%s' % (self.kernel, self.profile, self.size)


def cells(kernels, profiles, sizes=None):
    """Every combination, kernels outermost (a change of kernel is the
    costly one)."""
    return [Cell(k, p, s) for k in kernels for p in profiles
            for s in (sizes or [''])]


def run_key(cell, repeat):
    return '%s#%d' % (cell.key, repeat)


def plan(kernels, profiles, sizes, repeats):
    """``[(cell, repeat)]`` in the order they run: every cell once, then
    every cell again, so that a slow drift of the node spreads over all
    cells instead of biasing one."""
    if repeats < 1:
        raise SweepError('--repeat must be 1 or more, got %d' % repeats)
    every = cells(kernels, profiles, sizes)
    return [(cell, r) for r in range(repeats) for cell in every]


def fingerprint(spec):
    """A digest of what defines the sweep (image, cells, command...)."""
    text = json.dumps(spec, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class State:
    """The sweep's state file: the plan's fingerprint and finished runs."""

    def __init__(self, path, spec):
        self.path = path
        self.spec = spec
        self.fingerprint = fingerprint(spec)
        self.runs = {}

    def load(self):
        """Resume from the file if there is one; how many runs are done."""
        if not os.path.exists(self.path):
            return 0
        try:
            with open(self.path) as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            raise SweepError('cannot read the sweep state %s: %s'
                             % (self.path, exc)) from None
        if data.get('fingerprint') != self.fingerprint:
            raise SweepError(
                'the sweep state %s belongs to another sweep (another '
                'image, command or set of cells); use another '
                '--output-dir, or remove it to start over' % self.path)
        self.runs = dict(data.get('runs') or {})
        return len(self.runs)

    def done(self, cell, repeat):
        return run_key(cell, repeat) in self.runs

    def add(self, cell, repeat, record):
        self.runs[run_key(cell, repeat)] = record
        self.save()

    def save(self):
        tmp = self.path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump({'version': STATE_VERSION,
                       'fingerprint': self.fingerprint, 'spec': self.spec,
                       'runs': self.runs}, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


def extract_metric(output, regex=None, json_key=None):
    """The application's metric in its output: the first group of the last
    line ``regex`` matches, or ``json_key`` of the last JSON object line
    that has it; None if absent or not a number."""
    lines = (output or '').splitlines()
    for line in reversed(lines):
        value = None
        if regex:
            match = re.search(regex, line)
            if match:
                value = match.group(1) if match.groups() else match.group(0)
        elif json_key and line.lstrip().startswith('{'):
            try:
                value = json.loads(line).get(json_key)
            except (ValueError, AttributeError):
                continue
        if value is None:
            continue
        try:
            return float(value)
        except (TypeError, ValueError):
            return None
    return None


def _stage_seconds(report, name):
    """A stage's seconds: its ``duration_s``, else end less start (the
    report stores the two times)."""
    for stage in report.get('stages') or ():
        if stage.get('name') != name:
            continue
        if stage.get('duration_s') is not None:
            return float(stage['duration_s'])
        if stage.get('start') is not None and stage.get('end') is not None:
            return max(float(stage['end']) - float(stage['start']), 0.0)
    return None


def _work(size):
    """Units of work of one run: the size if it is a number, else 1."""
    try:
        value = float(size)
    except (TypeError, ValueError):
        return 1.0
    return value if value > 0 else 1.0


def record(report, cell, repeat, metric, error=None):
    """One run's row (:data:`RUN_FIELDS`) from its report."""
    energy = report.get('energy') or {}
    workload = _stage_seconds(report, 'workload-exited')
    boot = (report.get('boot') or {}).get('agent_up_s')
    work = _work(cell.size)
    joules = energy.get('bmc_joules_workload')
    if joules is None:
        joules = energy.get('rapl_joules_workload')
    row = {
        'kernel': cell.kernel, 'profile': cell.profile, 'size': cell.size,
        'repeat': repeat, 'node': report.get('node_name')
        or report.get('node'), 'deploy_id': report.get('deploy_id'),
        'state': report.get('state'),
        'exit_code': report.get('workload_exit_code'), 'metric': metric,
        'workload_s': workload, 't_ready_s': report.get('t_ready_s'),
        'boot_s': boot, 'bmc_joules_run': energy.get('bmc_joules_run'),
        'bmc_joules_workload': energy.get('bmc_joules_workload'),
        'rapl_joules_workload': energy.get('rapl_joules_workload'),
        'work': work,
        'seconds_per_unit': workload / work if workload is not None
        else None,
        'joules_per_unit': joules / work if joules is not None else None,
        'uname_v': ((report.get('boot') or {}).get('kernel_booted')
                    or {}).get('version'),
        'error': error or report.get('error')}
    return row


def ok(row):
    return (row.get('state') == protocol.RUN_FINISHED
            and row.get('exit_code') == 0)


def _median(rows, field):
    values = [r[field] for r in rows if r.get(field) is not None]
    return statistics.median(values) if values else None


def _boot_joules(rows):
    values = [r['bmc_joules_run'] - r['bmc_joules_workload'] for r in rows
              if r.get('bmc_joules_run') is not None
              and r.get('bmc_joules_workload') is not None]
    return statistics.median(values) if values else None


def break_even(cost, baseline_per_unit, cell_per_unit):
    """Units of work after which ``cost`` is paid back, or None when the
    cell does not gain per unit (it never breaks even)."""
    if None in (cost, baseline_per_unit, cell_per_unit):
        return None
    gain = baseline_per_unit - cell_per_unit
    if gain <= 0:
        return None
    return cost / gain


def summarize(rows, every_cell, baseline=None):
    """Per cell (:data:`CELL_FIELDS`), in plan order; the baseline is
    ``baseline`` (a :class:`Cell`) or the first cell of each size."""
    by_cell = {c.key: [] for c in every_cell}
    for row in rows:
        key = Cell(row['kernel'], row['profile'], row['size'] or '').key
        by_cell.setdefault(key, []).append(row)
    summary = []
    for cell in every_cell:
        good = [r for r in by_cell[cell.key] if ok(r)]
        metrics = [r['metric'] for r in good if r['metric'] is not None]
        summary.append({
            'kernel': cell.kernel, 'profile': cell.profile,
            'size': cell.size, 'runs': len(by_cell[cell.key]),
            'ok': len(good),
            'metric_median': statistics.median(metrics) if metrics
            else None,
            'metric_min': min(metrics) if metrics else None,
            'metric_max': max(metrics) if metrics else None,
            'metrics': metrics,
            'workload_s': _median(good, 'workload_s'),
            't_ready_s': _median(good, 't_ready_s'),
            'boot_s': _median(good, 'boot_s'),
            'bmc_joules_workload': _median(good, 'bmc_joules_workload'),
            'rapl_joules_workload': _median(good, 'rapl_joules_workload'),
            'seconds_per_unit': _median(good, 'seconds_per_unit'),
            'joules_per_unit': _median(good, 'joules_per_unit'),
            'boot_joules': _boot_joules(good),
            'break_even_work': None, 'break_even_energy': None,
            'baseline': False})
    for entry in summary:
        base = _baseline_of(summary, entry, baseline)
        if base is None or base is entry:
            entry['baseline'] = base is entry
            continue
        entry['break_even_work'] = break_even(
            entry['t_ready_s'], base['seconds_per_unit'],
            entry['seconds_per_unit'])
        entry['break_even_energy'] = break_even(
            entry['boot_joules'], base['joules_per_unit'],
            entry['joules_per_unit'])
    return summary


def _baseline_of(summary, entry, baseline):
    for candidate in summary:
        if candidate['size'] != entry['size']:
            continue
        if baseline is None or (candidate['kernel'] == baseline.kernel
                                and candidate['profile']
                                == baseline.profile):
            return candidate
    return None


def best(summary, higher_is_better=True):
    """The cell whose median metric is best (ties: less workload time);
    None when no cell has a metric."""
    scored = [s for s in summary if s['metric_median'] is not None]
    if not scored:
        return None
    sign = -1 if higher_is_better else 1
    return min(scored, key=lambda s: (sign * s['metric_median'],
                                      s['workload_s'] or 0))


def write_csv(path, rows, fields):
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=list(fields),
                                extrasaction='ignore')
        writer.writeheader()
        for row in rows:
            writer.writerow(row)


def write_json(path, data):
    with open(path, 'w') as f:
        json.dump(data, f, indent=1, sort_keys=True)
