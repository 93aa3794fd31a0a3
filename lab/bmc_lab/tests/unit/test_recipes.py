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

"""The lab recipes without building anything: the definitions, the
sweep's command, the build's inputs and layer, and the entrypoints
themselves, run here against stand-ins of the programs they drive."""

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from unittest import mock

import pytest

from bmc_lab import cli
from bmc_lab import ociimage
from bmc_lab import recipes
from bmc_lab.recipes import build
from bmc_lab.recipes import sweep
from bmc_lab import settings as lab_settings
from bmc_common.tunables import profiles
from ironic_bmc_client import sweep as client_sweep

ENTRYPOINTS = recipes.ENTRYPOINTS


# --- definitions -------------------------------------------------------------

def test_recipes_defined():
    assert sorted(recipes.RECIPES) == ['gemm', 'mpi', 'redis', 'web']
    for recipe in recipes.RECIPES.values():
        assert os.path.exists(os.path.join(ENTRYPOINTS, recipe.script))
        assert recipe.repo == 'bmc/recipe-' + recipe.name
        assert recipe.min_size <= recipe.default_size <= recipe.max_size
        for size in recipe.lab_sizes + recipe.hardware_sizes:
            recipe.check_size(size)
        # The baseline first; two cells, as the paper's tables (mpi: the
        # baseline alone, see test_recipe_mpi).
        assert len(recipe.tunables) == (1 if recipe is recipes.MPI else 2)


@pytest.mark.parametrize('name', sorted(recipes.RECIPES))
def test_tunables_cells_resolve(name):
    """Every cell is a profile or a JSON object the conductor accepts."""
    for cell in recipes.get(name).tunables:
        if cell == recipes.NO_TUNABLES:
            continue
        assert profiles.resolve(cell)


def test_cells_mirror_the_paper():
    assert [profiles.resolve(c) for c in recipes.GEMM.tunables] == [
        {'smt': 'on'}, {'smt': 'off'}]
    assert [profiles.resolve(c) for c in recipes.REDIS.tunables] == [
        {'thp': 'always'}, {'thp': 'never'}]
    assert recipes.WEB.tunables[0] == 'none'
    rfs = profiles.resolve(recipes.WEB.tunables[1])
    # The rfs profile, and the loopback the benchmark's traffic uses.
    assert rfs == {'rps_sock_flow_entries': 32768,
                   'rps_cpus': {'*': 'all', 'lo': 'all'},
                   'rps_flow_cnt': {'*': 32768, 'lo': 32768}}


def test_get_unknown():
    with pytest.raises(recipes.RecipeError, match='gemm, mpi, redis, web'):
        recipes.get('hpl')


@pytest.mark.parametrize('value,expected', [
    (512, 512), ('512', 512), (' 64 ', 64), ('0016', 16)])
def test_check_size_good(value, expected):
    assert recipes.GEMM.check_size(value) == expected


@pytest.mark.parametrize('value', [
    'abc', '', '-1', '1e3', '5.0', '15', '65537', '٣', None])
def test_check_size_bad(value):
    with pytest.raises(recipes.RecipeError, match='gemm'):
        recipes.GEMM.check_size(value)


def test_files():
    files = recipes.REDIS.files()
    assert set(files) == {'/usr/local/bin/bmc-redis',
                          recipes.LIB_DIR + '/common.sh'}
    assert files['/usr/local/bin/bmc-redis'].startswith(b'#!/bin/sh')
    # gemm is Python: no shell library.
    assert list(recipes.GEMM.files()) == ['/usr/local/bin/bmc-gemm']


# --- the sweep's command -----------------------------------------------------

IMAGE = '127.0.0.1:5050/bmc/recipe-redis@sha256:' + 'a' * 64


def test_sweep_args_redis():
    args = sweep.sweep_args(recipes.REDIS, IMAGE, ['bmc-lab-node-0'],
                            output_dir='/tmp/out')
    assert args == [
        'baremetal', 'container', 'sweep', 'bmc-lab-node-0',
        '--image', IMAGE, '--tunables', 'thp-always',
        '--tunables', 'thp-never', '--size', '20000', '--repeat', '3',
        '--metric-json', 'requests_per_second', '--timeout', '1800',
        '--output-dir', '/tmp/out']
    assert sweep.run_count(args) == 6


