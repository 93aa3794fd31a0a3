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

import json
from unittest import mock

from osc_lib import exceptions
import pytest

from ironic_bmc_client.osc import deploy
from ironic_bmc_client.osc import pgo as pgo_cmd
from ironic_bmc_client import pgo
from ironic_bmc_client import runs
from ironic_bmc_client.tests import fakes
from ironic_bmc_client.tests import test_sweep

# -- the loop's parts ---------------------------------------------------------


def test_break_even_is_the_loop_over_the_gain_per_run():
    assert pgo.break_even_runs(600.0, 10.0, 8.0) == 300.0
    assert pgo.break_even_runs(600.0, 10.0, 10.0) is None
    assert pgo.break_even_runs(600.0, 10.0, 11.0) is None
    assert pgo.break_even_runs(None, 10.0, 8.0) is None


def test_change_is_signed_so_that_plus_is_better():
    assert pgo.change(100.0, 110.0) == pytest.approx(0.10)
    assert pgo.change(10.0, 9.0, higher_is_better=False) == pytest.approx(
        0.10)
    assert pgo.change(None, 1.0) is None


def test_wait_build_says_each_step_and_returns_the_status():
    answers = iter([{'state': 'queued', 'variant': 'pgo'},
                    {'state': 'building', 'step': 'compiling'},
                    {'state': 'building', 'step': 'compiling'},
                    {'state': 'succeeded', 'kernel': 'http://k'}])
    said = []
    status = pgo.wait_build(lambda m, a: next(answers), 'b1', 60, 0,
                            said.append, sleep=lambda s: None)
    assert status['kernel'] == 'http://k'
    assert said == ['  kernel build b1 (pgo): queued',
                    '  kernel build b1 (None): compiling']


def test_a_failed_build_ends_the_loop_with_its_log():
    answer = {'state': 'failed', 'variant': 'gcov',
              'error': 'options of the config did not stick: CONFIG_X',
              'log_tail': 'line\n' * 30 + 'last line\n'}
    with pytest.raises(pgo.PgoError) as err:
        pgo.wait_build(lambda m, a: answer, 'b1', 60, 0, print)
    assert 'kernel build b1 (gcov) failed: options of the config' in str(
        err.value)
    assert str(err.value).endswith('last line')


def test_a_build_that_does_not_end_in_time():
    clock = iter(range(0, 1000, 50))
    with pytest.raises(pgo.PgoError, match='did not end within 100 s'):
        pgo.wait_build(lambda m, a: {'state': 'building', 'step': 'x'},
                       'b1', 100, 0, lambda t: None, sleep=lambda s: None,
                       clock=lambda: next(clock))


def test_a_profiling_run_must_have_kept_its_profile():
    good = {'deploy_id': 'r1', 'state': 'finished', 'workload_exit_code': 0,
            'kernel_profile': {'files': 3}}
    assert pgo.check_profile(good) == {'files': 3}
    with pytest.raises(pgo.PgoError, match='did not finish cleanly'):
        pgo.check_profile(dict(good, workload_exit_code=1))
    with pytest.raises(pgo.PgoError, match='kept no kernel profile: not '
                                           'collected: no gcov'):
        pgo.check_profile(dict(good, kernel_profile={
            'error': 'not collected: no gcov'}))


def test_where_measured_says_tcg_cannot_show_a_gain():
    assert pgo.where_measured({'emulated': True}).startswith(
        'TCG: no gain can be measured')
    assert 'virtual machine' in pgo.where_measured({
        'hypervisor': True, 'cpu_model': 'Xeon', 'clocksource': 'kvm-clock'})
    assert pgo.where_measured({'cpu_model': 'EPYC 7742'}) == (
        'Measured on hardware: EPYC 7742.')


# -- the command -------------------------------------------------------------

class PgoCloud(test_sweep.Cloud):
    """The sweep's node, a conductor that builds kernels, and profiling
    runs that keep a profile; the pgo kernel's runs are faster."""

    def __init__(self, failed_variant=None):
        super().__init__()
        self.builds = {}
        self.build_calls = []
        self.failed_variant = failed_variant
        self.baremetal.node.vendor_passthru.side_effect = self._passthru
        self._set_deploy = self._set
        self.baremetal.node.set_provision_state.side_effect = self._deploy

    def _passthru(self, node, method, args=None, http_method=None):
        if method == 'kernel_build':
            self.build_calls.append(dict(args))
            key = json.dumps(args, sort_keys=True)
            build_id = self.builds.setdefault(key, '%024x' % (
                len(self.builds) + 1))
            cached = any(c == args for c in self.build_calls[:-1])
            return {'build_id': build_id, 'state': 'queued',
                    'cached': cached, 'variant': args['variant']}
        assert method == 'kernel_build_status'
        build_id = args['build_id']
        variant = next(json.loads(k)['variant'] for k, v in
                       self.builds.items() if v == build_id)
        if variant == self.failed_variant:
            return {'state': 'failed', 'variant': variant,
                    'error': 'make failed', 'log_tail': 'cc1: error\n'}
        base = 'http://conductor/bmc-kernels/%s/' % build_id
        return {'build_id': build_id, 'state': 'succeeded',
                'variant': variant, 'seconds': 300.0,
                'kernel': base + 'vmlinuz',
                'kernel_modules': base + 'modules.cpio.gz',
                'build': {'profile': {'gcda_files': 1200,
                                      'objects_without_profile': 40}}
                if variant == 'pgo' else {}}

    def _deploy(self, node, target):
        self._set_deploy(node, target)
        if target == 'deleted' or self.state != 'active':
            return
        info = self.patches[-1]
        report = self.runs.reports[-1]
        kernel = info.get('kernel', '')
        variant = ('gcov' if info.get('container_kernel_profile') else
                   'pgo' if kernel.endswith('3/vmlinuz') else 'plain')
        report['boot'] = {'kernel_booted': {
            'version': '#%s-%s SMP' % (variant, kernel[-20:-8])}}
        if info.get('container_kernel_profile'):
            report['kernel_profile'] = {
                'files': 1200, 'bytes': 9000000,
                'uname_v': '#gcov SMP', 'kernel_build': 'g',
                'machine': {'emulated': True}}
        if variant == 'pgo':
            for stage in report['stages']:
                if stage['name'] == 'workload-exited':
                    stage['duration_s'] = 9.0
            self.runs.outputs[report['deploy_id']] = [runs.RunOutput(
                'GFLOPS: 1.2\n', 'finished', True)]


