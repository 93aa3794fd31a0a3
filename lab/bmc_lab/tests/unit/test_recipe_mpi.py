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

"""The mpi recipe without building it: its definition, the build's
inputs (the C source counts), and its entrypoint run here against
stand-ins of mpiexec, ssh, ip and the ping-pong (no MPI, no root, no
network)."""

import json
import os
import re
import shutil
import subprocess
from unittest import mock

import pytest

from bmc_lab import recipes
from bmc_lab.recipes import build
from bmc_lab.recipes import sweep
from ironic_bmc_client import sweep as client_sweep

MPI = recipes.MPI
ENTRYPOINTS = recipes.ENTRYPOINTS


def _source(name):
    with open(os.path.join(ENTRYPOINTS, name)) as f:
        return f.read()


# --- the definition ----------------------------------------------------------

def test_defined():
    assert recipes.get('mpi') is MPI
    assert MPI.repo == 'bmc/recipe-mpi'
    assert MPI.metric == 'latency_us' and MPI.lower_is_better
    # Nothing to compare: the baseline alone.
    assert MPI.tunables == (recipes.NO_TUNABLES,)
    for package in ('mpich', 'openssh-server', 'openssh-client',
                    'iproute2'):
        assert package in MPI.packages
    assert set(recipes.MPI_BUILD_PACKAGES) <= set(MPI.packages)


def test_files():
    files = MPI.files()
    assert set(files) == {'/usr/local/bin/bmc-mpi',
                          recipes.LIB_DIR + '/common.sh',
                          recipes.MPI_SOURCE}
    assert files['/usr/local/bin/bmc-mpi'].startswith(b'#!/bin/sh')
    assert files[recipes.MPI_SOURCE] == _source('pingpong.c').encode()
    assert b'MPI_Get_processor_name' in files[recipes.MPI_SOURCE]
    assert os.access(os.path.join(ENTRYPOINTS, MPI.script), os.X_OK)
    # The other recipes have no extra file.
    assert all(not r.extra_files for r in recipes.RECIPES.values()
               if r is not MPI)


def test_setup_compiles_then_purges():
    setup = MPI.setup
    compile_at = setup.index('mpicc ')
    purge_at = setup.index('apt-get purge')
    assert compile_at < purge_at
    assert '-o %s %s' % (recipes.MPI_PINGPONG, recipes.MPI_SOURCE) in setup
    # The purge command, its continuation lines included.
    lines = setup[purge_at:].splitlines()
    purge = lines.pop(0)
    while purge.endswith('\\'):
        purge += '\n' + lines.pop(0)
    assert '--auto-remove' in purge
    for package in recipes.MPI_BUILD_PACKAGES:
        assert package in purge
    # The program still finds its libraries once the compilers are gone,
    # and the image carries no sshd host key of its own.
    assert setup.index("ldd %s" % recipes.MPI_PINGPONG) > purge_at
    assert 'rm -f /etc/ssh/ssh_host_*' in setup
    assert 'mkdir -p -m 0755 /run/sshd' in setup


def test_setup_is_valid_shell():
    subprocess.run(['sh', '-n', '-c', MPI.setup], check=True)


@pytest.mark.parametrize('value', [1, 1000, 1000000, '0100'])
def test_sizes_good(value):
    assert MPI.check_size(value) == int(value)


@pytest.mark.parametrize('value', [0, 1000001, 'abc', '-1', '1e3'])
def test_sizes_bad(value):
    with pytest.raises(recipes.RecipeError, match='mpi'):
        MPI.check_size(value)


def test_sizes_swept_are_valid():
    assert MPI.min_size <= MPI.default_size <= MPI.max_size
    for size in MPI.lab_sizes + MPI.hardware_sizes:
        assert MPI.check_size(size) == size


def test_bounds_agree_with_the_entrypoint_and_the_program():
    """The recipe, the shell and the C program refuse the same sizes."""
    shell = _source('mpi.sh')
    assert ('whole n BMC_SWEEP_SIZE %d %d %d' % (
        MPI.default_size, MPI.min_size, MPI.max_size)) in shell
    c = _source('pingpong.c')
    assert re.search(r'#define MAX_ITERATIONS %dL' % MPI.max_size, c)
    assert 'from %d to %d' % (MPI.min_size, MPI.max_size) in c


