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

"""OS noise of several runs side by side, as the IncludeOS thesis
compares a unikernel and a Linux on the same machine.

Every cycle-level probe of every run is a row: a container run's probes
before and after its tunables (``bmc-noise`` on Linux, per CPU) and a
unikernel run's (the same measurement core with no operating system, on
the boot CPU).  Rows of the Python fallback probe (no cycle counts) are
listed with what they have.
"""

from ironic_bmc_client import noise_chart

COLUMNS = ('run', 'node', 'system', 'probe', 'cpu', 'counter',
           'floor (cycles)', 'events/s', 'time lost %', 'mean (cycles)',
           'stddev', '90% CI', '150-400', '400-2000', '2000-6000', '>6000')
BUCKETS = ('150-400', '400-2000', '2000-6000', '>6000')


def system(report):
    """What ran: the unikernel, or Linux (its kernel) and the tunables
    the run applied (its ``before-tunables`` probe ran before them, its
    ``after-tunables`` one after)."""
    if report.get('kind') == 'unikernel':
        return ' '.join(['unikernel'] + list(report.get('kernel_args')
                                             or ())).strip()
    kernel = (report.get('kernel') or 'default kernel').rsplit('/', 1)[-1]
    knobs = sorted(report.get('tunables') or ())
    return 'Linux (%s)%s' % (kernel, ', tunables %s' % ','.join(knobs)
                             if knobs else '')


def _num(value, fmt):
    return '-' if value is None else fmt % value


def rows(report):
    """The table rows of one run's probes."""
    found = []
    for label, result in sorted((report.get('noise') or {}).items()):
        result = (result or {}).get('noise', result) or {}
        for cpu in result.get('cpus') or ():
            cycles = cpu.get('cycles') or {}
            buckets = cycles.get('buckets') or {}
            ci90 = cycles.get('ci90')
            found.append((
                (report.get('deploy_id') or '')[:8],
                report.get('node_name') or report.get('node'),
                system(report), label, cpu.get('cpu'),
                cycles.get('counter') or result.get('method') or '-',
                _num(cycles.get('floor'), '%d'),
                _num(cpu.get('interruptions_per_s'), '%.1f'),
                _num(None if cpu.get('lost_share') is None
                     else cpu['lost_share'] * 100, '%.3f'),
                _num(cycles.get('mean'), '%.1f'),
                _num(cycles.get('stddev'), '%.1f'),
                '%.0f..%.0f' % tuple(ci90) if ci90 else '-',
            ) + tuple(_num(buckets.get(b), '%d') for b in BUCKETS))
    return found


def table(reports):
    """``(COLUMNS, rows)`` of all ``reports``, in the order given."""
    return COLUMNS, [row for report in reports for row in rows(report)]


def _short(report):
    """A run's name in a chart's legend: its id and what ran."""
    what = 'unikernel' if report.get('kind') == 'unikernel' else 'Linux'
    return '%s %s' % ((report.get('deploy_id') or '?')[:8], what)


def combined(reports):
    """One report-like mapping whose ``noise`` holds every run's probes,
    labelled by run: what :func:`noise_chart.render` draws in one
    chart."""
    noise = {}
    for report in reports:
        for label, result in (report.get('noise') or {}).items():
            name = _short(report)
            noise[name if label == 'unikernel' else '%s %s' % (
                name, label)] = result
    nodes = sorted({r.get('node_name') or r.get('node') or '?'
                    for r in reports})
    return {'deploy_id': '%d runs' % len(reports),
            'node_name': ', '.join(nodes), 'noise': noise}


def _floors(reports):
    """The counter's floor of each run: what the chart's subtitle says."""
    floors = []
    for report in reports:
        for result in (report.get('noise') or {}).values():
            result = (result or {}).get('noise', result) or {}
            cycles = [(c.get('cycles') or {}) for c in result.get('cpus')
                      or ()]
            found = sorted({c['floor'] for c in cycles if 'floor' in c})
            if found:
                floors.append('%s %s' % (_short(report), '/'.join(
                    str(f) for f in found)))
                break
    return 'loop floors (cycles): ' + ', '.join(floors)


def chart(reports, fmt='png'):
    """The histograms of every run in one chart.

    :raises charts.ChartUnavailable: no run has a cycle-level probe.
    """
    return noise_chart.render(combined(reports), fmt,
                              summary=_floors(reports))
