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

"""Where the conductor connects for an image and where credentials go,
against real registries on loopback (fakeregistry)."""

from unittest import mock

import pytest

from ironic_bmc.conf import CONF
from ironic_bmc.image import egress
from ironic_bmc.image import exceptions as exc
from ironic_bmc.tests.unit.image import fakeregistry
from ironic_bmc.tests.unit.image import test_pipeline


cache = test_pipeline.cache


@pytest.fixture
def bearer_pair():
    """Registry A, whose token realm is registry B (another host:port)."""
    a = fakeregistry.FakeRegistry(auth='bearer').start()
    b = fakeregistry.FakeRegistry(auth='bearer').start()
    a.realm = b.address
    a.add_image('demo', '1', test_pipeline.simple_image())
    yield a, b
    a.stop()
    b.stop()


def _prepare(reg, cache, **kw):
    return test_pipeline.prepare(reg, 'demo:1', cache, cpu_arch='x86_64',
                                 **kw)


def test_unlisted_registry_on_loopback_is_refused(registry, cache):
    CONF.set_override('allowed_registries', [], 'container')
    registry.add_image('demo', '1', test_pipeline.simple_image())
    with pytest.raises(exc.RegistryRefused) as ctx:
        _prepare(registry, cache)
    assert ('does not connect to %s' % registry.address) in str(ctx.value)
    assert '127.0.0.1, a loopback address' in str(ctx.value)
    assert registry.requests == []      # not one request reached it


def test_credentials_not_sent_to_an_unlisted_token_realm(bearer_pair, cache):
    a, b = bearer_pair
    CONF.set_override('credential_registries', [a.address], 'container')
    with pytest.raises(exc.RegistryRefused) as ctx:
        _prepare(a, cache, pull_secret='user:secret')
    assert ('does not connect to %s' % b.address) in str(ctx.value)
    assert 'credential_registries' in str(ctx.value)
    assert '/token' not in b.requests
    # Both listed: the same pull works.
    CONF.set_override('credential_registries', [a.address, b.address],
                      'container')
    assert _prepare(a, cache, pull_secret='user:secret').built


def test_peer_checked_again_after_the_connection(registry, cache):
    """A name that resolved to a public address a moment before and to
    an internal one at the connection (DNS rebinding): the answer is
    thrown away."""
    CONF.set_override('allowed_registries', [], 'container')
    registry.add_image('demo', '1', test_pipeline.simple_image())
    with mock.patch.object(egress, 'check_host', autospec=True):
        with pytest.raises(exc.RegistryRefused) as ctx:
            _prepare(registry, cache)
    assert 'it connected to 127.0.0.1, a loopback address' in str(ctx.value)


def test_listed_registry_keeps_working(registry, cache):
    registry.add_image('demo', '1', test_pipeline.simple_image())
    assert _prepare(registry, cache).built


@pytest.mark.parametrize('address,refused', [
    ('8.8.8.8', False), ('2001:4860:4860::8888', False),
    ('100.64.0.1', True),       # carrier-grade NAT: not global
    ('fd00::1', True), ('fe80::1%eth0', True), ('224.0.0.1', True),
    ('240.0.0.1', True), ('192.0.2.1', True),
])
def test_why_refused(address, refused):
    assert bool(egress.why_refused(address)) is refused
