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
  mount namespaces, fresh /run, /tmp, /dev/shm and /dev/mqueue, the HPC
  rlimits; the image's /tmp is a symlink that would point at the agent's
  state directory if it were followed on the node; all of its output and
  a result file are read from the conductor after the power-off;
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
  noise probe (``bmc-noise``) before and after the profile, on each CPU.

The node has two vCPUs, so that the partitions have a CPU each.
"""

import base64
import json
import time

import pytest

from bmc_common import protocol
from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import logcursor
from bmc_lab import nodes
from ironic_bmc_client import charts

PASSWD = b'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n'
GROUP = b'root:x:0:\napp:x:1000:\nvideo:x:44:app\nstaff:x:50:other\n'

INSIDE = b"""#!/bin/sh
echo "pid=$$"
echo "id=$(id)"
echo "memlock=$(ulimit -l) nofile=$(ulimit -n)"
for m in /run /run/bmc-workload /dev/shm /dev/mqueue /dev/pts /sys/fs/cgroup
do
    awk -v m=$m '$2 == m {print "mount", $2, $3}' /proc/mounts
done
echo "run-entries=$(ls -A /run | wc -l)"
echo probe > /tmp/probe && echo "tmp-writable=yes"
echo "cgroup=$(cat /proc/self/cgroup)"
i=0; while [ $i -lt 3000 ]; do echo "filler line $i"; i=$((i+1)); done
id > /results/ids.txt
echo "done"
"""

SERVICE = b"""#!/bin/sh
trap 'echo "shutting down cleanly on INT"; exit 0' INT
grep CapEff /proc/self/status
echo serving
while :; do sleep 1 & wait $!; done
"""

PARTITIONS = b"""#!/bin/sh
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




@pytest.fixture(scope='module')
def lab(lab_pool):
    return lab_pool.get('runtime')


def _lines(report):
    return report['output_tail'].splitlines()


def test_job_runs_in_its_own_container(lab):
    image = container_job.push_demo_image_with(
        lab, 'bmc/runtime-job', {'/etc/passwd': PASSWD, '/etc/group': GROUP,
                                 '/inside.sh': INSIDE,
                                 '/home/app/.keep': b'',
                                 '/results/.keep': b''},
        modes={'/results': 0o1777},
        # Followed on the node, this would hide the agent's own state
        # (its record and the job's output) under the container's tmpfs.
        links={'/tmp': '/../../../run/bmc-workload'},
        cmd=['/inside.sh'], user='app')
    container_job.deploy(lab, image, extra={
        protocol.II_RESULTS: '["/results/ids.txt", "/results/none"]'})
    report = container_job.wait_report(lab)
    assert report['workload_exit_code'] == 0, report['output_tail']
    # All of the output (about 60 KB), not only the report's tail, and
    # the result file, from the conductor after the power-off.
    cli = lab_client.get_client(lab)
    name = lab.node_name(0)
    assert cli.node.get(name).power_state == 'power off'
    assert report['output']['complete'] is True
    assert report['output']['bytes'] > 10 * protocol.OUTPUT_TAIL_BYTES
    whole = _passthru(cli, name, 'run_output')
    assert len(whole['output'].encode()) == report['output']['bytes']
    lines = whole['output'].splitlines()
    assert _lines(report)[-1] == lines[-1] == 'done'
    assert 'filler line 0' in lines and 'filler line 2999' in lines
    assert lines[0] == 'pid=1'
    ident = [line for line in lines if line.startswith('id=')][0]
    assert 'uid=1000(app) gid=1000(app)' in ident
    assert '44(video)' in ident and 'staff' not in ident
    assert 'memlock=unlimited nofile=1048576' in lines
    mounts = {tuple(line.split()[1:]) for line in lines
              if line.startswith('mount ')}
    assert {('/run', 'tmpfs'), ('/dev/shm', 'tmpfs'),
            ('/dev/mqueue', 'mqueue'), ('/dev/pts', 'devpts'),
            ('/sys/fs/cgroup', 'cgroup2')} <= mounts
    # /tmp resolved inside the root: a tmpfs under the container's /run.
    assert ('/run/bmc-workload', 'tmpfs') in mounts
    assert 'tmp-writable=yes' in lines
    assert 'cgroup=0::/bmc-workload' in lines
    result = _passthru(cli, name, 'run_output',
                       args={'result': '/results/ids.txt'})
    assert base64.b64decode(result['data_base64']).decode() == (
        ident[len('id='):] + '\n')
    assert report['results']['/results/ids.txt']['size'] == result['size']
    assert 'no such file' in report['results']['/results/none']['error']
    container_job.undeploy(lab)


def _passthru(cli, name, method, args=None):
    found = cli.node.vendor_passthru(name, method, args=args or {},
                                     http_method='POST')
    return found.to_dict() if hasattr(found, 'to_dict') else found


def test_service_undeployed_with_its_stop_signal(lab):
    image = container_job.push_demo_image_with(
        lab, 'bmc/runtime-service', {'/service.sh': SERVICE},
        cmd=['/service.sh'], stop_signal='SIGINT')
    conductor_log = logcursor.Cursor(lab.log('ironic.log'))
    container_job.deploy(lab, image, mode=protocol.MODE_SERVICE)
    container_job.wait_report(lab, states=('running',))
    # Long enough for heartbeats (the lab's agents send one every few
    # seconds): the agent stopped them once the deploy was over, so the
    # conductor, which no longer knows its token, refuses none.
    time.sleep(30)
    container_job.undeploy(lab)
    assert 'Invalid or missing agent_token' not in conductor_log.text()
    assert nodes.bmc_power_state(lab, 0) == 'off'
    report = container_job.wait_report(lab, states=('undeployed',))
    stop = report['stop']
    assert (stop['reason'], stop['signal'], stop['killed']) == (
        'undeploy', 'SIGINT', False), stop
    assert report['workload_exit_code'] == 0
    lines = _lines(report)
    assert lines[-1] == 'shutting down cleanly on INT', lines
    # Privileged: every capability of the node's kernel (6.1 knows 41).
    assert 'CapEff:\t000001ffffffffff' in lines, lines
    names = [s['name'] for s in report['stages']]
    assert names.index('workload-exited') < names.index('powered-off')


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


def lab_image(lab):
    return container_job.push_demo_image(lab)


def test_low_noise_job_on_the_nodeos_partitions(lab):
    image = container_job.push_demo_image_with(
        lab, 'bmc/runtime-partitions', {'/partitions.sh': PARTITIONS},
        cmd=['/partitions.sh'])
    container_job.deploy(lab, image, extra={
        protocol.II_TUNABLES: 'low-noise', protocol.II_NOISE_PROBE: 1})
    report = container_job.wait_report(lab)
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
    container_job.undeploy(lab)
