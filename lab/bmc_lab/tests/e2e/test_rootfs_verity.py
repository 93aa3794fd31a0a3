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


"""dm-verity on a real QEMU node: a tampered block of the rootfs artifact
fails its read, and the run fails naming integrity.

The image carries a file of a known pattern.  Once the conductor has
published the artifact for the deploy (and before the agent, still
booting, fetches it), the test replaces the published file by a copy
with one byte of that file changed: the cache's own entry stays intact.
The workload reads the file: the read fails with an I/O error, the run
ends ``failed`` and the report and ``last_error`` say integrity.
"""

import glob
import json
import os
import subprocess
import time


from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import nodes
from bmc_common import protocol


REPO = 'bmc/tamper'
MARKER = b'BMC-VERITY-TAMPER-TEST-'
BLOB = MARKER * (4 * 1024 * 1024 // len(MARKER))


def _push_image(lab):
    return container_job.push_demo_image_with(lab, REPO, {'/data/blob': BLOB})


def _published(lab, node_uuid, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = glob.glob(os.path.join(lab.http_root, node_uuid,
                                       'rootfs-*', 'rootfs.erofs'))
        if found and os.path.exists(found[0] + '.verity'):
            return found[0]
        time.sleep(0.2)
    raise AssertionError('the artifact was never published')


def _tamper(path):
    """Replace ``path`` by a copy with one byte of the blob flipped."""
    with open(path, 'rb') as f:
        data = bytearray(f.read())
    offset = data.find(MARKER * 64) + 1024 * 1024
    assert offset > 1024 * 1024, 'the blob is not stored verbatim'
    data[offset] ^= 0xFF
    tmp = path + '.tampered'
    with open(tmp, 'wb') as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


def test_tampered_block_fails_the_run(lab):
    image = _push_image(lab)
    cli = lab_client.get_client(lab)
    node = cli.node.get(lab.node_name(0))
    command = ['/bin/sh', '-c', 'cat /data/blob > /dev/null']
    container_job.deploy(lab, image, mode=protocol.MODE_JOB, wait=False,
                         extra={protocol.II_COMMAND: json.dumps(command)})
    published = _published(lab, node.uuid)
    cached = os.path.realpath(published)
    inode = os.stat(published).st_ino
    _tamper(published)
    report = container_job.wait_report(lab, states=('finished', 'failed'))
    print(container_job.format_report(report))
    assert report['state'] == 'failed', report
    assert report['staging']['verify'] == 'dm-verity'
    assert report['workload_exit_code'] != 0
    assert 'Input/output error' in report['output_tail']
    assert 'integrity: dm-verity found a corrupted block' in report['error']
    node = cli.node.get(lab.node_name(0))
    assert 'integrity' in node.last_error
    assert nodes.bmc_power_state(lab, 0) == 'off'
    container_job.undeploy(lab)
    # The cache's entry was never touched: it still matches its tree.
    entry = [p for p in glob.glob(os.path.join(
        lab.path('ironic', 'container_cache', 'entries', '*', 'artifact')))
        if os.stat(p).st_ino == inode]
    assert entry, 'the published file was not the cache entry %s' % cached
    meta = json.load(open(os.path.join(os.path.dirname(entry[0]),
                                       'meta.json')))
    check = subprocess.run(['veritysetup', 'verify', entry[0],
                            entry[0] + '.verity',
                            meta['verity']['root_hash']],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
