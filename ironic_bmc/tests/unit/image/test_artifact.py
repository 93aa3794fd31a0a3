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

import os
import subprocess
import tarfile

import pytest

from ironic_bmc.image import artifact, layers
from ironic_bmc.image import exceptions as exc
from ironic_bmc.tests.unit.image import hosttools
from bmc_lab import ociimage
from bmc_lab.ociimage import Entry

ENTRIES = [Entry('home/u', 'dir', uid=1000, gid=1000, mode=0o700),
           Entry('home/u/f', data=b'data', uid=1000, gid=1001, mode=0o640),
           Entry('dev/null', 'chr', devmajor=1, devminor=3, mode=0o666),
           Entry('etc/hosts', data=b'127.0.0.1 localhost\n')]


def unprivileged_tree(tmp_path):
    tree = tmp_path / 'tree'
    tree.mkdir()
    blob, _, _ = ociimage.make_layer(ENTRIES, None)
    (tmp_path / 'l').write_bytes(blob)
    with layers.LayerApplier(str(tree), same_owner=False) as applier:
        applier.apply_file(str(tmp_path / 'l'), 'sha256:l')
        info = applier.finish()
    return tree, info


def test_validate():
    artifact.validate('erofs', 'lz4hc')
    with pytest.raises(ValueError):
        artifact.validate('ext4')
    with pytest.raises(ValueError):
        artifact.validate('erofs', 'xz')


def test_erofs_refused_without_root_when_owners_matter(tmp_path):
    tree, info = unprivileged_tree(tmp_path)
    with pytest.raises(exc.ArtifactBuildError, match='squashfs'):
        artifact.build(str(tree), str(tmp_path / 'a'), 'erofs', info=info,
                       same_owner=False)


def test_squashfs_pseudo_files_without_root(tmp_path):
    hosttools.require('squashfs')
    tree, info = unprivileged_tree(tmp_path)
    out = tmp_path / 'a.sqfs'
    artifact.build(str(tree), str(out), 'squashfs', info=info,
                   same_owner=False)
    listing = subprocess.run(['unsquashfs', '-lln', str(out)], check=True,
                             capture_output=True, text=True).stdout
    lines = {line.split()[-1].split('squashfs-root', 1)[-1]: line
             for line in listing.splitlines() if 'squashfs-root' in line}
    assert lines['/home/u/f'].split()[:2] == ['-rw-r-----', '1000/1001']
    assert lines['/home/u'].split()[1] == '1000/1000'
    assert lines['/etc/hosts'].split()[1] == '0/0'
    assert lines['/dev/null'].startswith('crw-rw-rw-')
    assert not os.path.exists(str(out) + '.pseudo')


def test_tar_headers_without_root(tmp_path):
    tree, info = unprivileged_tree(tmp_path)
    out = tmp_path / 'a.tar'
    artifact.build(str(tree), str(out), 'tar', info=info, same_owner=False)
    with tarfile.open(out) as t:
        members = {m.name: m for m in t.getmembers()}
    assert (members['./home/u/f'].uid, members['./home/u/f'].gid) == (
        1000, 1001)
    assert members['./etc/hosts'].uid == 0
    assert members['./dev/null'].ischr()
    assert members['./dev/null'].devmajor == 1


def test_mkfs_failure_is_reported(tmp_path):
    with pytest.raises(exc.ArtifactBuildError, match='mkfs.erofs'):
        artifact.build(str(tmp_path / 'missing'), str(tmp_path / 'a'),
                       'erofs')


def test_benchmark(tmp_path):
    hosttools.require('erofs', 'squashfs')
    tree = tmp_path / 'tree'
    (tree / 'd').mkdir(parents=True)
    (tree / 'd' / 'f').write_bytes(b'x' * 10000)
    work = tmp_path / 'work'
    work.mkdir()
    results = artifact.benchmark(str(tree), str(work))
    assert {(r['format'], r['compression']) for r in results} == set(
        artifact.BENCHMARK_VARIANTS)
    assert all(r['size'] > 0 for r in results)
    assert os.listdir(work) == []
