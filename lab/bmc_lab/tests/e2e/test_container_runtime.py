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

"""The workload under crun on a QEMU node.

* a job as an image's user, with supplementary groups, in its own PID and
  mount namespaces, fresh /dev/shm and /dev/mqueue; the image's
  /etc/hosts is a symlink that would point at the agent's record if the
  agent followed it on the node when it writes the container's; all of
  its output and a result file are read from the conductor after the
  power-off;
* a service undeployed gracefully: the image's StopSignal (SIGINT) reaches
  it, its own shutdown message is in the report, no SIGKILL was needed;
  the agent stopped heartbeating once the deploy was over, so the
  conductor logged no refused heartbeat;
* a confined job that outlives its walltime: ended, SIGKILL after the
  grace (a PID 1 without a handler ignores SIGTERM), ``failed`` saying so;
  chroot, a new user namespace and mount are refused to it;
* a job with the ``low-noise`` profile on the NodeOS partitions: the
  services on CPU 0, the workload's cgroup owning CPU 1, as the agent
  read them back and as the workload itself sees them; the cycle-level
  noise probe (``bmc-noise``) before and after the profile, on each CPU;
  then the noise unikernel on the same node (the unikernel deploy
  interface: no agent, its result read on the serial console), and the
  three in one table (``openstack baremetal container noise``).

The node has two vCPUs, so that the partitions have a CPU each.

Image fidelity (:mod:`bmc_lab.fidelity`): three of these runs are also
images of its cases, and their process view, probed on the node, is
compared field by field with what ``docker run`` gives, the intended
differences applied: the job is cases b (a daemon's /var/run directory),
c (a WORKDIR under /tmp), d (the own hostname resolves) and f's ``USER
app`` (supplementary groups); the service is case a (a Postgres-like
entrypoint that chowns as root then runs the CMD as ``postgres``), run
with ``container_args`` and ``container_env``; the low-noise job is case
e (``USER 1000:1000``).  test_kexec.py's job is f's ``USER app:app``.
No boot is added for them; the unit tier's spec-level differential
covers every case.
"""

import base64
import json
import time

import pytest

from bmc_common import protocol
from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab.fidelity import images as fidelity_images
from bmc_lab.fidelity import views as fidelity
from bmc_lab import logcursor
from bmc_lab import nodes
from bmc_lab import unikernel_job
from ironic_bmc_client import charts
from ironic_bmc_client import noise_table

INSIDE = b"""#!/bin/sh
echo "pid=$$"
echo "id=$(id)"
for m in /dev/mqueue /dev/pts /sys/fs/cgroup
do
    awk -v m=$m '$2 == m {print "mount", $2, $3}' /proc/mounts
done
echo probe > /tmp/work/out.txt && echo "tmp-writable=yes"
echo "cgroup=$(cat /proc/self/cgroup)"
# Case b's daemon: its pid file in the image's /var/run/appd, then the
# probe.
appd
i=0; while [ $i -lt 3000 ]; do echo "filler line $i"; i=$((i+1)); done
id > /results/ids.txt
echo "done"
"""
E = fidelity_images.E
#: The job: cases b, c, d and f's USER app in one image.
JOB = fidelity_images.combine(
    'runtime_job', fidelity_images.NAMED_USER,
    fidelity_images.DAEMON_RUN_DIR, fidelity_images.WORKDIR_IN_TMP,
    fidelity_images.HOSTNAME_LOOKUP,
    fidelity_images.Case(
        'job', 'the job', files=(
            E('inside.sh', data=INSIDE, mode=0o755),
            E('results', 'dir', mode=0o1777),
            # Followed on the node, the agent's writing the container's
            # /etc/hosts would overwrite its own record of the run.
            E('etc/hosts', 'symlink',
              linkname='/../../../run/bmc-workload/workload.json')),
        creates=(('/tmp/work/out.txt', 1000, 1000),)),
    user='app', workdir='/tmp/work', cmd=('/inside.sh',))
#: The service: case a, its CMD replaced by container_args.
SERVICE = fidelity_images.ARGS_REPLACE_CMD

PARTITIONS = b"""#!/bin/sh
bmc-probe
grep Cpus_allowed_list /proc/self/status
for g in bmc-workload system.slice init.scope
do
    echo "$g $(cat /sys/fs/cgroup/$g/cpuset.cpus.effective)"
done
echo "partition $(cat /sys/fs/cgroup/bmc-workload/cpuset.cpus.partition)"
# Outlive the agent's read-back at the start (a job that ends first is
# reported "ended" instead: its cgroup is gone).
sleep 8
"""
#: The low-noise job: case e (USER 1000:1000, no PATH in the image).
PARTITIONS_JOB = fidelity_images.combine(
    'runtime_partitions', fidelity_images.NUMERIC_USER,
    fidelity_images.Case('partitions', 'the partitions job', files=(
        E('partitions.sh', data=PARTITIONS, mode=0o755),)),
    user='1000:1000', env=fidelity_images.NUMERIC_USER.env,
    cmd=('/partitions.sh',))