def test_inputs_follow_the_c_source(tmp_path):
    b = build.Builder(cache=str(tmp_path), out=lambda *a: None,
                      mirror='http://m/debian', security='http://s/sec')
    key = b.key(MPI)
    real = recipes.Recipe.source_bytes

    def changed(name):
        data = real(name)
        return data + b'/* changed */\n' if name == 'pingpong.c' else data
    with mock.patch.object(recipes.Recipe, 'source_bytes',
                           side_effect=changed):
        assert b.key(MPI) != key
    assert b.key(MPI) == key
    inputs = build.recipe_inputs(MPI, b.base_key)
    assert recipes.MPI_SOURCE in inputs['files']
    # Another place in the image is another image too.
    moved = recipes.dataclasses.replace(
        MPI, extra_files=(('pingpong.c', '/opt/pingpong.c'),))
    assert b.key(moved) != key


def test_sweep_args():
    image = '127.0.0.1:5050/bmc/recipe-mpi@sha256:' + 'a' * 64
    args = sweep.sweep_args(MPI, image, ['bmc-lab-node-0'])
    assert [args[i + 1] for i, a in enumerate(args)
            if a == '--tunables'] == ['none']
    assert args[args.index('--metric-json') + 1] == 'latency_us'
    assert '--lower-is-better' in args
    assert sweep.run_count(args) == 3


# --- the entrypoint against stand-ins ---------------------------------------

#: What the entrypoint and the stand-ins may run of this machine's.
HOST_TOOLS = ('awk', 'cat', 'cut', 'date', 'env', 'grep', 'head', 'mkdir',
              'mktemp', 'nproc', 'rm', 'sed', 'sleep', 'sort', 'tail',
              'timeout', 'tr')

#: mpiexec: --version as Hydra's, else its arguments recorded and the
#: command after them (bmc-mpi --rank ...) run once, as rank 0.
MPIEXEC = r'''
if [ "$1" = --version ]; then
    echo "HYDRA build details:"
    echo "    Version:                                 4.0.2"
    exit 0
fi
printf '%s\n' "$*" >"$STUB/mpiexec.args"
[ -z "${STUB_MPIEXEC_SLEEP:-}" ] || sleep "$STUB_MPIEXEC_SLEEP"
if [ -n "${STUB_MPIEXEC_RC:-}" ]; then
    echo "hydra: it failed" >&2
    exit "$STUB_MPIEXEC_RC"
fi
while [ $# -gt 0 ] && [ "$2" != --rank ]; do shift; done
exec /bin/sh "$@"
'''
#: The ping-pong: its environment recorded, then rank lines (STUB_RANKS)
#: and the JSON line.
PINGPONG = r'''
env | grep '^UCX_' | sort >"$STUB/rank.env"
printf '%s\n' "$*" >"$STUB/rank.args"
r=0
for name in $STUB_RANKS; do
    echo "bmc-mpi-pingpong: rank $r on $name"
    r=$((r + 1))
done
printf '{"bytes": %s, "iterations": %s, "mpi": "4.0", ' "$2" "$1"
printf '"peer_latency_us": [5.5], "ranks": [], "size": %s, ' "$r"
printf '"warmup": 100, "latency_us": 5.5}\n'
'''
#: ip: "link show dev NIC" for the NICs in STUB_NICS; "-o -4 addr show
#: to ADDR/32": the NIC STUB_ADDR_NIC holds it.
IP = r'''
case "$*" in
    "link show dev "*)
        for nic in $STUB_NICS; do [ "$nic" = "$4" ] && exit 0; done
        exit 1 ;;
    "-o -4 addr show to "*)
        [ -z "${STUB_ADDR_NIC:-}" ] || echo "3: $STUB_ADDR_NIC" \
            "   inet ${6%/32}/24 brd x scope global $STUB_ADDR_NIC" ;;
esac
'''


def _stub(bindir, name, body):
    path = bindir / name
    path.write_text('#!/bin/sh\n' + body)
    path.chmod(0o755)


@pytest.fixture
def stubs(tmp_path):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    tools = tmp_path / 'tools'
    tools.mkdir()
    for name in HOST_TOOLS:
        os.symlink(shutil.which(name), tools / name)
    _stub(bindir, 'mpiexec', MPIEXEC)
    _stub(bindir, 'pingpong', PINGPONG)
    _stub(bindir, 'ip', IP)
    _stub(bindir, 'hostname', 'echo "$STUB_HOST"\n')
    _stub(bindir, 'getent', '[ -z "${STUB_ADDR:-}" ] || '
          'echo "$STUB_ADDR      STREAM $2"\n')
    # ssh [OPTIONS] HOST true: HOST recorded; those in STUB_SSH_FAIL
    # refuse.
    _stub(bindir, 'ssh', 'for a; do [ "$a" = true ] && break; host=$a; '
          'done; echo "$host" >>"$STUB/ssh.hosts"; '
          'case " ${STUB_SSH_FAIL:-} " in *" $host "*) '
          'echo "ssh: connect to host $host port 22: Connection refused" '
          '>&2; exit 255;; esac\n')
    (tmp_path / 'hostfile').write_text('mpi-0\nmpi-1\n')
    return tmp_path