def _pgo(cloud, tmp_path, *extra):
    application = fakes.app(cloud.runs, baremetal=cloud.baremetal)
    cloud.app = application
    argv = ['--node', 'node-0', '--image', 'registry.example:5000/gemm:1',
            '--repeat', '2', '--metric-regex', r'GFLOPS: ([0-9.]+)',
            '--output-dir', str(tmp_path / 'pgo'), '--interval', '0',
            *extra]
    with mock.patch.object(deploy.time, 'sleep'):
        return fakes.run(pgo_cmd.PgoContainer, application, argv)


def test_the_loop_profiles_builds_and_compares(tmp_path):
    cloud = PgoCloud()
    columns, rows = _pgo(cloud, tmp_path)
    table = {r[0]: fakes.as_dict(columns, r) for r in rows}
    assert [c['variant'] for c in cloud.build_calls] == ['plain', 'gcov',
                                                         'pgo']
    # The profiling run: the gcov kernel, the profile asked for, a job.
    profiling = cloud.patches[0]
    assert profiling['container_kernel_profile'] == 'gcov'
    assert profiling['container_mode'] == 'job'
    assert profiling['kernel'].endswith('%024x/vmlinuz' % 2)
    first_run = cloud.runs.reports[0]['deploy_id']
    assert cloud.build_calls[2] == {'variant': 'pgo',
                                    'profile_run': first_run}
    # The profiling key is gone once that run is over, however it ended.
    assert mock.call(mock.ANY, [{
        'op': 'remove', 'path': '/instance_info/container_kernel_profile'}]
    ) in cloud.baremetal.node.update.call_args_list
    # Then 2 runs on each kernel, none profiled.
    assert len(cloud.patches) == 5
    assert not any('container_kernel_profile' in p
                   for p in cloud.patches[1:])
    assert table['plain']['change'] == 'baseline'
    assert table['pgo']['ok/runs'] == '2/2'
    assert table['pgo']['workload s'] == '9.0'
    assert table['pgo']['uname -v'].startswith('#pgo-')
    assert table['plain']['uname -v'].startswith('#plain-')
    # The loop: two builds (300 s each) and the profiling run (50 + 10 s)
    # over the 1 s each run gains.
    assert table['pgo']['break-even (runs)'] == '660'
    progress = cloud.app.stderr.getvalue()
    assert 'TCG: no gain can be measured' in progress
    assert 'used the profile: 1200 .gcda files, 40 objects' in progress
    state = json.loads((tmp_path / 'pgo' / 'pgo.json').read_text())
    assert state['profile']['deploy_id'] == first_run
    assert state['where_measured'].startswith('TCG')
    assert (tmp_path / 'pgo' / 'runs' / 'cells.csv').exists()


def test_a_second_loop_reuses_the_profile_and_the_builds(tmp_path):
    cloud = PgoCloud()
    _pgo(cloud, tmp_path)
    deploys = cloud.deploys
    _pgo(cloud, tmp_path)
    # No second profiling run: only the 4 comparison runs.
    assert cloud.deploys == deploys + 4
    assert not any('container_kernel_profile' in p
                   for p in cloud.patches[5:])
    assert cloud.build_calls[3:] == cloud.build_calls[:3]
    assert 'Profile: reusing run' in cloud.app.stderr.getvalue()
    assert 'Kernel pgo: build %024x (cached)' % 3 in (
        cloud.app.stderr.getvalue())
    # --reprofile counts again.
    _pgo(cloud, tmp_path, '--reprofile')
    assert cloud.patches[9].get('container_kernel_profile') == 'gcov'


def test_a_failed_build_stops_before_any_run(tmp_path):
    cloud = PgoCloud(failed_variant='gcov')
    with pytest.raises(exceptions.CommandError,
                       match=r'kernel build .* \(gcov\) failed: make failed'):
        _pgo(cloud, tmp_path)
    assert cloud.deploys == 0


def test_a_profiling_run_without_profile_stops_the_loop(tmp_path):
    cloud = PgoCloud()
    original = cloud._deploy

    def no_profile(node, target):
        original(node, target)
        if cloud.runs.reports:
            cloud.runs.reports[-1].pop('kernel_profile', None)
    cloud.baremetal.node.set_provision_state.side_effect = no_profile
    with pytest.raises(exceptions.CommandError,
                       match='kept no kernel profile'):
        _pgo(cloud, tmp_path)
    # The node was undeployed; no pgo build was asked for.
    assert ('set', 'deleted') in cloud.events
    assert [c['variant'] for c in cloud.build_calls] == ['plain', 'gcov']


