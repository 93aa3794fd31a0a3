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

"""A hostile workload on a real QEMU node: it kills the agent and answers
in its place.

The job is privileged (the default: root next to the agent, as bare metal
gives a tenant).  Once the deploy has ended it mounts the cgroup2
hierarchy, kills every process of the agent's systemd unit through its
``cgroup.kill`` (and again each time systemd restarts it), and listens on
the agent's port itself, answering every request with 64 MiB: more than
any reply the conductor reads (``output_max_mb`` plus ``results_max_mb``
as base64, about 44 MiB).  What the run may reach is its own report: the
run ends ``failed`` saying the node answered outside the protocol, the
node is powered off, the conductor keeps running with its memory
bounded, and an undeploy frees the node.
"""

import pytest

from bmc_common import protocol
from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import nodes
from bmc_lab import procs

#: The agent's systemd unit, in the node's cgroup2 hierarchy.
AGENT_CGROUP = 'system.slice/ironic-python-agent.service'
FLOOD = 64 * 1024 * 1024

HOSTILE = b"""#!/bin/sh
# Wait for the deploy to end (the conductor then only polls), then take
# the agent's place.
sleep 30
busybox mkdir -p /tmp/cg
busybox mount -t cgroup2 none /tmp/cg || exit 3
kill_agent() {
    echo 1 > /tmp/cg/%(cgroup)s/cgroup.kill 2>/dev/null
}
kill_agent && echo "hostile: agent killed"
busybox sleep 1
# systemd restarts the agent every 10 s (it then finds its port taken):
# kill it each time anyway.
( while :; do busybox sleep 2; kill_agent; done ) &
echo "hostile: answering on 9999"
exec busybox nc -ll -p 9999 -e /forge.sh
""" % {b'cgroup': AGENT_CGROUP.encode()}

FORGE = b"""#!/bin/sh
# One connection: skip the request's head, answer with the flood.
CR=$(busybox printf '\\r')
while read -r line; do
    case "$line" in ''|"$CR") break;; esac
done
busybox printf 'HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n'
busybox printf 'Content-Length: %(n)d\\r\\n\\r\\n'
exec head -c %(n)d /dev/zero
""" % {b'n': FLOOD}


def _conductor_pid(lab):
    return (procs.pid_of(lab, 'ironic-conductor')
            or procs.pid_of(lab, 'ironic'))


def _memory_mib(pid, key):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1]) / 1024.0
    raise AssertionError('%s not in /proc/%d/status' % (key, pid))


@pytest.fixture(scope='module')
def hostile_run(lab):
    image = container_job.push_demo_image_with(
        lab, 'e2e-hostile', {'/hostile.sh': HOSTILE, '/forge.sh': FORGE},
        cmd=['/hostile.sh'])
    pid = _conductor_pid(lab)
    rss_before = _memory_mib(pid, 'VmRSS')
    container_job.deploy(lab, image, mode=protocol.MODE_JOB)
    report = container_job.wait_report(lab, states=('failed', 'finished'),
                                       timeout=300)
    print(container_job.format_report(report))
    run = {
        'report': report,
        'power': nodes.bmc_power_state(lab, 0),
        'pid_before': pid,
        'pid_after': _conductor_pid(lab),
        'rss_before_mib': rss_before,
        'peak_mib': _memory_mib(pid, 'VmHWM'),
        'rss_after_mib': _memory_mib(pid, 'VmRSS'),
        'last_error': lab_client.get_client(lab).node.get(
            lab.node_name(0)).last_error,
    }
    print('conductor RSS %(rss_before_mib).0f MiB before, peak '
          '%(peak_mib).0f MiB, %(rss_after_mib).0f MiB after' % run)
    # The undeploy reads the node once more (its closing collect) and
    # gets the flood again: it must still free the node.
    container_job.undeploy(lab)
    run['state_after_undeploy'] = lab_client.get_client(lab).node.get(
        lab.node_name(0)).provision_state
    return run


def test_forged_replies_end_the_run_not_the_conductor(hostile_run):
    report = hostile_run['report']
    assert report['state'] == 'failed', report
    assert 'answered outside the protocol' in report['error'], report
    assert 'reply refused: body larger than' in report['error'], report
    assert hostile_run['last_error'] == report['error']
    assert hostile_run['power'] == 'off'
    # The conductor kept running, and read no more of the flood than its
    # bound (a 64 MiB reply; the bound is about 44 MiB).
    assert hostile_run['pid_after'] == hostile_run['pid_before']
    assert (hostile_run['peak_mib'] - hostile_run['rss_before_mib']
            < 200), hostile_run
    assert hostile_run['state_after_undeploy'] == 'available'
