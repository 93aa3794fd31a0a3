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

"""``openstack baremetal container sweep`` and the sweep's arithmetic."""

import csv
import json
import os
import types
from unittest import mock
import uuid

from osc_lib import exceptions
import pytest

from ironic_bmc_client.osc import deploy
from ironic_bmc_client.osc import sweep as sweep_cmd
from ironic_bmc_client import runs
from ironic_bmc_client import sweep
from ironic_bmc_client import sweep_apply
from ironic_bmc_client import sweep_charts
from ironic_bmc_client.tests import fakes
from ironic_bmc_client.tests import fixtures


# -- the arithmetic ----------------------------------------------------------

def test_plan_runs_every_cell_before_repeating_one():
    order = sweep.plan(['default'], ['none', 'low-noise'], [], 2)
    assert [(c.profile, r) for c, r in order] == [
        ('none', 0), ('low-noise', 0), ('none', 1), ('low-noise', 1)]
    with pytest.raises(sweep.SweepError, match='--repeat'):
        sweep.plan(['k'], ['p'], [], 0)


@pytest.mark.parametrize('output,regex,key,expected', [
    ('gflops 1.5\nGFLOPS: 12.25\n', r'GFLOPS: ([0-9.]+)', None, 12.25),
    ('{"rps": 100}\nnoise\n{"rps": 250.5, "x": 1}\n', None, 'rps', 250.5),
    ('{"other": 1}\n', None, 'rps', None),
    ('GFLOPS: n/a\n', r'GFLOPS: (\S+)', None, None),
    ('', r'x', None, None),
])
def test_metric_from_the_output(output, regex, key, expected):
    assert sweep.extract_metric(output, regex, key) == expected


def test_record_of_a_report():
    row = sweep.record(fixtures.report(), sweep.Cell('k', 'p', '4'), 1, 3.5)
    assert row['workload_s'] == 120.0
    assert row['t_ready_s'] == 54.3
    assert row['boot_s'] == 41.5
    assert row['work'] == 4.0
    assert row['seconds_per_unit'] == 30.0
    assert row['joules_per_unit'] == pytest.approx(21890.4 / 4)
    assert sweep.ok(row)
    # As the conductor stores stages: start and end, no duration.
    report = fixtures.report()
    for stage in report['stages']:
        del stage['duration_s']
    row = sweep.record(report, sweep.Cell('k', 'p'), 0, None)
    assert row['workload_s'] == pytest.approx(120.0)
    assert row['seconds_per_unit'] == pytest.approx(120.0)


def _row(profile, metric, workload, ready, size='', state='finished',
         bmc_run=None, bmc_work=None):
    return {'kernel': 'k', 'profile': profile, 'size': size,
            'state': state, 'exit_code': 0, 'metric': metric,
            'workload_s': workload, 't_ready_s': ready, 'boot_s': 40.0,
            'bmc_joules_run': bmc_run, 'bmc_joules_workload': bmc_work,
            'rapl_joules_workload': None, 'work': 1.0,
            'seconds_per_unit': workload, 'joules_per_unit': bmc_work}


def test_break_even_is_the_boot_over_the_gain_per_unit():
    """Table V of the BMC paper: the tuned configuration's boot (60 s)
    pays off after 60 / (10 - 8) = 30 runs of the workload; a slower one
    never does."""
    cells = sweep.cells(['k'], ['none', 'tuned', 'worse'])
    rows = [_row('none', 1.0, 10.0, 50.0, bmc_run=1500, bmc_work=1000),
            _row('none', 1.2, 10.0, 50.0, bmc_run=1500, bmc_work=1000),
            _row('tuned', 2.0, 8.0, 60.0, bmc_run=1400, bmc_work=800),
            _row('worse', 0.5, 12.0, 50.0),
            _row('worse', 9.9, 1.0, 1.0, state='failed')]
    summary = sweep.summarize(rows, cells)
    base, tuned, worse = summary
    assert base['baseline'] and base['break_even_work'] is None
    assert base['metric_median'] == pytest.approx(1.1)
    assert tuned['break_even_work'] == pytest.approx(30.0)
    # Boot energy 600 J over a gain of 200 J a run.
    assert tuned['break_even_energy'] == pytest.approx(3.0)
    assert worse['break_even_work'] is None
    assert (worse['runs'], worse['ok']) == (2, 1)
    assert sweep.best(summary)['profile'] == 'tuned'
    assert sweep.best(summary, higher_is_better=False)['profile'] == 'worse'
    again = sweep.summarize(rows, cells, baseline=sweep.Cell('k', 'tuned'))
    assert again[1]['baseline'] and again[0]['break_even_work'] is None


