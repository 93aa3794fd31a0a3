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

import hashlib
import os
import socket
import subprocess
import tarfile

import pytest

from ironic_bmc.image import cache as cache_mod
from ironic_bmc.image import exceptions as exc
from ironic_bmc.tests.unit.image import hosttools
from ironic_bmc.image import pipeline
from ironic_bmc.image import registry as registry_mod
from bmc_lab import ociimage
from bmc_lab.ociimage import Entry
from ironic_bmc.tests.unit.image import fakeregistry


def simple_image(arch='amd64', marker=b'hello', compression='gzip'):
    return ociimage.build_image(
        [[Entry('bin', 'dir'), Entry('bin/app', data=b'#!/bin/sh\n',
                                     mode=0o755),
          Entry('etc/gone', data=b'x')],
         [Entry('data/marker', data=marker), ociimage.whiteout('etc/gone')]],
        entrypoint=['/bin/app'], cmd=['--serve'], env=['A=1'],
        workdir='/data', user='1000:1000', arch=arch,
        compression=compression)


@pytest.fixture
def cache(tmp_path):
    return cache_mod.ArtifactCache(str(tmp_path / 'cache'))


def prepare(registry, ref, cache, **kw):
    kw.setdefault('fmt', 'tar')
    return pipeline.prepare_rootfs(f'{registry.address}/{ref}', cache,
                                   insecure=True, **kw)


def tar_names(path):
    with tarfile.open(path) as t:
        return {m.name: m for m in t.getmembers()}


def test_tag_to_artifact(registry, cache):
    image = simple_image()
    registry.add_image('demo', '1', image)
    result = prepare(registry, 'demo:1', cache, cpu_arch='x86_64')
    assert result.built
    assert result.manifest_digest == image.digest
    assert result.format == 'tar'
    assert result.image.endswith('demo:1@' + image.digest)
    assert result.config.command == ['/bin/app', '--serve']
    assert result.config.env_dict == {'A': '1'}
    assert (result.config.working_dir, result.config.user) == (
        '/data', '1000:1000')
    assert result.size == os.path.getsize(result.path)
    with open(result.path, 'rb') as f:
        assert result.digest == 'sha256:' + hashlib.sha256(
            f.read()).hexdigest()
    assert result.unpacked_size == len(b'#!/bin/sh\n') + len(b'hello')
    names = tar_names(result.path)
    assert './data/marker' in names and './bin/app' in names
    assert './etc/gone' not in names
    # Second time: from the cache, same artifact.
    again = prepare(registry, 'demo:1', cache, cpu_arch='x86_64')
    assert not again.built and again.path == result.path
    assert again.to_dict()['config']['cmd'] == ['--serve']


def test_digest_reference(registry, cache):
    image = simple_image()
    registry.add_image('demo', None, image)
    result = prepare(registry, 'demo@' + image.digest, cache,
                     cpu_arch='x86_64')
    assert result.manifest_digest == image.digest


@pytest.mark.parametrize('cpu_arch,marker', [('x86_64', b'amd'),
                                              ('aarch64', b'arm')])
def test_index_selects_arch(registry, cache, cpu_arch, marker):
    index = ociimage.build_index([simple_image('amd64', b'amd'),
                                  simple_image('arm64', b'arm')])
    registry.add_index('multi', 'latest', index)
    result = prepare(registry, 'multi', cache, cpu_arch=cpu_arch)
    with tarfile.open(result.path) as t:
        assert t.extractfile('./data/marker').read() == marker
    assert result.architecture == registry_mod.oci_arch(cpu_arch)


def test_index_without_arch(registry, cache):
    index = ociimage.build_index([simple_image('amd64')])
    registry.add_index('multi', 'latest', index)
    with pytest.raises(exc.NoManifestForArch, match='linux/amd64'):
        prepare(registry, 'multi', cache, cpu_arch='aarch64')


def test_single_manifest_wrong_arch(registry, cache):
    registry.add_image('demo', '1', simple_image('arm64'))
    with pytest.raises(exc.NoManifestForArch, match='amd64'):
        prepare(registry, 'demo:1', cache, cpu_arch='x86_64')
    assert os.listdir(cache.entries_dir) == []


def test_unknown_tag_and_repo(registry, cache):
    registry.add_image('demo', '1', simple_image())
    with pytest.raises(exc.ImageNotFound, match='HTTP 404'):
        prepare(registry, 'demo:2', cache)
    with pytest.raises(exc.ImageNotFound):
        prepare(registry, 'nothere:1', cache)


def test_registry_unreachable(cache):
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(exc.RegistryUnreachable, match=f'127.0.0.1:{port}'):
        pipeline.prepare_rootfs(f'127.0.0.1:{port}/demo:1', cache,
                                insecure=True, fmt='tar')