def _run(tmp_path, env, args=()):
    full = {'PATH': '%s:%s' % (tmp_path / 'bin', tmp_path / 'tools'),
            'BMC_RECIPE_LIB': ENTRYPOINTS, 'STUB': str(tmp_path),
            'BMC_MPI_PINGPONG': str(tmp_path / 'bin' / 'pingpong'),
            'BMC_MPI_SELF': os.path.join(ENTRYPOINTS, 'mpi.sh'),
            'STUB_HOST': 'bmc-workload',
            'STUB_RANKS': 'bmc-workload bmc-workload'}
    full.update(env)
    return subprocess.run(['/bin/sh', os.path.join(ENTRYPOINTS, 'mpi.sh')]
                          + list(args), env=full, capture_output=True,
                          text=True, timeout=60)


def _group(tmp_path, **more):
    env = {'BMC_SIZE': '2', 'BMC_HOSTFILE': str(tmp_path / 'hostfile'),
           'BMC_GROUP_IFACE': 'eth1', 'STUB_HOST': 'mpi-0',
           'STUB_RANKS': 'mpi-0 mpi-1', 'STUB_NICS': 'eth0 eth1',
           'STUB_ADDR': '192.168.77.10', 'STUB_ADDR_NIC': 'eth1'}
    env.update(more)
    return env


def _result(proc):
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_local(stubs):
    proc = _run(stubs, {'BMC_SWEEP_SIZE': '300'})
    result = _result(proc)
    assert proc.stdout.startswith('bmc-mpi: MPICH 4.0.2, local, 2 ranks, '
                                  '300 round trips of 8 bytes')
    assert result['mode'] == 'local' and result['mpich'] == '4.0.2'
    assert result['iterations'] == 300 and result['bytes'] == 8
    # The metric is the last key, as the sweep reads it.
    assert list(result)[-1] == 'latency_us'
    assert client_sweep.extract_metric(
        proc.stdout, json_key='latency_us') == 5.5
    args = (stubs / 'mpiexec.args').read_text().split()
    assert args == ['-n', '2', '-hosts', 'bmc-workload',
                    os.path.join(ENTRYPOINTS, 'mpi.sh'), '--rank', '300',
                    '8']
    # Shared memory only: no NIC for UCX.
    assert (stubs / 'rank.env').read_text() == 'UCX_TLS=self,sm\n'
    assert not (stubs / 'ssh.hosts').exists()


def test_group(stubs):
    proc = _run(stubs, _group(stubs, BMC_MPI_BYTES='64'))
    result = _result(proc)
    assert result['mode'] == 'group' and result['bytes'] == 64
    assert 'rank 1 on mpi-1' in proc.stdout
    args = (stubs / 'mpiexec.args').read_text().split()
    assert args[:9] == ['-f', str(stubs / 'hostfile'), '-n', '2', '-ppn',
                        '1', '-iface', 'eth1',
                        os.path.join(ENTRYPOINTS, 'mpi.sh')]
    assert args[9:] == ['--rank', '1000', '64']
    # The rank pins UCX to the NIC with its own address, TCP only.
    assert (stubs / 'rank.env').read_text() == (
        'UCX_NET_DEVICES=eth1\nUCX_TLS=tcp,self\n')
    # Every member but rank 0 was reached over ssh first.
    assert (stubs / 'ssh.hosts').read_text() == 'mpi-1\n'


def test_rank_finds_its_own_nic(stubs):
    """A rank started on another member inherits rank 0's environment
    (BMC_GROUP_IFACE=eth1): it takes the NIC that has its address."""
    env = _group(stubs, STUB_HOST='mpi-1', STUB_ADDR='192.168.77.11',
                 STUB_ADDR_NIC='ens5')
    proc = _run(stubs, env, ['--rank', '10', '8'])
    assert proc.returncode == 0, proc.stderr
    assert (stubs / 'rank.env').read_text() == (
        'UCX_NET_DEVICES=ens5\nUCX_TLS=tcp,self\n')
    assert (stubs / 'rank.args').read_text().split() == ['10', '8']