@pytest.fixture(scope='module')
def lab(lab_pool):
    return lab_pool.get('runtime')


def _lines(report):
    return report['output_tail'].splitlines()


@pytest.fixture(scope='module')
def job_run(lab):
    image = fidelity_images.push(lab, JOB, repo='bmc/runtime-job')
    container_job.deploy(lab, image, extra={
        protocol.II_RESULTS: '["/results/ids.txt", "/results/none"]'})
    report = container_job.wait_report(lab)
    # All of the output (about 60 KB), not only the report's tail, and
    # the result file, from the conductor after the power-off.
    cli = lab_client.get_client(lab)
    name = lab.node_name(0)
    run = {'report': report, 'power_state': cli.node.get(name).power_state,
           'whole': _passthru(cli, name, 'run_output'),
           'result': _passthru(cli, name, 'run_output',
                               args={'result': '/results/ids.txt'})}
    container_job.undeploy(lab)
    return run


def test_job_runs_in_its_own_container(lab, job_run):
    report = job_run['report']
    assert report['workload_exit_code'] == 0, report['output_tail']
    assert job_run['power_state'] == 'power off'
    assert report['output']['complete'] is True
    assert report['output']['bytes'] > 10 * protocol.OUTPUT_TAIL_BYTES
    whole = job_run['whole']
    assert len(whole['output'].encode()) == report['output']['bytes']
    lines = whole['output'].splitlines()
    assert _lines(report)[-1] == lines[-1] == 'done'
    assert 'filler line 0' in lines and 'filler line 2999' in lines
    assert lines[0] == 'pid=1'
    ident = [line for line in lines if line.startswith('id=')][0]
    assert 'uid=1000(app) gid=1000(app)' in ident
    assert '44(video)' in ident and 'staff' not in ident
    mounts = {tuple(line.split()[1:]) for line in lines
              if line.startswith('mount ')}
    assert {('/dev/mqueue', 'mqueue'), ('/dev/pts', 'devpts'),
            ('/sys/fs/cgroup', 'cgroup2')} <= mounts
    assert 'tmp-writable=yes' in lines
    assert 'appd: pid file written' in lines
    assert 'cgroup=0::/bmc-workload' in lines
    result = job_run['result']
    assert base64.b64decode(result['data_base64']).decode() == (
        ident[len('id='):] + '\n')
    assert report['results']['/results/ids.txt']['size'] == result['size']
    assert 'no such file' in report['results']['/results/none']['error']


def _fidelity(case, output):
    mismatches, fields, node = fidelity.check(case, output)
    print('%s on %s: %s' % (case.name, node, fields))
    assert not mismatches, fidelity.format_mismatches(case, mismatches)
    return fields


def test_job_process_view_as_under_docker(lab, job_run):
    """Cases b, c, d and f (USER app), on the node as under docker run."""
    fields = _fidelity(JOB, job_run['whole']['output'])
    # The agent replaced the image's /etc/hosts link (not followed): the
    # hostname resolves, by the glibc of the image.
    assert fields['host_lookup'] not in ('-', '127.0.0.1')


def _passthru(cli, name, method, args=None):
    found = cli.node.vendor_passthru(name, method, args=args or {},
                                     http_method='POST')
    return found.to_dict() if hasattr(found, 'to_dict') else found


#: The running service's polls the test watches for refused heartbeats.
POLLS_WATCHED = 3


def _wait_for_agent_commands(lab, cursor, count, timeout=120):
    """Until the conductor's log holds ``count`` agent commands sent to
    node 0 after ``cursor``'s position."""
    uuid = lab_client.get_client(lab).node.get(lab.node_name(0)).uuid
    marker = 'Executing agent command deploy.execute_deploy_step for node %s'
    deadline = time.monotonic() + timeout
    while True:
        sent = cursor.text().count(marker % uuid)
        if sent >= count:
            return sent
        if time.monotonic() > deadline:
            raise AssertionError('the conductor sent node 0\'s agent %d '
                                 'commands in %d s, not %d'
                                 % (sent, timeout, count))
        time.sleep(1)


