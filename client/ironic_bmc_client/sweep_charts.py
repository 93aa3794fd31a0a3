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

"""The chart of a sweep: per cell, the metric (every run and the median),
the workload's energy, and the time to the workload (T_ready) beside the
workload's own time.  Drawn with the run charts' figure and rendering
(:mod:`.chart_canvas`), so the same cells give the same bytes."""

from ironic_bmc_client import chart_canvas

_RUN_COLOR = '#8c8c8c'
_MEDIAN_COLOR = '#4c72b0'
_ENERGY_COLOR = '#c44e52'
_READY_COLOR = '#8172b3'
_WORKLOAD_COLOR = '#55a868'


def _label(entry):
    text = '%s\n%s' % (entry['kernel'], entry['profile'])
    if entry['size']:
        text += '\nsize %s' % entry['size']
    return text


def _key(row):
    return (row['kernel'], row['profile'], row['size'] or '')


def render(summary, rows, fmt='png', metric_name=None):
    """The sweep's chart as ``fmt`` bytes; ``metric_name`` labels the
    metric's axis."""
    chart_canvas.check_format(fmt)
    fig = chart_canvas.new_figure(max(6.0, 1.6 * len(summary) + 2.0), 7.5)
    metric_ax, energy_ax, time_ax = fig.subplots(3, 1, sharex=True)
    xs = range(len(summary))
    index = {(s['kernel'], s['profile'], s['size'] or ''): i
             for i, s in enumerate(summary)}
    for row in rows:
        if row.get('metric') is not None and _key(row) in index:
            metric_ax.plot(index[_key(row)], row['metric'], 'o',
                           color=_RUN_COLOR, markersize=4, zorder=2)
    medians = [(x, s['metric_median']) for x, s in zip(
        xs, summary, strict=True) if s['metric_median'] is not None]
    metric_ax.plot([x for x, _m in medians], [m for _x, m in medians], '_',
                   color=_MEDIAN_COLOR, markersize=28, mew=2.5, zorder=3)
    metric_ax.set_ylabel('%s\n(runs, median)' % (metric_name or 'metric'))
    fig.suptitle('Sweep: %d cells, %d runs' % (len(summary), len(rows)),
                 x=0.02, ha='left', fontsize=11, fontweight='bold')
    for row in rows:
        joules = row.get('bmc_joules_workload')
        if joules is None:
            joules = row.get('rapl_joules_workload')
        if joules is not None and _key(row) in index:
            energy_ax.plot(index[_key(row)], joules, 'o',
                           color=_ENERGY_COLOR, markersize=4)
    energy_ax.set_ylabel('workload\nenergy (J)')
    ready = [s['t_ready_s'] or 0 for s in summary]
    work = [s['workload_s'] or 0 for s in summary]
    time_ax.bar(xs, ready, color=_READY_COLOR, label='T_ready (deploy to '
                'workload start)')
    time_ax.bar(xs, work, bottom=ready, color=_WORKLOAD_COLOR,
                label='workload')
    time_ax.set_ylabel('seconds\n(medians)')
    # Room above the bars for the legend.
    top = max([r + w for r, w in zip(ready, work, strict=True)] or [1.0])
    time_ax.set_ylim(0, top * 1.35 or 1.0)
    time_ax.legend(loc='upper left', ncol=2, fontsize=8, frameon=False)
    time_ax.set_xticks(list(xs))
    time_ax.set_xticklabels([_label(s) for s in summary], fontsize=8)
    for ax in (metric_ax, energy_ax, time_ax):
        ax.grid(axis='y', color='#dddddd', linewidth=0.6)
        ax.set_axisbelow(True)
    return chart_canvas.render(fig, fmt)
