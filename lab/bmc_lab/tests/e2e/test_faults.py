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

"""Faults around a container deploy on a real QEMU node.

Each test breaks one thing the deploy depends on, at the moment it hurts,
and checks where the node ends (provision and power state, the run
report, ``last_error``), that nothing of the run is left in the artifact
cache's work area or the HTTP root, and that another node (a second,
fake-driver node kept ACTIVE) and the cache's earlier entries are
untouched.  Every test adds a row to the fault table printed at the end.

The lab serves rootfs artifacts at 4 MB/s here, so a test can act while
the node is still downloading one.
"""

import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

from bmc_common import protocol
from ironic_bmc.drivers import boot_http_log
from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import content_servers
from bmc_lab import ironic_service
from bmc_lab import logcursor
from bmc_lab import nodes
from bmc_lab import ociimage
from bmc_lab import procs
from bmc_lab import virtual_bmcs
from bmc_lab.tests.e2e import fault_table
from bmc_lab.tests.e2e import labpool

MiB = 1024 * 1024




@pytest.fixture(scope='module')
def lab(lab_pool):
    settings = lab_pool.get('faults')
    settings.demo_image = container_job.push_demo_image(settings)
    settings.bystander = _bystander(settings)
    return settings


def _bystander(lab):
    """Another node with a run of its own (fake driver), kept ACTIVE."""
    cli = lab_client.get_client(lab)
    node = cli.node.create(
        name='bystander', driver='fake-hardware', boot_interface='fake',
        deploy_interface='fake', power_interface='fake',
        management_interface='fake', vendor_interface='fake',
        network_interface='noop')
    watcher = lab_client.StateWatcher(cli, node.uuid)
    for verb, state in (('manage', 'manageable'), ('provide', 'available'),
                        ('active', 'active')):
        cli.node.set_provision_state(node.uuid, verb)
        watcher.wait(state, 60)
    return node.uuid


_pushed = {}


def _big_image(lab, tag, megabytes):
    """The demo image plus ``megabytes`` of random data (incompressible:
    the artifact is as large as the data); pushed once per lab."""
    key = (lab.state_dir, tag)
    if key not in _pushed:
        _pushed[key] = _push_big_image(lab, tag, megabytes)
    return _pushed[key]


def _push_big_image(lab, tag, megabytes):
    with tempfile.TemporaryDirectory() as tmp:
        container_job.build_demo_tree(tmp)
        with open(os.path.join(tmp, 'ballast'), 'wb') as f:
            for _ in range(megabytes):
                f.write(os.urandom(MiB))
        image = ociimage.build_image(
            [ociimage.entries_from_dir(tmp)], cmd=['/demo.sh'],
            env=['PATH=/bin'], workdir='/')
    ociimage.Pusher(lab.registry_address).push_image('faults/big', tag,
                                                     image)
    return '%s/faults/big:%s' % (lab.registry_address, tag)


def _cache_dir(lab, *parts):
    return lab.path('ironic', 'container_cache', *parts)


def _entries(lab):
    path = _cache_dir(lab, 'entries')
    return set(os.listdir(path)) if os.path.isdir(path) else set()


def _left_over(lab, node_uuid):
    """What the run left in the cache's work area and the HTTP root."""
    found = []
    work = _cache_dir(lab, 'work')
    if os.path.isdir(work):
        found += ['work/' + n for n in os.listdir(work)]
    node_dir = os.path.join(lab.http_root, node_uuid)
    if os.path.isdir(node_dir):
        found += ['http/' + n for n in os.listdir(node_dir)
                  if n.startswith('rootfs-')]
    pins = _cache_dir(lab, 'pins')
    if os.path.isdir(pins):
        found += ['pin/' + k for k in os.listdir(pins)
                  if node_uuid in os.listdir(os.path.join(pins, k))]
    return found


