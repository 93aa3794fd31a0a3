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


"""The stream rootfs mode on a real QEMU node.

The node fetches only the image's dm-verity tree before the workload
starts; nbdkit (curl plugin, cache and retry filters) serves the artifact
through nbd-client, dm-verity checks each block as it arrives, and the
rest comes in the background until the image is in the node's RAM.

* the demo job runs streamed, then reads a 48 MiB file that was not
  fetched before it started (what crossed the wire before the start is
  less than the file), and the image then becomes fully local (one run,
  two tests);
* with a block cache bounded below the image, the node keeps reading cold
  blocks from the network: with the web server stopped under a read, the
  read waits and goes on when the server is back, and its content is
  right;
* a tampered block fails the read and the run, naming integrity.
"""

import hashlib
import json
import random
import time

import pytest

from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import content_servers
from bmc_lab import nodes
from bmc_lab import procs
from bmc_lab.tests.e2e import test_rootfs_verity as tamper
from bmc_common import protocol


STREAM = {protocol.II_ROOTFS: protocol.ROOTFS_STREAM}
REPO = 'bmc/stream-blob'
BLOB_SIZE = 48 * 1024 * 1024


@pytest.fixture(autouse=True)
def node_back_in_the_pool(lab):
    """A failed test leaves no deploy (and no stopped nginx) behind."""
    yield
    if not procs.running(lab, 'nginx'):
        content_servers.start_nginx(lab)
    cli = lab_client.get_client(lab)
    if cli.node.get(lab.node_name(0)).provision_state != 'available':
        container_job.undeploy(lab)


@pytest.fixture(scope='module')
def blob_image(lab):
    """The demo root plus /data/blob: 48 MiB that do not compress."""
    blob = random.Random(12).randbytes(BLOB_SIZE)
    return (container_job.push_demo_image_with(lab, REPO,
                                               {'/data/blob': blob}),
            hashlib.sha256(blob).hexdigest())


def _run(lab, image, command, extra=None, wait=True):
    return container_job.deploy(lab, image, mode=protocol.MODE_JOB,
                                wait=wait, extra=dict(
                                    STREAM, container_command=json.dumps(
                                        command), **(extra or {})))


@pytest.fixture(scope='module')
def streamed_job(lab, blob_image):
    """The demo (with a message) and a read of /data/blob after the
    start, streamed: one run, read by the two tests below."""
    image, _digest = blob_image
    _run(lab, image, ['/bin/sh', '-c', '/demo.sh; '
                      '/bin/busybox sha256sum /data/blob; sleep 45'],
         extra={protocol.II_ENV: json.dumps(
             {'DEMO_MESSAGE': 'hello-streamed'})})
    report = container_job.wait_report(lab)
    print(container_job.format_report(report))
    container_job.undeploy(lab)
    return report, nodes.bmc_power_state(lab, 0)


def test_demo_job_runs_streamed(streamed_job):
    report, power_after_undeploy = streamed_job
    assert report['workload_exit_code'] == 0
    assert report['rootfs'] == 'stream'
    assert 'hello-streamed' in report['output_tail']
    assert 'root fs:  overlay' in report['output_tail']
    assert report['staging']['rootfs'] == 'stream'
    assert report['staging']['verify'] == 'dm-verity'
    stream = report['stream']
    assert stream['cache_max'] is None
    assert stream['background_rate'] == 64 * 1024 * 1024
    assert power_after_undeploy == 'off'


def test_file_read_after_start_then_fully_local(streamed_job, blob_image):
    report, _power = streamed_job
    _image, digest = blob_image
    assert report['workload_exit_code'] == 0, report.get('error')
    assert digest + '  /data/blob' in report['output_tail']
    before = report['staging']['bytes_before_start']
    # The tree and what the mount read: not the file, read after.
    assert 0 < before < BLOB_SIZE, before
    stream = report['stream']
    assert stream['fully_local'] is True, stream
    assert stream['fully_local_after_start_s'] >= 0
    assert stream['background_fetch_s'] > 0
    assert stream['bytes_fetched'] >= report['artifact']['size']
    assert stream.get('error') is None


def test_cold_blocks_wait_for_a_restarting_web_server(lab, blob_image):
    image, digest = blob_image
    # The read starts while nginx is down, and ends after it is back.
    _run(lab, image, ['/bin/sh', '-c',
                      'echo before; sleep 8; '
                      '/bin/busybox sha256sum /data/blob; echo read-done'],
         extra={protocol.II_STREAM_CACHE: '8M'})
    # ACTIVE: the workload sleeps; the web server goes down for 20 s.
    active = time.monotonic()
    try:
        assert procs.stop(lab, 'nginx')
        time.sleep(20)
        down_since_active = time.monotonic() - active
    finally:
        content_servers.start_nginx(lab)
    report = container_job.wait_report(lab)
    print(container_job.format_report(report))
    assert report['workload_exit_code'] == 0, report.get('error')
    assert digest + '  /data/blob' in report['output_tail']
    assert 'read-done' in report['output_tail']
    # The read overlapped the outage and waited: the workload, which
    # sleeps 8 s, ran (the node's clock, both ends) at least as long as
    # the server was down after it had started.
    exited = next(s for s in report['stages']
                  if s['name'] == protocol.STAGE_WORKLOAD_EXITED)
    ran = exited['end'] - exited['start']
    assert ran >= down_since_active - 1, (ran, down_since_active)
    stream = report['stream']
    assert stream['cache_max'] == 8 * 1024 * 1024
    assert stream['fully_local'] is False
    assert 'bounded to 8388608 bytes' in stream['not_local_reason']
    # The cache kept no more than its bound (and its block map).
    assert 0 < stream['bytes_cached'] <= 9 * 1024 * 1024, stream
    assert stream['bytes_fetched'] is None
    container_job.undeploy(lab)


def test_tampered_block_fails_a_stream_run(lab):
    image = tamper._push_image(lab)
    cli = lab_client.get_client(lab)
    node = cli.node.get(lab.node_name(0))
    _run(lab, image, ['/bin/sh', '-c', 'cat /data/blob > /dev/null'],
         wait=False)
    tamper._tamper(tamper._published(lab, node.uuid))
    report = container_job.wait_report(lab, states=('finished', 'failed'))
    print(container_job.format_report(report))
    assert report['state'] == 'failed', report
    assert report['staging']['rootfs'] == 'stream'
    assert report['workload_exit_code'] != 0
    assert 'Input/output error' in report['output_tail']
    assert 'integrity: dm-verity found a corrupted block' in report['error']
    assert 'integrity' in cli.node.get(lab.node_name(0)).last_error
    assert nodes.bmc_power_state(lab, 0) == 'off'
    container_job.undeploy(lab)