@pytest.fixture(scope='module')
def service_run(lab):
    image = fidelity_images.push(lab, SERVICE, repo='bmc/runtime-service')
    conductor_log = logcursor.Cursor(lab.log('ironic.log'))
    container_job.deploy(lab, image, mode=protocol.MODE_SERVICE, extra={
        protocol.II_ARGS: json.dumps(list(SERVICE.run_args)),
        protocol.II_ENV: json.dumps(dict(
            e.partition('=')[::2] for e in SERVICE.run_env))})
    container_job.wait_report(lab, states=('running',))
    polls = logcursor.Cursor(lab.log('ironic.log'))
    # The conductor polls the running workload through agent commands,
    # and an agent heartbeats right after each command it answers.  The
    # agent stopped its heartbeats once the deploy was over, so across
    # several polls the conductor, which no longer knows its token,
    # refuses none.
    _wait_for_agent_commands(lab, polls, POLLS_WATCHED)
    container_job.undeploy(lab)
    return {'conductor_log': conductor_log.text(),
            'power_state': nodes.bmc_power_state(lab, 0),
            'report': container_job.wait_report(lab,
                                                states=('undeployed',))}


def test_service_undeployed_with_its_stop_signal(lab, service_run):
    assert 'Invalid or missing agent_token' not in service_run[
        'conductor_log']
    assert service_run['power_state'] == 'off'
    report = service_run['report']
    stop = report['stop']
    assert (stop['reason'], stop['signal'], stop['killed']) == (
        'undeploy', 'SIGINT', False), stop
    assert report['workload_exit_code'] == 0
    lines = _lines(report)
    assert lines[-1] == 'shutting down cleanly on INT', lines
    names = [s['name'] for s in report['stages']]
    assert names.index('workload-exited') < names.index('powered-off')


def test_service_process_view_as_under_docker(lab, service_run):
    """Case a, with container_args and container_env."""
    fields = _fidelity(SERVICE, service_run['report']['output_tail'])
    # Privileged: every capability of the node's kernel (6.1 knows 41)
    # bounds the process, which as postgres has none.
    assert fields['cap_bnd'] == '000001ffffffffff', fields
    assert fields['cap_eff'] == '0000000000000000', fields


def test_confined_job_ended_at_its_walltime(lab):
    # What would leave the root (crun --no-pivot makes it a chroot):
    # chroot again, a new user namespace holding every capability, a
    # mount.  The capabilities and the seccomp filter refuse each.
    command = ['/bin/sh', '-c',
               'grep CapEff /proc/self/status; '
               'for try in "chroot / /bin/true" "unshare -U /bin/true" '
               '"mount -t tmpfs t /tmp"; do '
               '/bin/busybox $try 2>/dev/null && echo "left: $try" '
               '|| echo "refused: $try"; done; exec sleep 600']
    container_job.deploy(lab, lab_image(lab), extra={
        protocol.II_COMMAND: json.dumps(command),
        protocol.II_WALLTIME: '20s',
        protocol.II_PRIVILEGED: 'false'})
    report = container_job.wait_report(lab, states=('failed', 'finished'),
                                       timeout=300)
    assert report['state'] == 'failed'
    assert report['walltime_exceeded'] is True
    stop = report['stop']
    assert (stop['reason'], stop['signal'], stop['killed']) == (
        'walltime', 'SIGTERM', True), stop
    assert 'walltime' in report['error']
    # Docker's default capability set but CAP_SYS_CHROOT and CAP_NET_RAW
    # (00000000a80425fb less bits 18 and 13), not the machine's.
    lines = _lines(report)
    assert 'CapEff:\t00000000a80005fb' in lines, report
    assert {'refused: chroot / /bin/true', 'refused: unshare -U /bin/true',
            'refused: mount -t tmpfs t /tmp'} <= set(lines), lines
    cli = lab_client.get_client(lab)
    node = cli.node.get(lab.node_name(0))
    assert node.power_state == 'power off'
    assert node.provision_state == 'active'
    container_job.undeploy(lab)


#: The node of the noise comparison (Linux, then the unikernel).
NOISE_NODE = 0


def lab_image(lab):
    return container_job.push_demo_image(lab)


@pytest.fixture(scope='module')
def low_noise_run(lab):
    image = fidelity_images.push(lab, PARTITIONS_JOB,
                                 repo='bmc/runtime-partitions')
    container_job.deploy(lab, image, index=NOISE_NODE, extra={
        protocol.II_TUNABLES: 'low-noise', protocol.II_NOISE_PROBE: 1})
    report = container_job.wait_report(lab, index=NOISE_NODE)
    container_job.undeploy(lab, index=NOISE_NODE)
    return report


