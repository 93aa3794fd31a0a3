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

"""Charts of a run report: the stage timeline and the BMC power curve.

Each function takes a run report as the runs API returns it
(``GET /v1/runs/{deploy_id}``) and returns the chart's bytes, as PNG or
SVG.  The CLI plugin and the Horizon plugin both draw with these.

They draw on :mod:`.chart_canvas` (a figure of their own, no pyplot, no
backend chosen for the process, the same bytes for the same report);
``render`` also draws the noise histogram (:mod:`.noise_chart`).
"""

from matplotlib import patches

from bmc_common import protocol
from ironic_bmc_client import chart_canvas
from ironic_bmc_client import noise_chart

FORMATS = chart_canvas.FORMATS
KIND_TIMELINE = 'timeline'
KIND_POWER = 'power'
KIND_NOISE = 'noise'
KINDS = (KIND_TIMELINE, KIND_POWER, KIND_NOISE)

#: How the chart names the ``boot`` section's phases.
BOOT_PHASE_NAMES = {
    protocol.BOOT_PHASE_KEXEC: 'kexec',
    'firmware_ipxe_s': 'firmware + iPXE',
    'kernel_s': 'kernel',
    'initramfs_unpack_s': 'initramfs unpack',
    'kernel_to_init_s': 'kernel to init',
    'userspace_to_agent_s': 'init to agent',
    'agent_to_heartbeat_s': 'agent to heartbeat',
    'heartbeat_to_step_s': 'heartbeat to first step',
}
#: The ``boot`` section's phases (bmc_common.protocol.BOOT_PHASES): the
#: phase, the mark it starts from, and how the chart names it.
BOOT_PHASES = tuple(
    (phase, start, BOOT_PHASE_NAMES[phase]) for phase, start, _end in (
        ((protocol.BOOT_PHASE_KEXEC, 'power_on', None),)
        + protocol.BOOT_PHASES))

_STAGE_COLOR = '#4c72b0'
_STAGE_COLORS = {protocol.STAGE_ARTIFACT_READY: '#dd8452',
                 protocol.STAGE_WORKLOAD_EXITED: '#55a868',
                 protocol.STAGE_POWERED_OFF: '#8c8c8c'}
# kexec and firmware + iPXE share a colour: a run has one or the other.
_BOOT_COLORS = ('#8172b3', '#8172b3', '#da8bc3', '#ccb974', '#64b5cd',
                '#c44e52', '#e5ae38', '#6d904f')
_WORKLOAD_COLOR = '#55a868'
_POWER_COLOR = '#c44e52'
#: (Raised by every chart function when the report lacks its data.)
ChartUnavailable = chart_canvas.ChartUnavailable