@pytest.mark.parametrize('more,match', [
    ({'STUB_ADDR': ''}, 'mpi-0: its host name has no IPv4 address'),
    ({'STUB_ADDR_NIC': ''}, 'no NIC has its address 192.168.77.10'),
    ({'STUB_ADDR': '127.0.1.1', 'STUB_ADDR_NIC': 'lo'},
     'a loopback address'),
])
def test_rank_without_its_nic(stubs, more, match):
    proc = _run(stubs, _group(stubs, **more), ['--rank', '10', '8'])
    assert proc.returncode == 2
    assert match in proc.stderr
    assert not (stubs / 'rank.args').exists()


@pytest.mark.parametrize('more,match', [
    ({'BMC_SIZE': '1'}, 'BMC_SIZE must be from 2'),
    ({'BMC_SIZE': '3'}, 'names 2 hosts, BMC_SIZE is 3'),
    ({'BMC_HOSTFILE': '/nonexistent'}, 'is not a readable file'),
    ({'BMC_GROUP_IFACE': ''}, 'BMC_GROUP_IFACE is not'),
    ({'BMC_GROUP_IFACE': 'eth9'}, "'eth9' is no interface of this node"),
    ({'STUB_HOST': 'mpi-1'}, 'this is mpi-1, but rank 0'),
    ({'STUB_ADDR_NIC': 'eth0'},
     "mpi-0's address is on eth0, not on the group NIC eth1"),
    ({'STUB_SSH_FAIL': 'mpi-1'},
     'cannot ssh to mpi-1: ssh: connect to host mpi-1 port 22'),
    ({'BMC_SWEEP_SIZE': '0'}, 'BMC_SWEEP_SIZE must be from 1 to 1000000'),
    ({'BMC_SWEEP_SIZE': '1000001'}, 'BMC_SWEEP_SIZE must be from 1'),
    ({'BMC_SWEEP_SIZE': 'many'}, 'BMC_SWEEP_SIZE must be a whole number'),
    ({'BMC_MPI_BYTES': '16777217'}, 'BMC_MPI_BYTES must be from 0'),
])
def test_group_refused(stubs, more, match):
    proc = _run(stubs, _group(stubs, **more))
    assert proc.returncode == 2
    assert match in proc.stderr and proc.stderr.startswith('bmc-mpi: ')
    assert '{' not in proc.stdout
    assert not (stubs / 'mpiexec.args').exists()


def test_hostfile_comments_and_blank_lines(stubs):
    (stubs / 'hostfile').write_text('# the group\nmpi-0\n\n mpi-1 \n')
    assert _result(_run(stubs, _group(stubs)))['mode'] == 'group'


def test_rank_in_the_wrong_place(stubs):
    proc = _run(stubs, _group(stubs, STUB_RANKS='mpi-0 mpi-0'))
    assert proc.returncode == 2
    assert 'rank 1 ran on mpi-0, not on mpi-1' in proc.stderr
    assert '{' not in proc.stdout


def test_ranks_missing(stubs):
    proc = _run(stubs, {'STUB_RANKS': 'bmc-workload'})
    assert proc.returncode == 2
    assert 'did not name its 2 ranks' in proc.stderr


def test_mpiexec_fails(stubs):
    proc = _run(stubs, _group(stubs, STUB_MPIEXEC_RC='15'))
    assert proc.returncode == 2
    assert 'mpiexec failed (exit 15): hydra: it failed' in proc.stderr


def test_bounded_in_time(stubs):
    proc = _run(stubs, {'BMC_BENCH_SECONDS': '1',
                        'STUB_MPIEXEC_SLEEP': '30'})
    assert proc.returncode == 2
    assert 'did not finish within 1 s (BMC_BENCH_SECONDS)' in proc.stderr


def test_no_result(stubs):
    _stub(stubs / 'bin', 'pingpong', 'echo "bmc-mpi-pingpong: rank 0 on '
          'bmc-workload"; echo "bmc-mpi-pingpong: rank 1 on '
          'bmc-workload"\n')
    proc = _run(stubs, {})
    assert proc.returncode == 2
    assert 'no result from the ping-pong' in proc.stderr


def test_program_missing(stubs):
    proc = _run(stubs, {'BMC_MPI_PINGPONG': str(stubs / 'none')})
    assert proc.returncode == 2
    assert 'is missing from the image' in proc.stderr