def test_sweep_args_gemm_hardware_and_kernels():
    args = sweep.sweep_args(
        recipes.GEMM, IMAGE, ['a', 'b'], hardware=True, repeat=5,
        kernels=['lts=http://x/vmlinuz', 'rt=http://x/rt,http://x/m.cpio'],
        timeout=600)
    assert args[3:5] == ['a', 'b']
    assert args[args.index('--kernel') + 1] == 'lts=http://x/vmlinuz'
    assert [args[i + 1] for i, a in enumerate(args) if a == '--size'] == [
        '4096', '8192']
    assert [args[i + 1] for i, a in enumerate(args)
            if a == '--tunables'] == ['{"smt": "on"}', '{"smt": "off"}']
    assert args[args.index('--metric-json') + 1] == 'gflops'
    assert args[args.index('--timeout') + 1] == '600'
    assert '--output-dir' not in args
    assert '--lower-is-better' not in args
    # 2 kernels x 2 cells x 2 sizes x 5 repeats.
    assert sweep.run_count(args) == 40


def test_sweep_args_own_cells_and_sizes():
    args = sweep.sweep_args(recipes.WEB, IMAGE, ['n'], sizes=['100', 200],
                            tunables=['none', 'rfs'], repeat=1)
    assert [args[i + 1] for i, a in enumerate(args) if a == '--size'] == [
        '100', '200']
    assert [args[i + 1] for i, a in enumerate(args)
            if a == '--tunables'] == ['none', 'rfs']
    assert '--apply-template' not in args


def test_sweep_args_record_the_winner():
    args = sweep.sweep_args(recipes.REDIS, IMAGE, ['n'],
                            apply_template='CUSTOM_BMC_BEST_REDIS',
                            apply_image='redis-bench')
    assert args[-4:] == ['--apply-template', 'CUSTOM_BMC_BEST_REDIS',
                         '--apply-image', 'redis-bench']


@pytest.mark.parametrize('kwargs,match', [
    ({'sizes': ['abc']}, 'whole number'),
    ({'sizes': ['0']}, 'from 1'),
    ({'repeat': 0}, '--repeat'),
    ({'kernels': ['nourl']}, '--kernel'),
    ({'nodes': []}, 'no node'),
])
def test_sweep_args_refused(kwargs, match):
    nodes = kwargs.pop('nodes', ['n'])
    with pytest.raises(recipes.RecipeError, match=match):
        sweep.sweep_args(recipes.WEB, IMAGE, nodes, **kwargs)


def test_sweep_args_parse_as_the_sweep_command():
    """What the recipe composes, the client's sweep parses into its cells
    (the JSON cells survive as one argument each)."""
    from ironic_bmc_client.osc import sweep as osc_sweep
    args = sweep.sweep_args(recipes.WEB, IMAGE, ['n0'], output_dir='o')
    parser = osc_sweep.SweepContainer(mock.Mock(), None).get_parser('x')
    parsed = parser.parse_args(args[3:])
    assert parsed.tunables == list(recipes.WEB.tunables)
    assert parsed.metric_json == 'requests_per_second'
    assert parsed.size == ['5000']
    cells = client_sweep.cells(['default'], parsed.tunables, parsed.size)
    assert cells[0].profile == 'none'


def test_shell_line_round_trips():
    settings = lab_settings.Settings(state_dir='/var/lib/bmc-lab')
    args = sweep.sweep_args(recipes.WEB, IMAGE, ['n0'], output_dir='o')
    line = sweep.shell_line(settings, args)
    words = shlex.split(line)
    assert words[0] == 'OS_CLIENT_CONFIG_FILE=/var/lib/bmc-lab/clouds.yaml'
    assert words[1:4] == ['openstack', '--os-cloud', 'bmc-lab']
    assert words[4:] == args


def test_cli_sweep_dry_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('BMC_RECIPE_CACHE', str(tmp_path / 'cache'))
    code = cli.main(['--state-dir', str(tmp_path), 'recipe', 'sweep',
                     'gemm', '--dry-run', '--repeat', '2'])
    assert code == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith('$ OS_CLIENT_CONFIG_FILE=')
    words = shlex.split(line[2:])
    # Not built: the tag that "recipe build" pushes.
    assert '127.0.0.1:5050/bmc/recipe-gemm:latest' in words
    assert words[words.index('--output-dir') + 1] == str(
        tmp_path / 'sweeps' / 'gemm')
    assert words[words.index('--repeat') + 1] == '2'


