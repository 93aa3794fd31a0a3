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


"""The nfs rootfs mode on a real QEMU node and the lab's nfs-ganesha.

The demo image runs with its root mounted from the conductor host's
export (read-only, a tmpfs overlay on top), nothing downloaded first; the
export goes away with the deploy.  With the server down the deploy fails
before the node is powered on.  A server restarted under a running
workload makes its reads wait, then go on (``hard`` mount): the demo job
first reads its script while the server is down, waits, and ends well
(one run for the job's checks and the restart's).
"""

import json
import time

import pytest

from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import content_servers
from bmc_lab import ironic_conf
from bmc_lab import nodes
from bmc_lab import procs
from bmc_lab.tests.e2e import boot_count
from bmc_common import protocol


NFS = {protocol.II_ROOTFS: protocol.ROOTFS_NFS}


@pytest.fixture(autouse=True)
def node_back_in_the_pool(lab):
    """A failed test leaves no deploy behind for the next one."""
    yield
    cli = lab_client.get_client(lab)
    if cli.node.get(lab.node_name(0)).provision_state != 'available':
        container_job.undeploy(lab)


def _exports(lab):
    with open(ironic_conf.nfs_exports_file(lab)) as f:
        return f.read()


#: How long the server stays down under a running workload (seconds).
OUTAGE = 25


@pytest.fixture(scope='module')
def nfs_job(lab):
    """The demo from the export, with the server down under the running
    job: its first read of /demo.sh (10 s in) falls in the outage.  One
    run, what the two tests below check observed once."""
    image = container_job.push_demo_image(lab)
    command = ['/bin/sh', '-c',
               'echo before; sleep 10; /demo.sh; '
               'grep -c DEMO_MESSAGE /demo.sh; echo read-after-restart']
    container_job.deploy(lab, image, mode=protocol.MODE_JOB, extra=dict(
        NFS, container_command=json.dumps(command),
        container_env=json.dumps({'DEMO_MESSAGE': 'hello-over-nfs'})))
    # ACTIVE: the workload runs and sleeps.  The server goes down under
    # it for OUTAGE seconds (an outage of that length is the fault).
    active = time.monotonic()
    try:
        assert procs.stop(lab, 'nfs-ganesha')
        time.sleep(OUTAGE)
        down_since_active = time.monotonic() - active
    finally:
        content_servers.start_nfs(lab)
    report = container_job.wait_report(lab)
    print(container_job.format_report(report))
    run = {'report': report, 'down_since_active': down_since_active,
           'exports_while_deployed': _exports(lab)}
    container_job.undeploy(lab)
    run['exports_after'] = _exports(lab)
    run['power_after'] = nodes.bmc_power_state(lab, 0)
    return run


def test_job_runs_from_the_nfs_export(nfs_job):
    report = nfs_job['report']
    assert report['workload_exit_code'] == 0
    assert report['rootfs'] == 'nfs'
    assert 'hello-over-nfs' in report['output_tail']
    assert 'root fs:  overlay' in report['output_tail']
    staging = report['staging']
    assert staging['rootfs'] == 'nfs'
    assert staging['bytes_before_start'] == 0
    assert staging['nfs_export'].startswith('10.0.2.100:/bmc/sha256-')
    assert staging['nfs_mount_s'] > 0
    export = staging['nfs_export'].split(':', 1)[1]
    assert export == '/bmc/' + report['artifact']['cache_key']
    assert report['artifact']['format'] == 'tree'
    # Exported while the node holds the image ...
    assert 'Pseudo = "%s";' % export in nfs_job['exports_while_deployed']
    # ... and withdrawn with the deploy.
    assert 'EXPORT' not in nfs_job['exports_after']
    assert nfs_job['power_after'] == 'off'


def test_server_down_fails_before_power_on(lab):
    image = container_job.push_demo_image(lab)
    assert procs.stop(lab, 'nfs-ganesha')
    # The node's QEMU starts so far: libvirt logs each power-on.
    started = boot_count.boots()
    assert started is not None
    try:
        watcher = container_job.deploy(lab, image, mode=protocol.MODE_JOB,
                                       extra=NFS, wait=False)
        node = watcher.wait('deploy failed', 120)
        assert 'nfs-ganesha' in node.last_error, node.last_error
        assert '[container]nfs_pid_file' in node.last_error
        # Refused before the node was ever powered on, not switched off
        # by the clean-up after a boot.
        assert boot_count.boots() == started
        assert nodes.bmc_power_state(lab, 0) == 'off'
    finally:
        content_servers.start_nfs(lab)
    container_job.undeploy(lab)
    assert 'EXPORT' not in _exports(lab)


def test_reads_wait_for_a_restarting_server(nfs_job):
    report = nfs_job['report']
    assert report['workload_exit_code'] == 0, report.get('error')
    assert 'read-after-restart' in report['output_tail']
    lines = report['output_tail'].split()
    assert lines[lines.index('read-after-restart') - 1] == '1'
    # The read overlapped the outage and waited for the server: the
    # workload, which sleeps 10 s, ran (on the node's clock, both ends)
    # at least as long as the server was down after it had started.
    exited = next(s for s in report['stages']
                  if s['name'] == protocol.STAGE_WORKLOAD_EXITED)
    ran = exited['end'] - exited['start']
    down = nfs_job['down_since_active']
    assert ran >= down - 1, (ran, down)