def test_state_resumes_only_its_own_sweep(tmp_path):
    path = str(tmp_path / 'state.json')
    state = sweep.State(path, {'image': 'a'})
    cell = sweep.Cell('k', 'p')
    state.add(cell, 0, {'metric': 1.0})
    again = sweep.State(path, {'image': 'a'})
    assert again.load() == 1 and again.done(cell, 0)
    assert not again.done(cell, 1)
    with pytest.raises(sweep.SweepError, match='belongs to another sweep'):
        sweep.State(path, {'image': 'b'}).load()


# -- the command -------------------------------------------------------------

class Cloud:
    """A node that deploys into a finished run whose output holds a metric
    (higher with the ``tuned`` profile), and undeploys to available."""

    def __init__(self, fail_on=(), interrupt_on=()):
        self.runs = fakes.FakeRuns()
        self.state = 'available'
        self.deploys = 0
        self.patches = []
        self.events = []
        self.fail_on = fail_on
        self.interrupt_on = interrupt_on
        self.baremetal = mock.Mock()
        self.baremetal.node.get.side_effect = self._get
        self.baremetal.node.update.side_effect = self._update
        self.baremetal.node.set_provision_state.side_effect = self._set
        self.baremetal.node.wait_for_provision_state.side_effect = (
            lambda node, state, **kw: self.events.append(('wait', state)))

    def _get(self, ident, fields=None):
        node = types.SimpleNamespace(uuid=fixtures.NODE, name='node-0',
                                     provision_state=self.state,
                                     last_error=None)
        if self.state == 'deploy failed':
            node.last_error = 'Agent lost during the deploy'
        return node

    def _update(self, node, patch):
        self.patches.append({op['path'].rsplit('/', 1)[-1]: op['value']
                             for op in patch})

    def _set(self, node, target):
        self.events.append(('set', target))
        if target == 'deleted':
            self.state = 'available'
            return
        self.deploys += 1
        if self.deploys in self.interrupt_on:
            self.state = 'wait call-back'   # ^C while the node boots
            raise KeyboardInterrupt
        if self.deploys in self.fail_on:
            self.state = 'deploy failed'
            return
        self.state = 'active'
        info = self.patches[-1]
        tuned = info.get('container_tunables') == 'tuned'
        deploy_id = str(uuid.UUID(int=self.deploys))
        report = fixtures.report(
            deploy_id=deploy_id, created=fixtures.CREATED + self.deploys,
            t_ready_s=60.0 if tuned else 50.0)
        for stage in report['stages']:
            if stage['name'] == 'workload-exited':
                stage['duration_s'] = 8.0 if tuned else 10.0
        self.runs.reports.append(report)
        text = 'GFLOPS: %.1f\n' % ((2.0 if tuned else 1.0) + self.deploys
                                   / 100.0)
        self.runs.outputs[deploy_id] = [runs.RunOutput(text, 'finished',
                                                       True)]