class Fault:
    """One fault: the state before, and the row after."""

    def __init__(self, lab, name):
        self.lab = lab
        self.name = name
        self.cli = lab_client.get_client(lab)
        self.node = self.cli.node.get(lab.node_name(0))
        self.entries_before = _entries(lab)
        self.other_before = self._other()

    def _other(self):
        other = self.cli.node.get(self.lab.bystander)
        return (other.provision_state, other.power_state, other.last_error)

    def others_untouched(self):
        return (self._other() == self.other_before
                and self.other_before[0] == 'active'
                and self.entries_before <= _entries(self.lab))

    def report(self):
        report = self.cli.node.vendor_passthru(
            self.node.uuid, 'run_report', http_method='GET')
        return report.to_dict() if hasattr(report, 'to_dict') else report

    def finish(self, node, **extra):
        """Record the row: where the node ended, then (once it is
        undeployed, back in the pool) what the run left behind."""
        report = self.report() or {}
        container_job.undeploy(self.lab)
        row = dict(fault=self.name, provision_state=node.provision_state,
                   power=node.power_state, report_state=report.get('state'),
                   last_error=(node.last_error or report.get('error')),
                   left_over=_left_over(self.lab, node.uuid),
                   others_untouched=self.others_untouched(), **extra)
        fault_table.record(**row)
        return row, report

    def wait_state(self, state, timeout):
        watcher = lab_client.StateWatcher(self.cli, self.node.uuid)
        node = watcher.wait(state, timeout, fail_states=())
        # After a callback timeout Ironic shows "deploy failed" before the
        # clean-up it spawned (with the node's lock) has run: wait for it.
        deadline = time.monotonic() + 120
        while node.reservation and time.monotonic() < deadline:
            time.sleep(1)
            node = self.cli.node.get(self.node.uuid)
        node.last_error = watcher.error_of(node)
        return node

    def wait_step(self, step, timeout=400):
        """Until the node waits on the agent in deploy step ``step``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node = self.cli.node.get(self.node.uuid)
            if ((node.deploy_step or {}).get('step') == step
                    and node.provision_state == 'wait call-back'):
                return node
            if node.provision_state == 'deploy failed':
                raise AssertionError('deploy failed before %s: %s'
                                     % (step, node.last_error))
            time.sleep(0.5)
        raise AssertionError('the deploy never reached %s' % step)



def _domain(lab):
    return lab.node_name(0)


def test_registry_down(lab):
    fault = Fault(lab, 'registry down')
    procs.stop(lab, 'registry')
    try:
        container_job.deploy(lab, lab.demo_image, wait=False)
        node = fault.wait_state('deploy failed', 120)
    finally:
        content_servers.start_registry(lab)
    row, report = fault.finish(node)
    assert row['power'] == 'power off'
    assert lab.registry_address in node.last_error
    assert report['state'] == 'failed'
    assert row['left_over'] == []
    assert row['others_untouched']


def test_cache_disk_full(lab):
    image = _big_image(lab, 'cache-full', 8)
    fault = Fault(lab, 'cache disk full (build)')
    work = _cache_dir(lab, 'work')
    os.makedirs(work, exist_ok=True)
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'bmc-fault',
                    work], check=True)
    try:
        container_job.deploy(lab, image, wait=False)
        node = fault.wait_state('deploy failed', 300)
        row, report = fault.finish(node)
    finally:
        subprocess.run(['umount', '-l', work], check=False)
    assert row['power'] == 'power off'
    assert 'space' in node.last_error.lower(), node.last_error
    assert report['state'] == 'failed'
    assert row['left_over'] == []
    assert row['others_untouched']


def _wait_for_download(lab, timeout=120):
    """Until a connection to the lab's nginx is open (the node's
    artifact download: nginx logs a request only when it ends)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = subprocess.run(
            ['ss', '-Htn', 'state', 'established',
             '( sport = :%d )' % lab.ports.http],
            capture_output=True, text=True, check=True)
        if res.stdout.strip():
            return
        time.sleep(0.2)
    raise AssertionError('no download from nginx within %ds' % timeout)


def test_http_server_restart_mid_download(lab):
    image = _big_image(lab, 'resume', 40)
    fault = Fault(lab, 'HTTP server restart mid-download')
    access_log = logcursor.Cursor(lab.log('nginx-access.log'))
    container_job.deploy(lab, image, wait=False)
    fault.wait_step('bmc_stage_rootfs')
    # 40 MiB at 4 MB/s: restart while the node's download is open.
    _wait_for_download(lab)
    procs.stop(lab, 'nginx')
    content_servers.start_nginx(lab)
    node = fault.wait_state('active', 600)
    report = container_job.wait_report(lab, timeout=300)
    node = fault.cli.node.get(node.uuid)
    # This deploy's requests for this node's artifact only.
    requests = [boot_http_log.parse(line)
                for line in access_log.text().splitlines()]
    resumed = [r for r in requests
               if r and '/%s/rootfs-' % node.uuid in r[4] and r[2] == 206]
    row, report = fault.finish(node, resumed_requests=len(resumed))
    assert report['state'] == 'finished'
    assert report['workload_exit_code'] == 0
    # The agent asked for the rest only.
    assert resumed
    assert row['left_over'] == []
    assert row['others_untouched']


def test_agent_gone_mid_deploy(lab):
    image = _big_image(lab, 'resume', 40)
    fault = Fault(lab, 'agent gone mid-deploy (node hung)')
    container_job.deploy(lab, image, wait=False)
    fault.wait_step('bmc_stage_rootfs')
    # Hung while it downloads the artifact.
    _wait_for_download(lab)
    nodes.virsh('suspend', _domain(lab))
    try:
        node = fault.wait_state(
            'deploy failed', labpool.FAULTS_CALLBACK_TIMEOUT + 300)
    finally:
        nodes.virsh('destroy', _domain(lab), check=False)
    row, report = fault.finish(node)
    assert row['power'] == 'power off'
    assert 'timeout' in node.last_error.lower(), node.last_error
    assert report['state'] == 'failed'
    assert row['left_over'] == []
    assert row['others_untouched']


def test_image_user_unknown(lab):
    image = container_job.push_demo_image_with(lab, 'faults/ghost', {},
                                               user='ghost')
    fault = Fault(lab, 'image User not in its /etc/passwd')
    container_job.deploy(lab, image, wait=False)
    node = fault.wait_state('deploy failed', 400)
    row, report = fault.finish(node)
    assert row['power'] == 'power off'
    assert "user 'ghost' is not in the image" in node.last_error, (
        node.last_error)
    assert report['state'] == 'failed'
    assert row['left_over'] == []
    assert row['others_untouched']