def test_cli_sweep_bad_size(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('BMC_RECIPE_CACHE', str(tmp_path / 'cache'))
    code = cli.main(['--state-dir', str(tmp_path), 'recipe', 'sweep',
                     'redis', '--dry-run', '--size', 'lots'])
    assert code == 1
    assert 'whole number' in capsys.readouterr().err


def test_cli_list(capsys):
    assert cli.main(['recipe', 'list']) == 0
    out = capsys.readouterr().out
    for name in recipes.RECIPES:
        assert name in out


def test_cli_sweep_runs_on_the_lab(tmp_path, monkeypatch):
    """Without --dry-run: build (cached), push, reclaim the node, then the
    openstack command, as the admin of the profile."""
    settings = lab_settings.Settings(state_dir=str(tmp_path), nodes=2)
    done = mock.Mock(image=mock.Mock(digest='sha256:' + 'b' * 64))
    monkeypatch.setattr(cli, '_loaded', lambda args: settings)
    with mock.patch.object(build.Builder, 'build', return_value=done), \
            mock.patch.object(build, 'push',
                              return_value='r/bmc/recipe-web@x') as push, \
            mock.patch('bmc_lab.agent.ensure') as ensure, \
            mock.patch('bmc_lab.container_job.reclaim') as reclaim, \
            mock.patch('bmc_lab.container_job.use_container_interfaces'), \
            mock.patch('bmc_lab.osc.openstack', return_value=0) as osc:
        code = cli.main(['--state-dir', str(tmp_path), 'recipe', 'sweep',
                         'web', '--node', 'bmc-lab-node-1', '--node',
                         'elsewhere', '--repeat', '1'])
    assert code == 0
    push.assert_called_once_with(done, settings.registry_address)
    ensure.assert_called_once()
    # Only the lab's node is reclaimed, by its index.
    assert reclaim.call_args[0][1] == 1
    args = osc.call_args[0][1:]
    assert args[:5] == ('baremetal', 'container', 'sweep', 'bmc-lab-node-1',
                        'elsewhere')
    assert args[args.index('--image') + 1] == 'r/bmc/recipe-web@x'
    assert osc.call_args[1]['cloud'] == 'bmc-lab'
    # 2 cells x 1 size x 1 repeat, 1800 s each, and some slack.
    assert osc.call_args[1]['timeout'] == 2 * 1800 + 600


# --- the build's inputs, layer and layout -----------------------------------

def test_host_mirrors_deb822(tmp_path):
    d = tmp_path / 'sources.list.d'
    d.mkdir()
    (d / 'debian.sources').write_text(
        '# comment\nTypes: deb\nURIs: http://mirror.example/debian\n'
        'Suites: bookworm bookworm-updates\nComponents: main\n\n'
        'Types: deb deb-src\nURIs: http://sec.example/debian-security\n'
        'Suites: bookworm-security\nComponents: main\n')
    assert build.host_mirrors(str(tmp_path)) == (
        'http://mirror.example/debian', 'http://sec.example/debian-security')


def test_host_mirrors_one_line(tmp_path):
    (tmp_path / 'sources.list').write_text(
        'deb-src http://src.example/debian bookworm main\n'
        'deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian '
        'bookworm main\n# deb http://old.example/debian bookworm main\n')
    assert build.host_mirrors(str(tmp_path)) == (
        'http://m.example/debian', None)


def test_mirrors_env_and_defaults(tmp_path):
    assert build.mirrors({}, str(tmp_path)) == (
        build.DEFAULT_MIRROR, build.DEFAULT_SECURITY_MIRROR)
    assert build.mirrors({'BMC_RECIPE_MIRROR': 'http://x/debian/'},
                         str(tmp_path))[0] == 'http://x/debian'


def _builder(tmp_path):
    return build.Builder(cache=str(tmp_path), out=lambda *a: None,
                         mirror='http://m/debian', security='http://s/sec')


def test_inputs_follow_what_the_image_is_made_of(tmp_path):
    b = _builder(tmp_path)
    key = b.key(recipes.REDIS)
    assert key == _builder(tmp_path).key(recipes.REDIS)
    assert key != b.key(recipes.WEB)
    more = recipes.dataclasses.replace(recipes.REDIS, packages=(
        'redis-server', 'redis-tools', 'procps'))
    assert b.key(more) != key
    other = recipes.dataclasses.replace(recipes.REDIS, setup='true')
    assert b.key(other) != key
    # Another mirror is another base, so another image.
    assert build.Builder(cache=str(tmp_path), mirror='http://n/debian',
                         security='http://s/sec').key(recipes.REDIS) != key
    # The entrypoint's content counts.
    with mock.patch.object(recipes.Recipe, 'script_bytes',
                           return_value=b'#!/bin/sh\necho changed\n'):
        assert b.key(recipes.REDIS) != key
    assert b.path(recipes.REDIS).startswith(str(tmp_path / 'redis-'))


def test_cached_none_without_build(tmp_path):
    assert _builder(tmp_path).cached(recipes.GEMM) is None


def test_build_needs_root(tmp_path):
    with mock.patch('os.geteuid', return_value=1000), \
            pytest.raises(recipes.RecipeError, match='needs root'):
        _builder(tmp_path).build(recipes.WEB)


def _tree(path, mtime):
    (path / 'dev').mkdir(parents=True)
    (path / 'proc' / 'self').mkdir(parents=True)
    (path / 'usr' / 'bin').mkdir(parents=True)
    (path / 'usr' / 'bin' / 'x').write_text('#!/bin/sh\n')
    (path / 'dev' / 'leftover').write_text('')
    os.mkfifo(path / 'usr' / 'fifo')
    for dirpath, dirs, files in os.walk(path):
        for name in dirs + files + ['.']:
            os.utime(os.path.join(dirpath, name), (mtime, mtime))


def test_layer_entries(tmp_path):
    _tree(tmp_path, build.EPOCH + 1000)
    entries = {e.name: e for e in build.layer_entries(str(tmp_path))}
    assert 'dev' in entries and 'proc' in entries
    assert 'dev/leftover' not in entries and 'proc/self' not in entries
    assert 'usr/fifo' not in entries
    assert {e.mtime for e in entries.values()} == {build.EPOCH}


def test_layer_is_reproducible(tmp_path):
    """Two trees that differ only in mtimes after EPOCH (two builds) are
    one image."""
    _tree(tmp_path / 'a', build.EPOCH + 10)
    _tree(tmp_path / 'b', build.EPOCH + 99999)
    one = build.image_of(recipes.REDIS, str(tmp_path / 'a'))
    two = build.image_of(recipes.REDIS, str(tmp_path / 'b'))
    assert one.digest == two.digest
    cfg = one.config['config']
    assert cfg['Entrypoint'] == ['/usr/local/bin/bmc-redis']
    assert cfg['Env'] == [build.IMAGE_PATH]


def test_layout_round_trip(tmp_path):
    image = ociimage.build_image([[ociimage.Entry('hello', data=b'hi')]],
                                 entrypoint=['/hello'])
    build.write_layout(image, str(tmp_path / 'oci'), 'tag1')
    index = json.loads((tmp_path / 'oci' / 'index.json').read_text())
    assert index['manifests'][0]['digest'] == image.digest
    again = build.read_layout(str(tmp_path / 'oci'))
    assert again.digest == image.digest and again.blobs == image.blobs
    assert again.config == image.config
    layer = image.layer_digests[0].split(':')[1]
    (tmp_path / 'oci' / 'blobs' / 'sha256' / layer).write_bytes(b'bad')
    with pytest.raises(recipes.RecipeError, match='corrupt'):
        build.read_layout(str(tmp_path / 'oci'))


def test_push_tags_and_pins():
    image = ociimage.build_image([[ociimage.Entry('a')]])
    done = build.Build('web', 'c' * 64, '/x', image, {}, True)
    pusher = mock.Mock()
    ref = build.push(done, '127.0.0.1:5050', pusher=pusher)
    assert ref == '127.0.0.1:5050/bmc/recipe-web@' + image.digest
    assert [c[0][:2] for c in pusher.push_image.call_args_list] == [
        ('bmc/recipe-web', 'c' * 12), ('bmc/recipe-web', 'latest')]
    pusher.push_image.side_effect = RuntimeError('HTTP 500')
    with pytest.raises(recipes.RecipeError, match='cannot push'):
        build.push(done, '127.0.0.1:5050', pusher=pusher)


def test_enter_argv():
    argv = build.enter_argv('/r', ['/bin/true'], env=['A=1'])
    assert argv[:7] == ['unshare', '--mount', '--pid', '--fork',
                        '--kill-child', '--propagation', 'private']
    assert '--net' in argv and '--uts' in argv
    assert argv[argv.index('enter') + 1:] == ['/r', '1', 'A=1', '/bin/true']
    online = build.enter_argv('/r', ['x'], private_net=False, env=[])
    assert '--net' not in online
    assert online[online.index('enter') + 1:] == ['/r', '0', 'x']
    over = build.enter_argv('/r', ['x'], env=[], overlay='/scratch')
    assert over[over.index('overlay') + 1:] == ['/r', '/scratch', '1', 'x']
    assert any(a.startswith('ENTER=') for a in over)


def test_run_refuses_other_command(tmp_path):
    image = ociimage.build_image([[ociimage.Entry('a')]],
                                 entrypoint=['/bin/sh'])
    done = build.Build('web', 'c' * 64, str(tmp_path), image, {}, True)
    with pytest.raises(recipes.RecipeError, match='not /usr/local/bin'), \
            mock.patch('os.geteuid', return_value=0):
        build.run(done)
    with pytest.raises(recipes.RecipeError, match='needs root'), \
            mock.patch('os.geteuid', return_value=1000):
        build.run(done)


@pytest.mark.parametrize('output,expected', [
    ('a\n{"x": 1}\n', {'x': 1}),
    ('{"x": 1}\n\n  \n', {'x': 1}),
    ('{"x": 1}\nlast words\n', None),
    ('[1, 2]\n', None),
    ('', None),
    ('{broken\n', None),
])
def test_final_json(output, expected):
    assert build.final_json(output) == expected


# --- the shell entrypoints against stand-ins --------------------------------

REDIS_CSV = (
    '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",'
    '"p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
    '"SET","50000.00","0.600","0.100","0.500","0.900","1.000","2.000"\n'
    '"GET","200000.00","0.400","0.100","0.300","0.800","0.900","2.000"\n')

AB_OUT = """\
Server Software:        Apache/2.4.71
Document Path:          /index.html
Document Length:        10701 bytes

Concurrency Level:      4
Time taken for tests:   0.646 seconds
Complete requests:      {complete}
Failed requests:        {failed}
{non2xx}Total transferred:      54875000 bytes
Requests per second:    7740.97 [#/sec] (mean)
Time per request:       0.517 [ms] (mean)
Time per request:       0.129 [ms] (mean, across all concurrent requests)

Percentage of the requests served within a certain time (ms)
  50%      1
  99%      3
 100%      5 (longest request)
"""


def _stub(bindir, name, body):
    path = bindir / name
    path.write_text('#!/bin/sh\n' + body)
    path.chmod(0o755)


#: What the entrypoints and the stand-ins may run of this machine's; no
#: other program is on their PATH (this machine may have a real
#: redis-benchmark, and a real redis-server on 6379).
HOST_TOOLS = ('awk', 'cat', 'cut', 'date', 'grep', 'mkdir', 'mktemp', 'nproc',
              'rm', 'sed', 'sleep', 'tail', 'timeout', 'tr')


def _run_script(script, tmp_path, env):
    tools = tmp_path / 'tools'
    if not tools.exists():
        tools.mkdir()
        for name in HOST_TOOLS:
            os.symlink(shutil.which(name), tools / name)
    full = {'PATH': '%s:%s' % (tmp_path / 'bin', tools),
            'BMC_RECIPE_LIB': ENTRYPOINTS, 'STUB': str(tmp_path)}
    full.update(env)
    return subprocess.run(['/bin/sh', os.path.join(ENTRYPOINTS, script)],
                          env=full, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def redis_stubs(tmp_path):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    (tmp_path / 'bench.csv').write_text(REDIS_CSV)
    _stub(bindir, 'redis-server', 'case "$1" in --version) '
          'echo "Redis server v=7.0.15 sha=0:0 malloc=jemalloc";; *) '
          'echo "$@" >"$STUB/server.args"; echo $$ >"$STUB/server.pid"; '
          'trap "exit 0" TERM; while :; do sleep 0.05; done;; esac\n')
    _stub(bindir, 'redis-cli', 'case "$*" in *shutdown*) '
          'kill "$(cat "$STUB/server.pid")";; *"info server"*) '
          'test -s "$STUB/server.pid" && printf "# Server\\r\\n'
          'process_id:%s\\r\\n" "$(cat "$STUB/server.pid")";; esac\n')
    _stub(bindir, 'redis-benchmark', 'echo "$@" >"$STUB/bench.args"; '
          'cat "$STUB/bench.csv"; exit "${STUB_RC:-0}"\n')
    return tmp_path


def test_redis_entrypoint(redis_stubs):
    proc = _run_script('redis.sh', redis_stubs, {'BMC_SWEEP_SIZE': '300'})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith('bmc-redis: redis 7.0.15')
    assert sum(1 for line in lines if line.startswith('{')) == 1
    result = json.loads(lines[-1])
    assert result['metric'] == 'requests_per_second'
    assert result['set_rps'] == 50000.0 and result['get_rps'] == 200000.0
    # 2 N requests over N/50000 + N/200000 seconds: the harmonic mean.
    assert result['requests_per_second'] == 80000.0
    assert result['n'] == 300 and result['redis'] == '7.0.15'
    assert result['get_p50_ms'] == 0.3
    assert client_sweep.extract_metric(
        proc.stdout, json_key='requests_per_second') == 80000.0
    server = (redis_stubs / 'server.args').read_text()
    assert '--bind 127.0.0.1' in server and '--disable-thp no' in server
    assert "--save" in server
    bench = (redis_stubs / 'bench.args').read_text().split()
    assert bench[bench.index('-n') + 1] == '300'
    assert bench[bench.index('-t') + 1] == 'set,get'
    assert '--csv' in bench


@pytest.mark.parametrize('env,match', [
    ({'BMC_SWEEP_SIZE': 'abc'}, "BMC_SWEEP_SIZE must be a whole number"),
    ({'BMC_SWEEP_SIZE': '-5'}, 'BMC_SWEEP_SIZE must be a whole number'),
    ({'BMC_SWEEP_SIZE': '1e4'}, 'BMC_SWEEP_SIZE must be a whole number'),
    ({'BMC_SWEEP_SIZE': '0'}, 'BMC_SWEEP_SIZE must be from 1'),
    ({'BMC_SWEEP_SIZE': '99999999999999999999'}, 'must be from 1'),
    ({'BMC_REDIS_PORT': '70000'}, 'BMC_REDIS_PORT must be from 1 to 65535'),
    ({'BMC_BENCH_SECONDS': 'soon'}, 'BMC_BENCH_SECONDS'),
])
def test_redis_entrypoint_bad_input(redis_stubs, env, match):
    proc = _run_script('redis.sh', redis_stubs, env)
    assert proc.returncode == 2
    assert match in proc.stderr and proc.stderr.startswith('bmc-redis: ')
    assert '{' not in proc.stdout
    assert not (redis_stubs / 'server.pid').exists()


def test_redis_entrypoint_leading_zeros(redis_stubs):
    proc = _run_script('redis.sh', redis_stubs, {'BMC_SWEEP_SIZE': '0100'})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])['n'] == 100


