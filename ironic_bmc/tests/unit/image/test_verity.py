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


"""dm-verity hash trees, built with the real veritysetup and checked with
its own "verify" (userspace: no device-mapper needed)."""

import os
import subprocess

import pytest

from ironic_bmc.image import exceptions as exc
from ironic_bmc.image import verity
from ironic_bmc.tests.unit.image import hosttools


def _data(path, blocks=64):
    with open(path, 'wb') as f:
        for i in range(blocks):
            f.write(bytes([i % 251]) * verity.BLOCK_SIZE)
    return str(path)


def _verify(data, tree, root_hash):
    return subprocess.run(['veritysetup', 'verify', data, tree, root_hash],
                          capture_output=True, text=True)


def test_tree_and_root_hash(tmp_path):
    hosttools.require('verity')
    data = _data(tmp_path / 'artifact')
    params = verity.build(data, str(tmp_path / 'artifact.verity'))
    assert len(params['root_hash']) == 64
    assert params['algorithm'] == 'sha256'
    assert params['data_blocks'] == 64
    assert params['data_block_size'] == params['hash_block_size'] == 4096
    assert params['size'] == os.path.getsize(tmp_path / 'artifact.verity')
    # Published next to the artifact: readable by the HTTP server.
    assert os.stat(tmp_path / 'artifact.verity').st_mode & 0o044 == 0o044
    ok = _verify(data, str(tmp_path / 'artifact.verity'),
                 params['root_hash'])
    assert ok.returncode == 0, ok.stderr
    # One flipped byte in one block: the tree no longer matches.
    with open(data, 'r+b') as f:
        f.seek(17 * verity.BLOCK_SIZE + 100)
        f.write(b'\xff')
    bad = _verify(data, str(tmp_path / 'artifact.verity'),
                  params['root_hash'])
    assert bad.returncode != 0


def test_refuses_a_partial_block(tmp_path):
    data = tmp_path / 'artifact'
    data.write_bytes(b'x' * 5000)
    with pytest.raises(exc.ArtifactBuildError, match='not a multiple of'):
        verity.build(str(data), str(tmp_path / 'artifact.verity'))


def test_missing_tool_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(verity, 'VERITYSETUP', 'veritysetup-not-here')
    with pytest.raises(exc.ArtifactBuildError,
                       match='cryptsetup-bin.*rootfs_verity'):
        verity.build(_data(tmp_path / 'a', 1), str(tmp_path / 'a.verity'))
