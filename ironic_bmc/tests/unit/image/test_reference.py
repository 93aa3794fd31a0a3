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

import pytest

from ironic_bmc.image import exceptions as exc
from ironic_bmc.image import reference

D = 'sha256:' + 'a' * 64


@pytest.mark.parametrize('ref,expected', [
    ('127.0.0.1:5000/demo:1', ('127.0.0.1:5000', 'demo', '1', None)),
    ('oci://reg.example/ns/app', ('reg.example', 'ns/app', 'latest', None)),
    ('docker://reg.example/app@' + D, ('reg.example', 'app', None, D)),
    ('reg.example:443/a/b:v1.2@' + D, ('reg.example:443', 'a/b', 'v1.2', D)),
    ('localhost/x', ('localhost', 'x', 'latest', None)),
    ('redis', ('docker.io', 'library/redis', 'latest', None)),
    ('user/app:7', ('docker.io', 'user/app', '7', None)),
    ('[::1]:5000/app:1', ('[::1]:5000', 'app', '1', None)),
])
def test_parse(ref, expected):
    r = reference.parse(ref)
    assert (r.registry, r.repository, r.tag, r.digest) == expected


def test_reference_and_str():
    r = reference.parse('reg.example/app:1')
    assert r.reference == '1'
    assert r.with_digest(D).reference == D
    assert str(r.with_digest(D)) == 'reg.example/app:1@' + D
    assert reference.parse('redis').api_host == 'registry-1.docker.io'


@pytest.mark.parametrize('ref', [
    '', '   ', 'http://reg/app', 'reg.example/App', 'reg.example/app:',
    'reg.example/app@sha256:abc', 'reg.example/app@md5:' + 'a' * 32,
    'reg.example/app:bad/tag', 'reg.example/a b', 'reg.example/../x',
    'reg.example/', 'reg.exam ple/x', None,
])
def test_invalid(ref):
    with pytest.raises(exc.InvalidImageReference):
        reference.parse(ref)


def test_reference_past_the_spec_bounds():
    name = 'r.example/' + 'a' * 250
    with pytest.raises(exc.InvalidImageReference,
                       match='longer than 255 characters'):
        reference.parse(name + ':1')
    huge = 'r.example/a:' + 'x' * 120000
    with pytest.raises(exc.InvalidImageReference) as ctx:
        reference.parse(huge)
    assert '120012 characters; a reference has at most' in str(ctx.value)
    # The error does not carry the whole value.
    assert len(str(ctx.value)) < 300