def test_redis_entrypoint_benchmark_fails(redis_stubs):
    proc = _run_script('redis.sh', redis_stubs, {'STUB_RC': '1'})
    assert proc.returncode == 2
    assert 'redis-benchmark failed (exit 1)' in proc.stderr
    assert '{' not in proc.stdout


def test_redis_entrypoint_no_rates(redis_stubs):
    (redis_stubs / 'bench.csv').write_text('"test","rps"\n')
    proc = _run_script('redis.sh', redis_stubs, {})
    assert proc.returncode == 2
    assert 'no SET and GET rates' in proc.stderr


def test_redis_entrypoint_other_server_on_the_port(redis_stubs):
    """Another server answering on the port is not taken for this one."""
    _stub(redis_stubs / 'bin', 'redis-cli', 'printf "process_id:1\\r\\n"\n')
    _stub(redis_stubs / 'bin', 'redis-server', 'case "$1" in --version) '
          'echo "v=7";; *) echo "Address already in use" >&2; exit 1;; '
          'esac\n')
    proc = _run_script('redis.sh', redis_stubs, {})
    assert proc.returncode == 2
    assert 'redis-server exited before it answered' in proc.stderr
    assert not (redis_stubs / 'bench.args').exists()


def test_redis_entrypoint_tool_missing(redis_stubs):
    (redis_stubs / 'bin' / 'redis-benchmark').unlink()
    proc = _run_script('redis.sh', redis_stubs, {})
    assert proc.returncode == 2
    assert 'redis-benchmark is missing from the image' in proc.stderr


