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

"""The charts of a run report: both formats, the missing-data cases, and
nothing changed for a program that uses matplotlib itself."""

import os
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from bmc_common import protocol
from ironic_bmc_client import charts
from ironic_bmc_client.tests import fixtures

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))


def _svg_root(data):
    return ElementTree.fromstring(data).tag


@pytest.mark.parametrize('draw', [charts.stage_timeline, charts.power_curve])
def test_png(draw):
    data = draw(fixtures.report(), 'png')
    assert data.startswith(PNG_MAGIC)


@pytest.mark.parametrize('draw', [charts.stage_timeline, charts.power_curve])
def test_svg(draw):
    data = draw(fixtures.report(), 'svg')
    assert _svg_root(data) == '{http://www.w3.org/2000/svg}svg'


@pytest.mark.parametrize('draw', [charts.stage_timeline, charts.power_curve])
def test_same_report_same_bytes(draw):
    assert draw(fixtures.report(), 'svg') == draw(fixtures.report(), 'svg')
    assert draw(fixtures.report(), 'png') == draw(fixtures.report(), 'png')


def test_timeline_names_stages_boot_phases_and_the_run():
    svg = charts.stage_timeline(fixtures.report(), 'svg').decode()
    # Text is drawn as glyph paths; matplotlib keeps each label's text in
    # a comment of the SVG.
    for text in ('agent-up', 'powered-off', 'boot breakdown',
                 'firmware + iPXE 13.6 s', 'node-0', '6f1c2a9e',
                 'T_ready 54.3 s', '41.5 s'):
        assert text in svg, text


def test_timeline_without_boot_or_with_a_boot_error():
    for boot in (None, {'error': 'the agent sent no boot clock'}):
        svg = charts.stage_timeline(fixtures.report(boot=boot), 'svg')
        assert b'boot breakdown' not in svg


def test_timeline_kexec_boot():
    report = fixtures.report()
    phases = report['boot']['phases']
    phases['kexec_s'] = phases.pop('firmware_ipxe_s')
    svg = charts.stage_timeline(report, 'svg')
    assert b'kexec 13.6 s' in svg


def test_timeline_orders_by_protocol_and_computes_durations():
    report = fixtures.report()
    report['stages'] = [dict(s) for s in reversed(report['stages'])]
    for s in report['stages']:
        del s['duration_s']
    assert [s['name'] for s in charts._ordered_stages(report)] == [
        s['name'] for s in fixtures.REPORT['stages']]
    assert b'41.5 s' in charts.stage_timeline(report, 'svg')


def test_timeline_of_a_run_just_begun():
    report = fixtures.deploying_report()
    report['stages'] = [{'name': 'power-on', 'start': fixtures.CREATED,
                         'end': fixtures.CREATED + 3.7}]
    assert charts.stage_timeline(report, 'png').startswith(PNG_MAGIC)


def test_timeline_without_stages_says_so():
    with pytest.raises(charts.ChartUnavailable) as exc:
        charts.stage_timeline(fixtures.deploying_report())
    assert exc.value.reason == ('no stages recorded yet in run %s (state: '
                                'deploying)' % fixtures.DEPLOY_ID)


def test_power_without_samples_gives_the_energy_reason():
    with pytest.raises(charts.ChartUnavailable) as exc:
        charts.power_curve(fixtures.no_bmc_report(), 'png')
    assert str(exc.value) == (
        'no BMC power samples in run %s (no BMC (Wake-on-LAN node): the '
        'energy is measured in-band only (RAPL))' % fixtures.DEPLOY_ID)


def test_power_of_a_run_not_sampled_yet():
    with pytest.raises(charts.ChartUnavailable, match='not been sampled'):
        charts.power_curve(fixtures.deploying_report())


def test_power_legend_has_the_workload_energy():
    svg = charts.power_curve(fixtures.report(), 'svg').decode()
    for text in ('BMC 21.9 kJ', '182.4 W mean', 'RAPL 15.2 kJ',
                 '92 samples, every 2.0 s', 'power (W)'):
        assert text in svg, text


def test_power_of_a_running_workload():
    report = fixtures.report(state='running', energy={'available': True})
    report['power_series']['workload'] = [53.5, None]
    svg = charts.power_curve(report, 'svg')
    assert b'workload (running)' in svg