def test_power_lost_during_workload(lab):
    fault = Fault(lab, 'node power lost during the workload')
    container_job.deploy(lab, lab.demo_image, mode=protocol.MODE_SERVICE,
                         extra={'container_command':
                                '["/bin/sh", "-c", "sleep 900"]'})
    container_job.wait_report(lab, states=('running',), timeout=120)
    nodes.virsh('destroy', _domain(lab))
    report = container_job.wait_report(lab, states=('failed',), timeout=300)
    node = fault.cli.node.get(lab.node_name(0))
    node.last_error = lab_client.StateWatcher(
        fault.cli, node.uuid).error_of(node)
    row, report = fault.finish(node)
    assert row['provision_state'] == 'active'
    assert row['power'] == 'power off'
    assert 'is lost' in report['error']
    assert 'is lost' in (node.last_error or ''), node.last_error
    assert row['left_over'] == []
    assert row['others_untouched']


def test_agent_killed_during_a_job(lab):
    """The privileged workload kills every process of the agent's service
    (its cgroup.kill): the workload lives on, in its own cgroup."""
    fault = Fault(lab, 'agent killed during a job')
    command = ['/bin/sh', '-c',
               'sleep 5; echo 1 > /sys/fs/cgroup/system.slice/'
               'ironic-python-agent.service/cgroup.kill && echo agent-killed; '
               'sleep 60; echo survived']
    container_job.deploy(lab, lab.demo_image, extra={
        'container_command': json.dumps(command)})
    t0 = time.monotonic()
    report = container_job.wait_report(lab, states=('finished', 'failed'),
                                       timeout=600)
    ended_after = time.monotonic() - t0
    node = fault.cli.node.get(lab.node_name(0))
    node.last_error = lab_client.StateWatcher(
        fault.cli, node.uuid).error_of(node)
    row, report = fault.finish(node, ended_after_s=round(ended_after))
    # systemd restarts the agent, but a new agent cannot look an ACTIVE
    # node up: the conductor's polls go unanswered, and after
    # workload_lost_timeout (45 s here) the run is lost, the node off.
    assert report['state'] == 'failed'
    assert 'is lost' in report['error']
    assert 'workload_lost_timeout' in (node.last_error or '')
    assert ended_after < 5 + 45 + 2 * 10 + 30
    assert row['power'] == 'power off'
    assert row['provision_state'] == 'active'
    assert row['left_over'] == []
    assert row['others_untouched']


def test_bmc_emulator_killed_during_a_job(lab):
    """The node's virtual BMC dies mid-run (as a pyghmi error once made
    it): the lab's supervisor starts it again, and the run ends as any
    run does, the node powered off through that BMC."""
    fault = Fault(lab, 'virtual BMC killed during a job')
    bmc = virtual_bmcs.bmc_name(0)
    bmc_log = logcursor.Cursor(lab.log(bmc + '.log'))
    command = ['/bin/sh', '-c', 'echo started; sleep 30; echo done']
    # ACTIVE: the workload runs (for 30 s).
    container_job.deploy(lab, lab.demo_image, extra={
        'container_command': json.dumps(command)})
    dead = procs.pid_of(lab, bmc)
    os.killpg(dead, signal.SIGKILL)
    report = container_job.wait_report(lab, states=('finished', 'failed'),
                                       timeout=600)
    node = fault.cli.node.get(lab.node_name(0))
    row, report = fault.finish(node)
    assert report['state'] == 'finished', report.get('error')
    assert report['workload_exit_code'] == 0
    assert 'done' in report['output_tail'].split()
    assert row['power'] == 'power off'
    assert ('bmc-lab supervisor: %s (pid %d) died; starting it again'
            % (bmc, dead)) in bmc_log.text()
    assert procs.pid_of(lab, bmc) not in (None, dead)
    assert nodes.bmc_power_state(lab, 0) == 'off'
    assert row['left_over'] == []
    assert row['others_untouched']


def test_conductor_crash_mid_deploy(lab):
    image = _big_image(lab, 'crash', 120)
    fault = Fault(lab, 'conductor crash mid-deploy (build)')
    container_job.deploy(lab, image, wait=False)
    # The deploy step returns as soon as the node is powered on; the
    # build of 120 MiB is still running.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if fault.cli.node.get(fault.node.uuid).provision_state == \
                'wait call-back':
            break
        time.sleep(0.2)
    ironic_service.restart_ironic(lab, crash=True)
    report = container_job.wait_report(lab, timeout=600)
    node = fault.cli.node.get(fault.node.uuid)
    row, report = fault.finish(
        node, build_restarts=report.get('build_restarts', 0))
    assert report['state'] == 'finished'
    assert report['workload_exit_code'] == 0
    # The restarted conductor built the image again (the crash lost it).
    assert report.get('build_restarts', 0) >= 1, report
    assert row['left_over'] == []
    assert row['others_untouched']