@pytest.fixture
def web_stubs(tmp_path):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    envvars = tmp_path / 'envvars'
    envvars.write_text(
        'export APACHE_RUN_DIR=%(t)s/run\nexport APACHE_LOCK_DIR=%(t)s/lock'
        '\nexport APACHE_LOG_DIR=%(t)s/log\n'
        'export APACHE_PID_FILE=%(t)s/run/apache2.pid\n'
        '[ "${APACHE_CONFDIR##/etc/apache2-}" != "x" ]\n'
        % {'t': tmp_path})
    (tmp_path / 'ab.out').write_text(AB_OUT.format(complete=300, failed=0,
                                                   non2xx=''))
    _stub(bindir, 'apache2', 'echo "Server version: Apache/2.4.71 '
          '(Debian)"\n')
    _stub(bindir, 'apache2ctl', '. "$APACHE_ENVVARS"; case "$1" in '
          'start) (trap "exit 0" TERM; while :; do sleep 0.05; done) '
          '</dev/null >/dev/null 2>&1 & echo $! >"$APACHE_PID_FILE";; '
          'stop) kill "$(cat "$APACHE_PID_FILE")";; esac\n')
    _stub(bindir, 'ab', 'echo "$@" >>"$STUB/ab.args"; case " $* " in '
          '*" -n 1 "*) exit 0;; esac; cat "$STUB/ab.out"; '
          'exit "${STUB_RC:-0}"\n')
    return tmp_path


