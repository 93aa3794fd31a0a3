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

"""End to end: docker-registry + ociimage pushes + the pipeline."""

import os
import subprocess
import sys
import tarfile

import pytest

from ironic_bmc.image import cache as cache_mod
from ironic_bmc.image import exceptions as exc
from ironic_bmc.image import pipeline
from bmc_lab import ociimage
from bmc_lab.ociimage import Entry
from bmc_lab.tests.functional import registry_fixture

pytestmark = pytest.mark.skipif(
    not registry_fixture.DockerRegistry.available(),
    reason='needs /usr/bin/docker-registry')


@pytest.fixture(scope='module')
def registry():
    with registry_fixture.DockerRegistry() as reg:
        yield reg


@pytest.fixture
def cache(tmp_path):
    return cache_mod.ArtifactCache(str(tmp_path / 'cache'),
                                   max_size=1 << 30)


def make_src(tmp_path):
    src = tmp_path / 'src'
    (src / 'bin').mkdir(parents=True)
    (src / 'bin' / 'hello').write_text('#!/bin/sh\necho hello\n')
    os.chmod(src / 'bin' / 'hello', 0o755)
    (src / 'etc').mkdir()
    (src / 'etc' / 'motd').write_text('hi\n')
    os.symlink('motd', src / 'etc' / 'motd.link')
    os.link(src / 'etc' / 'motd', src / 'etc' / 'motd.hard')
    return src


def test_cli_build_push_and_pipeline(registry, cache, tmp_path):
    src = make_src(tmp_path)
    # The CLI as a user runs it: this environment's own interpreter.
    out = subprocess.run(
        [sys.executable, '-m', 'bmc_lab.ociimage',
         'build-push', '--src', str(src), '--ref',
         f'{registry.address}/demo/hello:1', '--entrypoint', '/bin/hello',
         '--cmd', '["--loud"]', '--env', 'GREETING=hi'],
        check=True, capture_output=True, text=True, cwd=str(tmp_path))
    assert '"digest": "sha256:' in out.stdout
    result = pipeline.prepare_rootfs(
        f'oci://{registry.address}/demo/hello:1', cache, cpu_arch='x86_64',
        fmt='erofs', insecure=True, pin='node-a')
    assert result.built
    assert result.config.command == ['/bin/hello', '--loud']
    assert result.config.env == ['GREETING=hi']
    assert cache.pins(result.cache_key) == ['node-a']
    extract = tmp_path / 'x'
    subprocess.run(['fsck.erofs', f'--extract={extract}', result.path],
                   check=True, capture_output=True)
    assert (extract / 'bin/hello').read_text().startswith('#!/bin/sh')
    assert os.readlink(extract / 'etc/motd.link') == 'motd'
    dump = subprocess.run(['dump.erofs', '--path=/etc/motd', result.path],
                          check=True, capture_output=True, text=True).stdout
    assert 'Links: 2' in dump
    again = pipeline.prepare_rootfs(
        f'{registry.address}/demo/hello@{result.manifest_digest}', cache,
        cpu_arch='x86_64', fmt='erofs', insecure=True)
    assert not again.built and again.path == result.path


def test_multiarch_index(registry, cache):
    images = [ociimage.build_image([[Entry('arch', data=arch.encode())]],
                                   arch=arch) for arch in ('amd64', 'arm64')]
    pusher = ociimage.Pusher(registry.address)
    pusher.push_index('multi', 'v1', ociimage.build_index(images))
    for cpu_arch, expected in (('x86_64', b'amd64'), ('aarch64', b'arm64')):
        result = pipeline.prepare_rootfs(
            f'{registry.address}/multi:v1', cache, cpu_arch=cpu_arch,
            fmt='tar', insecure=True)
        with tarfile.open(result.path) as t:
            assert t.extractfile('./arch').read() == expected
    with pytest.raises(exc.NoManifestForArch):
        pipeline.prepare_rootfs(f'{registry.address}/multi:v1', cache,
                                cpu_arch='s390x', fmt='tar', insecure=True)


def test_unknown_tag(registry, cache):
    with pytest.raises(exc.ImageNotFound):
        pipeline.prepare_rootfs(f'{registry.address}/demo/hello:nope',
                                cache, insecure=True, fmt='tar')


def test_bad_layer_refused(registry, cache, tmp_path):
    bad = ociimage.build_image([[Entry('x', 'symlink', linkname='/etc'),
                                 Entry('x/passwd', data=b'root::0:0')]])
    ociimage.Pusher(registry.address).push_image('bad', '1', bad)
    with pytest.raises(exc.UnsafeLayer, match='x/passwd') as raised:
        pipeline.prepare_rootfs(f'{registry.address}/bad:1', cache,
                                insecure=True, fmt='tar', cpu_arch='x86_64')
    assert bad.layer_digests[0] in str(raised.value)
    assert os.listdir(cache.entries_dir) == []
    assert os.listdir(cache.work_dir) == []


def test_corrupted_blob(registry, cache):
    image = ociimage.build_image([[Entry('f', data=b'original')]])
    ociimage.Pusher(registry.address).push_image('corrupt', '1', image)
    digest = image.layer_digests[0]
    registry.corrupt_blob(digest, b'tampered' * 10)
    with pytest.raises(exc.LayerDigestMismatch, match=digest):
        pipeline.prepare_rootfs(f'{registry.address}/corrupt:1', cache,
                                insecure=True, fmt='tar', cpu_arch='x86_64')
    assert os.listdir(cache.work_dir) == []


def test_basic_auth(cache):
    with registry_fixture.DockerRegistry('alice', 's3cret') as reg:
        image = ociimage.build_image([[Entry('f', data=b'auth')]])
        ociimage.Pusher(reg.address, auth=('alice', 's3cret')).push_image(
            'private', '1', image)
        result = pipeline.prepare_rootfs(
            f'{reg.address}/private:1', cache, insecure=True, fmt='tar',
            cpu_arch='x86_64', pull_secret='alice:s3cret')
        assert result.manifest_digest == image.digest
        with pytest.raises(exc.RegistryAuthError):
            pipeline.prepare_rootfs(
                f'{reg.address}/private:1', cache, insecure=True,
                fmt='tar', pull_secret='alice:wrong')
        with pytest.raises(exc.RegistryAuthError):
            pipeline.prepare_rootfs(f'{reg.address}/private:1', cache,
                                    insecure=True, fmt='tar')