def test_unknown_format_and_kind():
    with pytest.raises(ValueError, match='jpeg'):
        charts.stage_timeline(fixtures.report(), 'jpeg')
    with pytest.raises(ValueError, match='pie'):
        charts.render(fixtures.report(), 'pie')


def test_render_dispatches():
    assert charts.render(fixtures.report(), 'power', 'png').startswith(
        PNG_MAGIC)


def test_import_chooses_no_backend_and_needs_no_ironic():
    code = ('import sys\n'
            'from ironic_bmc_client import charts\n'
            'from ironic_bmc_client.tests import fixtures\n'
            'charts.stage_timeline(fixtures.report(), "png")\n'
            'charts.power_curve(fixtures.report(), "svg")\n'
            'bad = [m for m in sys.modules if m.split(".")[0] in '
            '("ironic", "oslo_config", "ironic_bmc")'
            ' or m == "matplotlib.pyplot"]\n'
            'assert not bad, bad\n')
    env = dict(os.environ)
    env.pop('MPLBACKEND', None)
    subprocess.run([sys.executable, '-c', code], check=True, env=env)


def test_every_boot_phase_has_a_name():
    """The chart names each phase the protocol defines (a new phase
    fails here, not as a KeyError in a tenant's chart)."""
    assert {phase for phase, _start, _end in protocol.BOOT_PHASES} | {
        protocol.BOOT_PHASE_KEXEC} == set(charts.BOOT_PHASE_NAMES)
    assert charts.BOOT_PHASES[0][:2] == (protocol.BOOT_PHASE_KEXEC,
                                         'power_on')


def _noise_report():
    def cpu(n, scale):
        return {'cpu': n, 'interruptions': 3, 'interruptions_per_s': 3.0,
                'lost_share': 0.0004 * scale,
                'cycles': {'counter': 'rdtscp', 'tsc_hz': 2.1e9,
                           'floor': 36, 'mean': 900.0 * scale,
                           'ci90': [200.0, 1600.0 * scale],
                           'histogram': [[128, 40 * scale], [256, 12],
                                         [4096, 3], [65536, scale]]}}
    # As the conductor keeps the step's result: {"noise": {...}}.
    return fixtures.report(noise={
        'before-tunables': {'noise': {'cpus': [cpu(0, 3), cpu(1, 2)]}},
        'after-tunables': {'cpus': [cpu(1, 1)]}})


def test_noise_histogram():
    from ironic_bmc_client import noise_chart
    report = _noise_report()
    assert [label for label, _c in noise_chart.series(report)] == [
        'after-tunables, CPU 1', 'before-tunables, CPU 0',
        'before-tunables, CPU 1']
    svg = charts.render(report, 'noise', 'svg')
    assert b'before-tunables, CPU 0' in svg
    assert svg == charts.render(report, 'noise', 'svg')
    assert charts.render(report, 'noise', 'png').startswith(b'\x89PNG')


def test_noise_histogram_needs_the_cycle_level_probe():
    report = fixtures.report(noise={'before-tunables': {'cpus': [
        {'cpu': 0, 'interruptions': 2, 'median_us': 12.0}]}})
    with pytest.raises(charts.ChartUnavailable,
                       match='no cycle-level noise probe'):
        charts.render(report, 'noise')
    with pytest.raises(charts.ChartUnavailable):
        charts.render(fixtures.report(), 'noise')


def test_the_charts_share_one_canvas_and_no_private_helpers():
    """The run charts, the noise histogram and the sweep's charts draw
    on chart_canvas; none reaches into another's private helpers, and
    the noise histogram does not import the run charts (no cycle)."""
    import ast
    import os
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in ('charts.py', 'noise_chart.py', 'sweep_charts.py'):
        with open(os.path.join(here, name)) as f:
            tree = ast.parse(f.read())
        private = [n.attr for n in ast.walk(tree)
                   if isinstance(n, ast.Attribute) and n.attr.startswith('_')
                   and isinstance(n.value, ast.Name)
                   and n.value.id in ('charts', 'chart_canvas',
                                      'noise_chart')]
        assert private == [], (name, private)
        imported = {a.name for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom)
                    and n.module == 'ironic_bmc_client' for a in n.names}
        assert 'chart_canvas' in imported, name
        if name != 'charts.py':
            assert 'charts' not in imported, name