def test_low_noise_job_on_the_nodeos_partitions(lab, low_noise_run):
    report = low_noise_run
    assert report['workload_exit_code'] == 0, report['output_tail']
    # The cycle-level noise probe of the ramdisk measured both CPUs
    # before and after the profile: its buckets and histogram are in the
    # report, and the chart draws them.
    for label in ('before-tunables', 'after-tunables'):
        noise = report['noise'][label]['noise']
        assert noise['method'].startswith('bmc-noise'), noise
        assert [c['cpu'] for c in noise['cpus']] == [0, 1], noise
        for cpu in noise['cpus']:
            cycles = cpu['cycles']
            assert cycles['tsc_hz'] > 1e8, cpu
            assert sum(n for _lo, n in cycles['histogram']) == (
                cpu['interruptions']), cpu
    assert charts.render(report, charts.KIND_NOISE).startswith(b'\x89PNG')
    hk = report['tunables']['housekeeping_cpus']
    wl = report['tunables']['workload_cpus']
    # The services: every systemd unit of the node on CPU 0, read back
    # from its cgroup when the profile was applied and at the start.
    assert hk['ok'], hk
    services = hk['actual']['services']['cpus_effective']
    assert services['system.slice'] == services['init.scope'] == '0', hk
    assert set(hk['at_start']['cpus_effective'].values()) == {'0'}, hk
    assert hk['actual']['agent_threads']['agent_cpus'] == '0'
    # The workload's cgroup owns CPU 1, an exclusive partition, and the
    # container's init runs there.
    assert wl['ok'], wl
    assert wl['actual']['cpus_effective'] == '1'
    assert wl['actual']['exclusive'] is True, wl
    back = wl['at_start']
    assert (back['cgroup'], back['cpus_effective'], back['affinity'],
            back['partition']) == ('/bmc-workload', '1', '1', 'root'), wl
    # What the workload sees agrees with what the agent reported.
    lines = _lines(report)
    assert 'Cpus_allowed_list:\t1' in lines, lines
    assert {'bmc-workload 1', 'system.slice 0', 'init.scope 0',
            'partition root'} <= set(lines), lines


def test_low_noise_process_view_as_under_docker(lab, low_noise_run):
    """Case e (USER 1000:1000, no PATH in the image)."""
    _fidelity(PARTITIONS_JOB, low_noise_run['output_tail'])


@pytest.fixture(scope='module')
def unikernel_run(lab, low_noise_run):
    """The noise unikernel on the node the low-noise job ran on, after
    it (operator: the unikernel deploy interface, no agent)."""
    return unikernel_job.run(lab, 'duration=2 repeat=1',
                             index=NOISE_NODE)


def test_noise_of_linux_and_of_the_unikernel_on_one_node(
        lab, low_noise_run, unikernel_run):
    report = unikernel_run
    assert report['state'] == 'finished', (report['error'],
                                           report['output_tail'])
    assert report['kind'] == 'unikernel'
    assert report['workload_exit_code'] == 0
    assert [s['name'] for s in report['stages']] == [
        protocol.STAGE_POWER_ON, protocol.STAGE_WORKLOAD_STARTED,
        protocol.STAGE_WORKLOAD_EXITED, protocol.STAGE_POWERED_OFF]
    # Timed at the console's lines as they came: the 2-second probe
    # between "booted" and "end".
    stages = {s['name']: s for s in report['stages']}
    assert (stages[protocol.STAGE_WORKLOAD_EXITED]['end']
            - stages[protocol.STAGE_WORKLOAD_STARTED]['end']) >= 2.0, stages
    # The BMC's power readings cover the run; RAPL needs the agent.
    assert report['energy'].get('available') is not False, report['energy']
    assert 'no agent' in report['energy']['rapl']['reason']
    (uk,) = report['noise']['unikernel']['noise']['cpus']
    assert uk['cpu'] == 0
    assert uk['cycles']['counter'].startswith('bmc-noise-unikernel')
    assert uk['cycles']['tsc_hz'] > 1e8, uk
    assert sum(n for _lo, n in uk['cycles']['histogram']) == (
        uk['interruptions']), uk
    # One table: Linux before the low-noise profile, after it, and no
    # operating system at all, on the same node.
    assert report['node'] == low_noise_run['node']
    columns, rows = noise_table.table([low_noise_run, report])
    table = [dict(zip(columns, row, strict=True)) for row in rows]
    print('\n' + '\n'.join(' | '.join(str(v) for v in row)
                           for row in [columns] + rows))
    assert {(r['probe'], r['cpu']) for r in table} == {
        ('before-tunables', 0), ('before-tunables', 1),
        ('after-tunables', 0), ('after-tunables', 1), ('unikernel', 0)}
    assert noise_table.chart([low_noise_run, report]).startswith(
        b'\x89PNG')