def _web(tmp_path, env):
    return _run_script('web.sh', tmp_path, dict(
        env, APACHE_ENVVARS=str(tmp_path / 'envvars')))


def test_web_entrypoint(web_stubs):
    proc = _web(web_stubs, {'BMC_SWEEP_SIZE': '300'})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith('bmc-web: apache 2.4.71, 300 requests')
    result = json.loads(lines[-1])
    assert result == dict(result, metric='requests_per_second',
                          requests_per_second=7740.97, n=300,
                          concurrency=4, document_bytes=10701,
                          p50_ms=1, p99_ms=3, mean_ms=0.517, seconds=0.646,
                          apache='2.4.71')
    args = (web_stubs / 'ab.args').read_text().splitlines()[-1].split()
    assert args == ['-q', '-n', '300', '-c', '4',
                    'http://127.0.0.1:8080/index.html']
    # Apache was stopped.
    pid = (web_stubs / 'run' / 'apache2.pid').read_text().strip()
    assert not os.path.exists('/proc/%s/cmdline' % pid) or open(
        '/proc/%s/status' % pid).read().find('State:\tZ') >= 0


@pytest.mark.parametrize('complete,failed,non2xx,match', [
    (299, 0, '', '299 of 300 requests complete'),
    (300, 3, '', '3 failed'),
    (300, 0, 'Non-2xx responses:      300\n', '300 not 2xx'),
])
def test_web_entrypoint_failed_requests(web_stubs, complete, failed, non2xx,
                                        match):
    (web_stubs / 'ab.out').write_text(AB_OUT.format(
        complete=complete, failed=failed, non2xx=non2xx))
    proc = _web(web_stubs, {'BMC_SWEEP_SIZE': '300'})
    assert proc.returncode == 2
    assert match in proc.stderr
    assert '{' not in proc.stdout