def _sweep(cloud, tmp_path, *extra):
    application = fakes.app(cloud.runs, baremetal=cloud.baremetal)
    cloud.app = application
    argv = ['node-0', '--image', 'registry.example:5000/gemm:1',
            '--tunables', 'none', '--tunables', 'tuned', '--repeat', '2',
            '--metric-regex', r'GFLOPS: ([0-9.]+)', '--env', 'OMP=2',
            '--output-dir', str(tmp_path / 'out'), '--interval', '0',
            *extra]
    with mock.patch.object(deploy.time, 'sleep'):
        return fakes.run(sweep_cmd.SweepContainer, application, argv)


def test_sweep_runs_each_cell_and_undeploys_after_each(tmp_path):
    cloud = Cloud()
    columns, rows = _sweep(cloud, tmp_path)
    progress = cloud.app.stderr.getvalue()
    assert 'Run 4/4: kernel default, tunables tuned, repeat 2' in progress
    assert 'finished, metric 2.0, workload 8.0 s, T_ready 60.0 s' in (
        progress)
    table = [dict(zip(columns, r, strict=True)) for r in rows]
    assert [(t['profile'], t['ok/runs']) for t in table] == [
        ('none', '2/2'), ('tuned', '2/2')]
    assert table[0]['break-even (work)'] == 'baseline'
    # 60 s of boot over 2 s gained a run.
    assert table[1]['break-even (work)'] == '30'
    assert len(cloud.patches) == 4
    assert all(p['container_mode'] == 'job' and p['container_env'] == {
        'OMP': '2'} for p in cloud.patches)
    assert ['container_tunables' in p for p in cloud.patches] == [
        False, True, False, True]
    assert cloud.events.count(('set', 'deleted')) == 4
    assert cloud.state == 'available'
    out = tmp_path / 'out'
    with open(out / 'runs.csv') as f:
        assert len(list(csv.DictReader(f))) == 4
    with open(out / 'sweep.json') as f:
        data = json.load(f)
    assert data['best'] == {'kernel': 'default', 'profile': 'tuned',
                            'size': ''}
    assert (out / 'sweep.png').read_bytes().startswith(b'\x89PNG')


def test_a_failed_run_is_recorded_and_the_node_undeployed(tmp_path):
    cloud = Cloud(fail_on=(2,))
    columns, rows = _sweep(cloud, tmp_path)
    table = [dict(zip(columns, r, strict=True)) for r in rows]
    assert table[1]['ok/runs'] == '1/2'
    with open(tmp_path / 'out' / 'runs.csv') as f:
        failed = [r for r in csv.DictReader(f) if r['error']]
    assert 'Agent lost during the deploy' in failed[0]['error']
    assert cloud.events.count(('set', 'deleted')) == 4


def test_an_interrupted_sweep_undeploys_and_resumes(tmp_path):
    cloud = Cloud(interrupt_on=(3,))
    with pytest.raises(KeyboardInterrupt):
        _sweep(cloud, tmp_path)
    assert cloud.events[-1] == ('wait', 'available')
    assert cloud.state == 'available'
    with open(tmp_path / 'out' / 'state.json') as f:
        assert len(json.load(f)['runs']) == 2
    cloud.interrupt_on = ()
    columns, rows = _sweep(cloud, tmp_path)
    # Two more runs, not four.
    assert cloud.deploys == 5
    assert [r[3] for r in rows] == ['2/2', '2/2']


def test_another_sweep_in_the_same_directory_is_refused(tmp_path):
    cloud = Cloud()
    _sweep(cloud, tmp_path, '--size', '100')
    with pytest.raises(exceptions.CommandError, match='another sweep'):
        _sweep(cloud, tmp_path)
    assert os.path.exists(tmp_path / 'out' / 'cells.csv')