@pytest.mark.parametrize('auth', ['basic', 'bearer'])
def test_auth(cache, auth):
    reg = fakeregistry.FakeRegistry(auth=auth).start()
    try:
        reg.add_image('demo', '1', simple_image())
        result = prepare(reg, 'demo:1', cache, cpu_arch='x86_64',
                         pull_secret='user:secret')
        assert result.built
        with pytest.raises(exc.RegistryAuthError):
            prepare(reg, 'demo:1', cache, pull_secret='user:wrong')
        with pytest.raises(exc.RegistryAuthError):
            prepare(reg, 'demo:1', cache)
    finally:
        reg.stop()


def test_manifest_digest_mismatch(registry, cache):
    image = simple_image()
    registry.add_image('demo', '1', image)
    registry.digest_header_override[('demo', '1')] = 'sha256:' + '0' * 64
    with pytest.raises(exc.ManifestDigestMismatch, match='0' * 64):
        prepare(registry, 'demo:1', cache)
    # Content served under a digest that does not match it.
    registry.manifests[('demo', 'sha256:' + '1' * 64)] = (
        image.manifest, ociimage.MEDIA_MANIFEST)
    with pytest.raises(exc.ManifestDigestMismatch):
        prepare(registry, 'demo@sha256:' + '1' * 64, cache)


def test_layer_digest_mismatch(registry, cache):
    good = simple_image(marker=b'good')
    registry.add_image('good', '1', good)
    kept = prepare(registry, 'good:1', cache, cpu_arch='x86_64')
    bad = ociimage.with_wrong_layer_digest(simple_image(), layer=1)
    registry.add_image('demo', '1', bad)
    with pytest.raises(exc.LayerDigestMismatch) as raised:
        prepare(registry, 'demo:1', cache, cpu_arch='x86_64')
    assert bad.layer_digests[1] in str(raised.value)
    assert os.listdir(cache.work_dir) == []
    assert os.listdir(cache.entries_dir) == [kept.cache_key]


def test_unsafe_layer_leaves_cache_alone(registry, cache, tmp_path):
    good = simple_image(marker=b'good')
    registry.add_image('good', '1', good)
    kept = prepare(registry, 'good:1', cache, cpu_arch='x86_64')
    bad = ociimage.build_image([
        [Entry('ok', data=b'1')],
        [Entry('a', 'symlink', linkname=str(tmp_path)),
         Entry('a/pwned', data=b'x')]])
    registry.add_image('bad', '1', bad)
    with pytest.raises(exc.UnsafeLayer) as raised:
        prepare(registry, 'bad:1', cache, cpu_arch='x86_64')
    assert bad.layer_digests[1] in str(raised.value)
    assert 'a/pwned' in str(raised.value)
    assert not os.path.exists(tmp_path / 'pwned')
    assert os.listdir(cache.work_dir) == []
    assert os.listdir(cache.entries_dir) == [kept.cache_key]


def test_too_large(registry, cache):
    registry.add_image('demo', '1', simple_image(marker=b'x' * 10000))
    with pytest.raises(exc.ImageTooLarge):
        prepare(registry, 'demo:1', cache, cpu_arch='x86_64',
                max_unpacked_size=5000)
    assert os.listdir(cache.entries_dir) == []
    result = prepare(registry, 'demo:1', cache, cpu_arch='x86_64', pin='n')
    with pytest.raises(exc.ImageTooLarge):
        prepare(registry, 'demo:1', cache, cpu_arch='x86_64',
                max_unpacked_size=5000, pin='m')
    assert cache.pins(result.cache_key) == ['n']


def test_artifact_not_an_image(registry, cache):
    image = simple_image()
    doc = image.manifest_json
    doc['config']['mediaType'] = 'application/vnd.oci.empty.v1+json'
    image = ociimage.Image(manifest=ociimage.json.dumps(doc).encode(),
                           blobs=image.blobs, config=image.config)
    registry.add_image('art', '1', image)
    with pytest.raises(exc.UnsupportedImage, match='artifact'):
        prepare(registry, 'art:1', cache)


@pytest.mark.parametrize('fmt,compression', [
    ('erofs', None), ('erofs', 'lz4'), ('squashfs', None),
    ('squashfs', 'gzip')])
def test_filesystem_formats(registry, cache, tmp_path, fmt, compression):
    hosttools.require(fmt)
    registry.add_image('demo', '1', simple_image(compression='zstd'))
    result = prepare(registry, 'demo:1', cache, cpu_arch='x86_64', fmt=fmt,
                     compression=compression)
    out = tmp_path / 'x'
    if fmt == 'erofs':
        subprocess.run(['fsck.erofs', f'--extract={out}', result.path],
                       check=True, capture_output=True)
    else:
        subprocess.run(['unsquashfs', '-q', '-n', '-d', str(out),
                        result.path], check=True, capture_output=True)
    assert (out / 'data/marker').read_bytes() == b'hello'
    assert not (out / 'etc/gone').exists()
    assert os.access(out / 'bin/app', os.X_OK)
    assert result.cache_key.endswith(
        f'-{fmt}-{compression or "none"}-v{pipeline.BUILDER_VERSION}')


