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

"""The OS-noise histogram of a run: for each probe of the report
(``before-tunables``, ``after-tunables``, a service step's) and each CPU,
how many delays of each length (log2 bins of cycles) the cycle-level
probe saw, with the IncludeOS thesis's bucket edges (150, 400, 2000,
6000 cycles) marked.  Drawn with the run charts' figure and rendering
(:mod:`.chart_canvas`)."""

from ironic_bmc_client import chart_canvas

#: The thesis's bucket edges, in cycles.
EDGES = (150, 400, 2000, 6000)
_COLORS = ('#4c72b0', '#dd8452', '#55a868', '#c44e52', '#8172b3',
           '#937860', '#da8bc3', '#8c8c8c')


def series(report):
    """``[(label, cpu report)]`` of every probe that has a histogram."""
    found = []
    for label, result in sorted((report.get('noise') or {}).items()):
        # As the step returned it: {"noise": {"cpus": [...]}}.
        result = (result or {}).get('noise', result) or {}
        for cpu in result.get('cpus') or ():
            if (cpu.get('cycles') or {}).get('histogram'):
                found.append(('%s, CPU %s' % (label, cpu['cpu']), cpu))
    return found


def render(report, fmt='png', summary=None):
    """The histogram as ``fmt`` bytes.

    :raises chart_canvas.ChartUnavailable: no cycle-level probe in the report.
    """
    chart_canvas.check_format(fmt)
    lines = series(report)
    if not lines:
        raise chart_canvas.ChartUnavailable(
            'run %s has no cycle-level noise probe: set instance_info/'
            'container_noise_probe, with bmc-noise in the agent ramdisk '
            '(the Python probe keeps no histogram)'
            % report.get('deploy_id'))
    fig = chart_canvas.new_figure(9.0, 4.8)
    ax = fig.add_subplot()
    for index, (label, cpu) in enumerate(lines):
        cycles = cpu['cycles']
        bins = [lo for lo, _n in cycles['histogram']]
        counts = [n for _lo, n in cycles['histogram']]
        ax.step(bins + [bins[-1] * 2], counts + [counts[-1]], where='post',
                color=_COLORS[index % len(_COLORS)], linewidth=1.6,
                label='%s: %.0f events/s, %.3f %% lost, mean %.0f cycles '
                      '(90 %% CI %.0f-%.0f)'
                      % (label, cpu['interruptions_per_s'],
                         100 * cpu['lost_share'], cycles['mean'],
                         cycles['ci90'][0], cycles['ci90'][1]))
    for edge in EDGES:
        ax.axvline(edge, color='#999999', linestyle=':', linewidth=0.9)
    ax.set_xscale('log', base=2)
    ax.set_yscale('log')
    ax.set_xlabel('delay between two counter readings (cycles; dotted: '
                  'the 150, 400, 2000, 6000-cycle bucket edges)',
                  fontsize=9)
    ax.set_ylabel('events', fontsize=9)
    ax.grid(color='#eeeeee', linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(loc='upper right', fontsize=7.5, frameon=False)
    first = lines[0][1]['cycles']
    chart_canvas.title(ax, 'OS noise', report, summary or (
        '%s at %.2f GHz, floor %d cycles' % (
            first['counter'], first['tsc_hz'] / 1e9, first['floor'])))
    return chart_canvas.render(fig, fmt)