def stage_timeline(report, fmt='png'):
    """The run's stages as horizontal bars, from the first stage's start,
    with the ``boot`` breakdown of ``agent-up`` under it when the report
    has one.

    :raises ChartUnavailable: no stage is recorded yet.
    """
    chart_canvas.check_format(fmt)
    stages = _ordered_stages(report)
    if not stages:
        raise ChartUnavailable(
            'no stages recorded yet in run %s (state: %s)'
            % (report.get('deploy_id'), report.get('state') or 'unknown'))
    t0 = stages[0]['start']
    boot = _boot_segments(report.get('boot'), t0)

    rows = []   # (label, [(left, width, color, label or None)])
    for s in stages:
        duration = _duration(s)
        rows.append((s['name'], [(s['start'] - t0, duration,
                                  _STAGE_COLORS.get(s['name'], _STAGE_COLOR),
                                  _seconds(duration))]))
        if s['name'] == protocol.STAGE_AGENT_UP and boot:
            rows.append(('  boot breakdown', boot))

    fig = chart_canvas.new_figure(
        9.0, 2.0 + 0.42 * len(rows) + (0.6 if boot else 0))
    ax = fig.add_subplot()
    end = max(left + width for _label, bars in rows
              for left, width, _c, _t in bars)
    for y, (label, bars) in enumerate(rows):
        sub = label.startswith(' ')
        for left, width, color, text in bars:
            ax.barh(y, max(width, end * 0.002), left=left,
                    height=0.45 if sub else 0.7, color=color,
                    edgecolor='white' if sub else color, linewidth=0.6)
            if not sub:
                ax.annotate(text, (left + width, y), xytext=(4, 0),
                            textcoords='offset points', va='center',
                            fontsize=8.5)
    ax.set_yticks(range(len(rows)), [label for label, _b in rows],
                  fontsize=9)
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_xlim(0, end * 1.12)
    ax.set_xlabel('seconds since the first stage began (%s)'
                  % stages[0]['name'], fontsize=9)
    ax.grid(axis='x', color='#dddddd', linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ('top', 'right'):
        ax.spines[side].set_visible(False)
    if boot:
        fig.legend([_patch(color) for _l, _w, color, _t in boot],
                   [text for _l, _w, _c, text in boot],
                   title='boot breakdown: agent-up, phase by phase',
                   title_fontsize=8.5, fontsize=8,
                   loc='outside lower center', ncols=4, frameon=False)
    summary = ['state %s' % report.get('state')]
    if report.get('t_ready_s') is not None:
        summary.append('T_ready %s' % _seconds(report['t_ready_s']))
    workload = _stage(stages, protocol.STAGE_WORKLOAD_EXITED)
    if workload:
        summary.append('workload %s' % _seconds(_duration(workload)))
    chart_canvas.title(ax, 'Stages of the run', report, ', '.join(summary))
    return chart_canvas.render(fig, fmt)


def power_curve(report, fmt='png'):
    """The node's power as its BMC read it, over the run, with the
    workload's window shaded and its energy in the legend.

    :raises ChartUnavailable: the run has no BMC power samples (the
        message gives the energy section's reason).
    """
    chart_canvas.check_format(fmt)
    energy = report.get('energy') or {}
    series = report.get('power_series') or {}
    points = [p for p in series.get('points') or ()
              if p and p[1] is not None]
    if not points:
        raise ChartUnavailable(
            'no BMC power samples in run %s (%s)'
            % (report.get('deploy_id'),
               energy.get('reason') or energy.get('bmc')
               or 'the run has not been sampled yet'))
    times = [p[0] for p in points]
    watts = [p[1] for p in points]

    fig = chart_canvas.new_figure(9.0, 4.6)
    ax = fig.add_subplot()
    period = series.get('period_s')
    ax.plot(times, watts, color=_POWER_COLOR, linewidth=1.4, marker='o',
            markersize=2.5,
            label='BMC power (%d samples%s)'
            % (len(points), ', every %s' % _seconds(period)
               if period else ''))
    window = list(series.get('workload') or (None, None)) + [None, None]
    start, stop = window[0], window[1]
    if start is not None:
        ax.axvspan(start, stop if stop is not None else times[-1],
                   color=_WORKLOAD_COLOR, alpha=0.18, linewidth=0,
                   label=_workload_label(energy, stop is None))
    ax.set_xlim(min(times[0], 0), times[-1] + max(times[-1] * 0.02, 1))
    ax.set_ylim(0, max(watts) * 1.2 or 1)
    ax.set_xlabel('seconds since the first BMC sample', fontsize=9)
    ax.set_ylabel('power (W)', fontsize=9)
    ax.grid(color='#dddddd', linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ('top', 'right'):
        ax.spines[side].set_visible(False)
    fig.legend(loc='outside lower center', fontsize=8.5, ncols=2,
               frameon=False)
    summary = []
    if energy.get('bmc_joules_run') is not None:
        summary.append('run %s' % _joules(energy['bmc_joules_run']))
    if energy.get('bmc_joules_workload') is not None:
        summary.append('workload %s'
                       % _joules(energy['bmc_joules_workload']))
    if energy.get('mean_watts_workload') is not None:
        summary[-1] += ' at %.1f W mean' % energy['mean_watts_workload']
    chart_canvas.title(ax, 'BMC power', report,
           'BMC energy: ' + ', '.join(summary) if summary else None)
    return chart_canvas.render(fig, fmt)


def render(report, kind, fmt='png'):
    """The chart ``kind`` (``timeline``, ``power`` or ``noise``) of a
    report."""
    if kind == KIND_TIMELINE:
        return stage_timeline(report, fmt)
    if kind == KIND_POWER:
        return power_curve(report, fmt)
    if kind == KIND_NOISE:
        return noise_chart.render(report, fmt)
    raise ValueError('unknown chart %r; one of: %s'
                     % (kind, ', '.join(KINDS)))


def _ordered_stages(report):
    """The report's stages with a start and an end, in protocol order
    (names the protocol does not know last, by start)."""
    stages = [s for s in report.get('stages') or ()
              if s.get('start') is not None and s.get('end') is not None]

    def key(s):
        try:
            return (protocol.STAGES.index(s['name']), s['start'])
        except ValueError:
            return (len(protocol.STAGES), s['start'])
    stages.sort(key=key)
    if stages:
        # The first row is the earliest stage: the x axis starts there.
        first = min(stages, key=lambda s: s['start'])
        stages.remove(first)
        stages.insert(0, first)
    return stages


def _stage(stages, name):
    return next((s for s in stages if s['name'] == name), None)


def _duration(stage):
    duration = stage.get('duration_s')
    if duration is None:
        duration = stage['end'] - stage['start']
    return max(duration, 0.0)


def _boot_segments(boot, t0):
    """The measured boot phases as (left, width, color, legend label)."""
    if not isinstance(boot, dict):
        return []
    phases = boot.get('phases') or {}
    marks = boot.get('marks') or {}
    segments = []
    for i, (phase, mark, name) in enumerate(BOOT_PHASES):
        width = phases.get(phase)
        if width is None or marks.get(mark) is None:
            continue
        segments.append((marks[mark] - t0, width, _BOOT_COLORS[i],
                         '%s %s' % (name, _seconds(width))))
    return segments


def _workload_label(energy, running):
    parts = ['workload%s' % (' (running)' if running else '')]
    if energy.get('bmc_joules_workload') is not None:
        parts.append('BMC %s' % _joules(energy['bmc_joules_workload']))
    if energy.get('mean_watts_workload') is not None:
        parts.append('%.1f W mean' % energy['mean_watts_workload'])
    if energy.get('rapl_joules_workload') is not None:
        parts.append('RAPL %s' % _joules(energy['rapl_joules_workload']))
    return parts[0] + (': ' + ', '.join(parts[1:]) if parts[1:] else '')


def _patch(color):
    return patches.Patch(color=color)


def _seconds(value):
    if value is None:
        return '?'
    if value < 0.1:
        return '%.2f s' % value
    if value < 100:
        return '%.1f s' % value
    return '%.0f s' % value


def _joules(value):
    if value >= 10000:
        return '%.1f kJ' % (value / 1000.0)
    return '%.0f J' % value