def test_layer_descriptor_without_size_refused(registry, cache):
    """The size bounds the blob's download: a descriptor without one is
    refused before anything is downloaded."""
    import json
    image = simple_image()
    manifest = json.loads(image.manifest)
    del manifest['layers'][0]['size']
    body = json.dumps(manifest).encode()
    registry.manifests[('nosize', '1')] = (body, ociimage.MEDIA_MANIFEST)
    for digest, data in image.blobs.items():
        registry.blobs[('nosize', digest)] = data
    with pytest.raises(exc.UnsupportedImage, match='no valid size'):
        prepare(registry, 'nosize:1', cache, cpu_arch='x86_64')
    assert not [r for r in registry.requests if '/blobs/' in r]
    assert os.listdir(cache.work_dir) == []


def test_remote_error_body_not_in_error(registry, cache):
    """What a remote host answers never reaches a user-visible message
    (last_error is readable by the node's owner): the status does."""
    with pytest.raises(exc.ImageNotFound) as raised:
        prepare(registry, 'demo:missing', cache, cpu_arch='x86_64')
    assert 'HTTP 404' in str(raised.value)
    assert 'MANIFEST_UNKNOWN' not in str(raised.value)


def test_one_resolution_carried_through_a_moving_tag(registry, cache):
    """The digest checked and reported at resolve time is the one built,
    even when the tag moves before the build."""
    first, second = (simple_image(marker=b'first'),
                     simple_image(marker=b'second'))
    registry.add_image('demo', '1', first)
    resolved = pipeline.resolve(f'{registry.address}/demo:1',
                                cpu_arch='x86_64', insecure=True)
    registry.add_image('demo', '1', second)   # the tag moves
    result = prepare(registry, 'demo:1', cache, cpu_arch='x86_64',
                     resolved=resolved)
    assert result.manifest_digest == resolved[0].manifest_digest
    assert result.manifest_digest == first.digest
    with tarfile.open(result.path) as t:
        assert t.extractfile('./data/marker').read() == b'first'


def test_tree_for_nfs(registry, cache):
    """The nfs mode's artifact is the unpacked tree itself."""
    image = simple_image()
    registry.add_image('demo', '1', image)
    result = prepare(registry, 'demo:1', cache, cpu_arch='x86_64',
                     fmt='tree')
    assert os.path.isdir(result.path)
    assert open(os.path.join(result.path, 'data/marker'), 'rb').read() == \
        b'hello'
    assert not os.path.exists(os.path.join(result.path, 'etc/gone'))
    assert os.access(os.path.join(result.path, 'bin/app'), os.X_OK)
    # Named by the image; sized by its files.
    assert result.digest == image.digest
    assert result.size == result.unpacked_size == len(b'#!/bin/sh\n') + 5
    assert result.cache_key.endswith(
        '-tree-none-v%d' % pipeline.BUILDER_VERSION)
    # Its files, plus the entry's metadata: not the directory's blocks.
    assert result.size < cache.total_size() < result.size + 2048
    again = prepare(registry, 'demo:1', cache, cpu_arch='x86_64',
                    fmt='tree')
    assert not again.built and again.path == result.path


def test_erofs_with_verity(registry, cache, tmp_path):
    """The hash tree lives in the entry next to the artifact, its root
    hash in the metadata; the key says the entry has one."""
    hosttools.require('erofs', 'verity')
    registry.add_image('demo', '1', simple_image())
    result = prepare(registry, 'demo:1', cache, cpu_arch='x86_64',
                     fmt='erofs', verity=True)
    assert result.cache_key.endswith(
        '-erofs-none-v%d-verity' % pipeline.BUILDER_VERSION)
    assert os.path.isfile(result.verity_path)
    assert os.path.dirname(result.verity_path) == os.path.dirname(
        result.path)
    check = subprocess.run(['veritysetup', 'verify', result.path,
                            result.verity_path, result.verity['root_hash']],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    # The entry without a tree is another entry.
    plain = prepare(registry, 'demo:1', cache, cpu_arch='x86_64',
                    fmt='erofs')
    assert plain.built and plain.verity is None and plain.verity_path is None


def test_verity_needs_a_block_format(registry, cache):
    with pytest.raises(ValueError, match='tar artifact cannot have a '
                                         'dm-verity tree'):
        prepare(registry, 'demo:1', cache, fmt='tar', verity=True)


def test_too_many_layers(registry, cache):
    layers = [[Entry('f%d' % i, data=b'x')]
              for i in range(pipeline.MAX_LAYERS + 1)]
    registry.add_image('deep', '1', ociimage.build_image(layers,
                                                         cmd=['/f0']))
    with pytest.raises(exc.UnsupportedImage,
                       match='it has 129 layers, more than 128'):
        prepare(registry, 'deep:1', cache, cpu_arch='x86_64')