@pytest.mark.parametrize('env,match', [
    ({'BMC_SWEEP_SIZE': 'many'}, 'BMC_SWEEP_SIZE must be a whole number'),
    ({'BMC_SWEEP_SIZE': '2', 'BMC_WEB_CONCURRENCY': '4'},
     'BMC_WEB_CONCURRENCY (4) must not exceed BMC_SWEEP_SIZE (2)'),
    ({'BMC_WEB_CONCURRENCY': '0'}, 'BMC_WEB_CONCURRENCY must be from 1'),
])
def test_web_entrypoint_bad_input(web_stubs, env, match):
    proc = _web(web_stubs, env)
    assert proc.returncode == 2
    assert match in proc.stderr
    assert not (web_stubs / 'run').exists()


def test_web_entrypoint_ab_fails(web_stubs):
    proc = _web(web_stubs, {'STUB_RC': '22'})
    assert proc.returncode == 2
    assert 'ab failed (exit 22)' in proc.stderr


# --- the gemm entrypoint (its functions; numpy runs in the image) -----------

@pytest.fixture(scope='module')
def gemm():
    spec = importlib.util.spec_from_file_location(
        'bmc_recipe_gemm', os.path.join(ENTRYPOINTS, 'gemm.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gemm_settings(gemm):
    assert gemm.settings({}) == (512, 5, 300)
    assert gemm.settings({'BMC_SWEEP_SIZE': ' 1024 ', 'BMC_GEMM_REPEAT': '2',
                          'BMC_BENCH_SECONDS': '9'}) == (1024, 2, 9)


@pytest.mark.parametrize('env,match', [
    ({'BMC_SWEEP_SIZE': 'big'}, 'BMC_SWEEP_SIZE must be a whole number'),
    ({'BMC_SWEEP_SIZE': '8'}, 'BMC_SWEEP_SIZE must be from 16 to 65536'),
    ({'BMC_SWEEP_SIZE': '-512'}, 'whole number'),
    ({'BMC_SWEEP_SIZE': '512.0'}, 'whole number'),
    ({'BMC_GEMM_REPEAT': '0'}, 'BMC_GEMM_REPEAT must be from 1'),
])
def test_gemm_bad_input(gemm, env, match, capsys):
    with pytest.raises(gemm.Refused, match=match):
        gemm.settings(env)
    # main refuses before it imports numpy, with status 2.
    with mock.patch.dict(sys.modules, {'numpy': None}):
        assert gemm.main(env) == 2
    err = capsys.readouterr().err
    assert err.startswith('bmc-gemm: ') and match.split()[0] in err


def test_gemm_memory(gemm, tmp_path):
    meminfo = tmp_path / 'meminfo'
    meminfo.write_text('MemTotal: 2048 kB\nMemAvailable: 1048576 kB\n')
    assert gemm.mem_available(str(meminfo)) == 1 << 30
    assert gemm.mem_available(str(tmp_path / 'none')) is None
    gemm.check_memory(4096, 1 << 30)     # 384 MiB
    with pytest.raises(gemm.Refused, match='1536 MiB, 1024 MiB'):
        gemm.check_memory(8192, 1 << 30)
    gemm.check_memory(65536, None)


def test_gemm_blas(gemm):
    pool = {'internal_api': 'openblas', 'version': '0.3.21',
            'threading_layer': 'pthreads', 'num_threads': 8,
            'architecture': 'Haswell'}
    assert gemm.blas_info([{'internal_api': 'mkl'}, pool]) is pool
    with pytest.raises(gemm.Refused, match='libopenblas0-pthread'):
        gemm.blas_info([{'internal_api': 'blis', 'filepath': '/x.so'}])
    with pytest.raises(gemm.Refused, match='no BLAS found'):
        gemm.blas_info([])
    out = gemm.result(1000, [0.5, 1.5], pool, 8, 'on')
    # 2 N^3 per product, two products in 2 s.
    assert out['gflops'] == 2.0 and out['gflops_best'] == 4.0
    assert out['threads'] == 8 and out['blas'] == 'openblas 0.3.21 pthreads'
    assert out['metric'] == 'gflops' and out['smt'] == 'on'
    line = json.dumps(out, sort_keys=True)
    assert client_sweep.extract_metric('x\n' + line, json_key='gflops') == 2.0


def test_gemm_choose_core(gemm):
    calls = []

    def probe(statuses):
        def run(env):
            calls.append(env.get('OPENBLAS_CORETYPE'))
            return statuses.pop(0)
        return run
    assert gemm.choose_core({}, probe([0])) is None
    # SIGILL with OpenBLAS's own choice (QEMU's qemu64): the generic core.
    calls.clear()
    assert gemm.choose_core({}, probe([-4, 0])) == 'Prescott'
    assert calls == [None, 'Prescott']
    with pytest.raises(gemm.Refused, match='signal 4'):
        gemm.choose_core({}, probe([-4, -4]))
    with pytest.raises(gemm.Refused, match='exit status 1'):
        gemm.choose_core({}, probe([1]))
    with pytest.raises(gemm.Refused, match='timed out'):
        gemm.choose_core({}, probe([None]))
    # The operator's own OPENBLAS_CORETYPE is not second-guessed.
    assert gemm.choose_core({'OPENBLAS_CORETYPE': 'Haswell'},
                            probe([])) is None
    assert gemm.result(64, [1.0], {}, 1, 'x', 'Prescott')[
        'blas_core_forced'] == 'Prescott'


def test_gemm_read_first(gemm, tmp_path):
    (tmp_path / 'control').write_text('on\n')
    assert gemm.read_first(str(tmp_path / 'control')) == 'on'
    assert gemm.read_first(str(tmp_path / 'missing')) == 'unknown'


def test_scripts_are_executable_and_licensed():
    for name in os.listdir(ENTRYPOINTS):
        path = os.path.join(ENTRYPOINTS, name)
        with open(path) as f:
            text = f.read()
        assert 'Licensed under the Apache License' in text
        if text.startswith('#!'):
            assert os.access(path, os.X_OK), name


def test_list_says_metric_and_cells():
    lines = []
    from bmc_lab.recipes import commands
    assert commands._list(None, None, lines.append) == 0
    text = '\n'.join(lines)
    assert 'metric gflops' in text and 'thp-always | thp-never' in text
