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


"""The nfs rootfs mode against a real nfs-ganesha (the lab's service) and
a real NFSv4 client (libnfs's nfs-cat and nfs-cp): an image's tree from
the registry, exported read-only and root-squashed, to the node that
holds it only, withdrawn after.
"""

import os
import shutil
import subprocess

import pytest

from ironic_bmc.image import cache as cache_mod
from ironic_bmc.image import pipeline
from ironic_bmc.nfs import ganesha
from bmc_lab import content_servers
from bmc_lab import ironic_conf
from bmc_lab import ociimage
from bmc_lab.ociimage import Entry
from bmc_lab import procs
from bmc_lab.tests import labfixture
from bmc_lab.tests.functional import registry_fixture

pytestmark = pytest.mark.skipif(
    not (registry_fixture.DockerRegistry.available()
         and shutil.which('ganesha.nfsd') and shutil.which('nfs-cat')),
    reason='needs docker-registry, nfs-ganesha and libnfs-utils '
           '(tools/host-setup.sh installs them)')


@pytest.fixture(scope='module')
def registry():
    with registry_fixture.DockerRegistry() as reg:
        yield reg


@pytest.fixture
def nfs_lab(tmp_path):
    settings = labfixture.lab_settings_for('functional')
    settings.state_dir = str(tmp_path / 'lab')
    os.makedirs(settings.log_dir, exist_ok=True)
    content_servers.start_nfs(settings)
    yield settings
    procs.stop(settings, 'nfs-ganesha')


def _url(settings, path):
    return 'nfs://127.0.0.1%s?version=4&nfsport=%d' % (path,
                                                        settings.ports.nfs)


def _nfs_cat(settings, path):
    return subprocess.run(['nfs-cat', _url(settings, path)],
                          capture_output=True, timeout=60)


def _until_unreadable(settings, path, why):
    """ganesha re-reads its exports in the background after SIGHUP: wait
    (10 s at most) until ``path`` cannot be read; fail with ``why``."""
    for _ in range(50):
        if _nfs_cat(settings, path).returncode != 0:
            return
        procs.time.sleep(0.2)
    pytest.fail(why)


def test_tree_exported_read_only_while_held(registry, nfs_lab, tmp_path):
    image = ociimage.build_image(
        [[Entry('bin', 'dir'),
          Entry('bin/app', data=b'#!/bin/sh\necho app\n', mode=0o755),
          Entry('etc', 'dir'),
          Entry('etc/secret', data=b'root only\n', mode=0o600,
                uid=0, gid=0),
          Entry('home/user/data', data=b'user file\n', uid=1000,
                gid=1000)]],
        entrypoint=['/bin/app'])
    ociimage.Pusher(registry.address).push_image('demo/nfs', '1', image)
    cache = cache_mod.ArtifactCache(str(tmp_path / 'cache'))
    artifact = pipeline.prepare_rootfs(
        f'{registry.address}/demo/nfs:1', cache, cpu_arch='x86_64',
        fmt='tree', insecure=True, pin='node-a')
    table = ganesha.ExportTable(ironic_conf.nfs_exports_file(nfs_lab),
                                ironic_conf.nfs_pid_file(nfs_lab))
    # Mountable by the node that uses it: here, this host's loopback
    # address stands for that node.
    assert table.sync({artifact.cache_key: (artifact.path, ['127.0.0.1'])})
    export = ganesha.pseudo_path(artifact.cache_key)

    # ganesha re-reads its exports in the background after SIGHUP.
    got = None
    for _ in range(50):
        got = _nfs_cat(nfs_lab, export + '/bin/app')
        if got.returncode == 0:
            break
        procs.time.sleep(0.2)
    assert got.returncode == 0, got.stderr
    assert got.stdout == b'#!/bin/sh\necho app\n'
    # Owners are the image's; root is squashed: a root-only file of the
    # image is not read over NFS.
    assert _nfs_cat(nfs_lab, export + '/etc/secret').returncode != 0
    assert _nfs_cat(nfs_lab,
                    export + '/home/user/data').stdout == b'user file\n'
    assert os.stat(os.path.join(artifact.path, 'home/user/data')).st_uid == \
        1000

    # Never writable by a node.
    local = tmp_path / 'new'
    local.write_bytes(b'x')
    put = subprocess.run(['nfs-cp', str(local),
                          _url(nfs_lab, export + '/bin/new')],
                         capture_output=True, timeout=60)
    assert put.returncode != 0
    assert not os.path.exists(os.path.join(artifact.path, 'bin/new'))

    # The export now belongs to another node (127.0.0.2): this host, a
    # node of another tenant, can no longer read it.
    assert table.sync({artifact.cache_key: (artifact.path, ['127.0.0.2'])})
    _until_unreadable(nfs_lab, export + '/bin/app',
                      'a node not listed for the export still reads it')
    for _ in range(3):
        assert _nfs_cat(nfs_lab, export + '/bin/app').returncode != 0

    # The last node is done: withdrawn, then evictable.
    cache.unpin(artifact.cache_key, 'node-a')
    assert table.sync({})
    _until_unreadable(nfs_lab, export + '/bin/app',
                      'the export stayed after it was withdrawn')
    assert cache.evict(max_size=0) == [artifact.cache_key]