def test_kernels_and_sizes(tmp_path):
    cloud = Cloud()
    _sweep(cloud, tmp_path, '--kernel', 'lts=http://h/k,http://h/m',
           '--kernel', 'rt=http://h/rt', '--size', '64', '--repeat', '1')
    kernels = [(p.get('kernel'), p.get('kernel_modules'),
                p['container_env'].get('BMC_SWEEP_SIZE'))
               for p in cloud.patches]
    assert kernels == [('http://h/k', 'http://h/m', '64')] * 2 + [
        ('http://h/rt', None, '64')] * 2
    with pytest.raises(exceptions.CommandError, match='NAME=KERNEL_URL'):
        _sweep(Cloud(), tmp_path / 'x', '--kernel', 'nourl')


def test_chart_of_the_cells(tmp_path):
    cells = sweep.cells(['k'], ['none', 'tuned'], ['64'])
    rows = [_row('none', 1.0, 10.0, 50.0, size='64', bmc_work=900),
            _row('tuned', 2.0, 8.0, 60.0, size='64', bmc_work=700)]
    summary = sweep.summarize(rows, cells)
    svg = sweep_charts.render(summary, rows, 'svg', metric_name='gflops')
    assert b'gflops' in svg and b'size 64' in svg
    # The same cells, the same bytes.
    assert svg == sweep_charts.render(summary, rows, 'svg',
                                      metric_name='gflops')
    assert sweep_charts.render(summary, [], 'png').startswith(b'\x89PNG')
    with pytest.raises(ValueError):
        sweep_charts.render(summary, rows, 'gif')


# -- --apply-image / --apply-template -----------------------------------------

IMAGE_ID = '5b1e7c4e-0000-4000-8000-0000000000aa'
K_ID = '5b1e7c4e-0000-4000-8000-0000000000bb'
M_ID = '5b1e7c4e-0000-4000-8000-0000000000cc'


class Response:
    def __init__(self, status, body=None):
        self.status_code = status
        self._body = body
        self.text = json.dumps(body)

    def json(self):
        return self._body


class Glance:
    """Glance's images API, as the keystoneauth session reaches it."""

    def __init__(self, image):
        self.image = image
        self.patches = []

    def get(self, url, params=None, raise_exc=True):
        if url.endswith('/v2/images'):
            found = [self.image] if params == {
                'name': self.image['name']} else []
            return Response(200, {'images': found})
        if url.endswith(self.image['id']):
            return Response(200, self.image)
        return Response(404, {})

    def patch(self, url, json=None, headers=None, raise_exc=True):
        assert headers == {'Content-Type': sweep_apply.PATCH_TYPE}
        self.patches.append((url, json))
        return Response(200, self.image)


def _with_glance(cloud, image):
    glance = Glance(image)
    original = fakes.app

    def app(*args, **kwargs):
        application = original(*args, **kwargs)
        manager = application.client_manager
        manager.session = glance
        manager.region_name, manager.interface = 'RegionOne', 'public'
        manager.get_endpoint_for_service_type = (
            lambda service, region_name=None, interface=None:
            'http://glance:9292/')
        return application
    return glance, mock.patch.object(fakes, 'app', app)


def test_apply_image_records_the_winner_on_the_glance_image(tmp_path):
    cloud = Cloud()
    glance, patched = _with_glance(cloud, {
        'id': IMAGE_ID, 'name': 'gemm', 'container_tunables': 'old',
        'kernel_id': K_ID})
    with patched:
        _sweep(cloud, tmp_path, '--apply-image', 'gemm')
    # The winner (tuned, default kernel): the profile replaced, the
    # image's own kernel removed (the default kernel won).
    assert glance.patches == [(
        'http://glance:9292/v2/images/%s' % IMAGE_ID, [
            {'op': 'replace', 'path': '/container_tunables',
             'value': 'tuned'},
            {'op': 'remove', 'path': '/kernel_id'}])]
    assert 'Applied kernel default, tunables tuned to Glance image' in (
        cloud.app.stderr.getvalue())
    with open(tmp_path / 'out' / 'sweep.json') as f:
        assert json.load(f)['applied'][0]['glance_image'] == IMAGE_ID


