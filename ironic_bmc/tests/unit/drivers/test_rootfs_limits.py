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

"""The limits the conductor applies to every image, whatever the node."""

import types

import pytest
from ironic.common import exception
from ironic.conf import CONF

from ironic_bmc import deploy_info
from ironic_bmc.drivers import rootfs

MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def container_opts():
    yield
    for opt in ('max_image_size_mb', 'allowed_xattrs', 'allowed_registries'):
        CONF.clear_override(opt, group='container')


def node(**properties):
    return types.SimpleNamespace(uuid='n-1', properties=properties)


def test_size_limit_applies_without_memory_mb():
    CONF.set_override('max_image_size_mb', 100, group='container')
    assert rootfs.size_limit(node()) == (
        100 * MiB, '[container]max_image_size_mb')
    assert rootfs.size_limit(node(memory_mb='garbage'))[0] == 100 * MiB


def test_size_limit_is_the_smaller_bound():
    CONF.set_override('max_image_size_mb', 100, group='container')
    limit, why = rootfs.size_limit(node(memory_mb=64))
    assert limit == 32 * MiB and why == '0.5 of properties/memory_mb'
    assert rootfs.size_limit(node(memory_mb=4096))[0] == 100 * MiB


def test_layer_limits_from_options():
    CONF.set_override('allowed_xattrs', ['user.*'], group='container')
    limits = rootfs.layer_limits()
    assert limits.allowed_xattrs == ('user.*',)
    assert limits.max_header_bytes == 1024 * 1024
    assert limits.max_entries == 1000000


def test_pull_secret_not_in_repr():
    info = deploy_info.ContainerInfo(image='r.example/a:1',
                                     pull_secret='user:s3cret')
    assert 's3cret' not in repr(info)
    assert 's3cret' not in str(info)
    assert info.pull_secret == 'user:s3cret'


def _container_node(image):
    return types.SimpleNamespace(uuid='n-1', properties={}, driver_info={},
                                 driver_internal_info={},
                                 instance_info={'container_image': image})


def test_allowed_registries():
    # Empty: any registry.
    deploy_info.parse(_container_node('anywhere.example/app:1'))
    CONF.set_override('allowed_registries',
                      ['registry.example', 'other.example:5000'],
                      group='container')
    for image in ('registry.example/app:1', 'registry.example:443/app:1',
                  'oci://other.example:5000/app:1'):
        assert deploy_info.parse(_container_node(image)).image == image
    for image in ('169.254.169.254/latest:1', 'other.example:5001/app:1',
                  'registry.example.evil/app:1'):
        with pytest.raises(exception.InvalidParameterValue,
                           match='instance_info/container_image: registry '
                                 '.* is not in .container.allowed_regis'):
            deploy_info.parse(_container_node(image))


def test_conductor_cache_sweeps_stale_work_once(tmp_path):
    cache_dir = str(tmp_path / 'cache')
    stale = tmp_path / 'cache' / 'work' / ('sha256-' + 'f' * 64
                                          + '-erofs-none-v1.abc')
    stale.mkdir(parents=True)
    CONF.set_override('image_cache_dir', cache_dir, group='container')
    rootfs._cache.cache_clear()
    try:
        rootfs.get_cache()
        assert not stale.exists()
    finally:
        CONF.clear_override('image_cache_dir', group='container')
        rootfs._cache.cache_clear()