def test_apply_image_refuses_url_kernels_before_any_run(tmp_path):
    cloud = Cloud()
    glance, patched = _with_glance(cloud, {'id': IMAGE_ID, 'name': 'gemm'})
    with patched, pytest.raises(exceptions.CommandError,
                                match='kernel lts is http://h/k, not a '
                                      'Glance image'):
        _sweep(cloud, tmp_path, '--apply-image', 'gemm',
               '--kernel', 'lts=http://h/k')
    assert cloud.deploys == 0 and glance.patches == []


def test_apply_image_of_an_unknown_name_is_refused_first(tmp_path):
    cloud = Cloud()
    _glance, patched = _with_glance(cloud, {'id': IMAGE_ID, 'name': 'gemm'})
    with patched, pytest.raises(exceptions.CommandError,
                                match='no Glance image is named nope'):
        _sweep(cloud, tmp_path, '--apply-image', 'nope')
    assert cloud.deploys == 0


def test_the_image_patch_of_a_glance_kernel():
    ops = sweep_apply.image_patch(
        {'id': IMAGE_ID, 'container_tunables': 'thp-never'},
        {'kernel': 'lts', 'profile': 'none', 'size': ''},
        {'lts': {'kernel': K_ID, 'kernel_modules': M_ID}})
    assert ops == [
        {'op': 'remove', 'path': '/container_tunables'},
        {'op': 'add', 'path': '/kernel_id', 'value': K_ID},
        {'op': 'add', 'path': '/ramdisk_id', 'value': M_ID}]


class NotFound(Exception):
    http_status = 404


def test_apply_template_creates_the_sweeps_template(tmp_path):
    cloud = Cloud()
    cloud.baremetal.deploy_template.get.side_effect = NotFound()
    _sweep(cloud, tmp_path, '--apply-template', 'CUSTOM_BMC_BEST_GEMM')
    cloud.baremetal.deploy_template.create.assert_called_once_with(
        name='CUSTOM_BMC_BEST_GEMM', steps=[{
            'interface': 'deploy', 'step': 'bmc_apply_tunables',
            'priority': 85, 'args': {'tunables': 'tuned'}}],
        extra={'bmc_sweep_image': 'registry.example:5000/gemm:1'})


def test_apply_template_updates_only_a_sweeps_template(tmp_path):
    cloud = Cloud()
    cloud.baremetal.deploy_template.get.return_value = types.SimpleNamespace(
        extra={'bmc_sweep_image': 'old'})
    _sweep(cloud, tmp_path, '--apply-template', 'CUSTOM_BMC_BEST_GEMM')
    name, patch = cloud.baremetal.deploy_template.update.call_args[0]
    assert name == 'CUSTOM_BMC_BEST_GEMM'
    assert patch[0]['value'][0]['args'] == {'tunables': 'tuned'}
    # An operator's own template is never overwritten: refused first.
    cloud = Cloud()
    cloud.baremetal.deploy_template.get.return_value = types.SimpleNamespace(
        extra={'bmc_profile': 'thp-never'})
    with pytest.raises(exceptions.CommandError,
                       match='not written by a sweep'):
        _sweep(cloud, tmp_path / 'b', '--apply-template',
               'CUSTOM_BMC_TUNABLES_THP_NEVER')
    assert cloud.deploys == 0
    cloud.baremetal.deploy_template.update.assert_not_called()


def test_apply_template_refuses_kernels_and_bad_traits_first(tmp_path):
    for argv, match in (
            (['--apply-template', 'best'], 'custom trait'),
            (['--apply-template', 'CUSTOM_X', '--kernel', 'lts=http://h/k'],
             'selects tunables, not a kernel')):
        cloud = Cloud()
        with pytest.raises(exceptions.CommandError, match=match):
            _sweep(cloud, tmp_path, *argv)
        assert cloud.deploys == 0
