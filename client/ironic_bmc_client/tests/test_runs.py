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

"""The runs API client: URLs, parameters, errors, sha256 checks."""

import hashlib
import json
from unittest import mock

import pytest

from ironic_bmc_client import runs
from ironic_bmc_client.tests import fixtures


class Response:
    """What a keystoneauth1 adapter returns (a requests response)."""

    def __init__(self, status_code=200, body=None, content=None,
                 headers=None, reason='OK'):
        self.status_code = status_code
        if body is not None:
            content = json.dumps(body).encode()
        self.content = content or b''
        self.headers = headers or {}
        self.reason = reason
        self.encoding = None

    @property
    def text(self):
        return self.content.decode(self.encoding or 'utf-8', 'replace')

    def json(self):
        return json.loads(self.content)


def client(*responses):
    out = runs.RunsClient(mock.sentinel.session)
    # keystoneauth's adapter's get, specced (a call it would refuse fails
    # here), and nothing else of it: the runs API is read with GETs only.
    api = mock.create_autospec(runs.adapter.Adapter, instance=True)
    out._api = mock.Mock(spec=['get'], get=api.get)
    out._api.get.side_effect = list(responses)
    return out


def test_adapter_gets_the_service_and_endpoint():
    with mock.patch.object(runs.adapter, 'Adapter', autospec=True) as adapter:
        runs.RunsClient(mock.sentinel.session, interface='internal',
                        region_name='R1', endpoint_override='http://x:1')
    adapter.assert_called_once_with(
        mock.sentinel.session, service_type='baremetal-container',
        interface='internal', region_name='R1',
        endpoint_override='http://x:1')


def test_list_passes_only_the_given_filters():
    c = client(Response(body={'runs': [fixtures.RUN_ROW]}))
    assert c.list(node='node-0', limit=5) == [fixtures.RUN_ROW]
    c._api.get.assert_called_once_with(
        '/v1/runs', params={'node': 'node-0', 'limit': 5}, raise_exc=False,
        headers={'Accept': 'application/json'})


def test_get():
    c = client(Response(body=fixtures.REPORT))
    assert c.get(fixtures.DEPLOY_ID)['state'] == 'finished'
    assert c._api.get.call_args[0][0] == '/v1/runs/' + fixtures.DEPLOY_ID


def test_not_found_carries_the_server_message():
    c = client(Response(404, body={'error': {
        'code': 404, 'title': 'Not Found',
        'message': 'Run abc could not be found.'}}, reason='Not Found'))
    with pytest.raises(runs.NotFound) as exc:
        c.get('abc')
    assert str(exc.value) == 'Run abc could not be found.'
    assert exc.value.status_code == 404


def test_error_without_a_json_body():
    c = client(Response(502, content=b'Bad gateway\n', reason='Bad Gateway'))
    with pytest.raises(runs.RunsError) as exc:
        c.list()
    assert not isinstance(exc.value, runs.NotFound)
    assert str(exc.value) == '502 Bad gateway'


def test_output_tail_and_full():
    c = client(Response(content='héllo\n'.encode(), headers={
        'X-Run-State': 'running', 'X-Run-Output': 'tail'}),
        Response(content=b'all\n', headers={
            'X-Run-State': 'finished', 'X-Run-Output': 'full'}))
    assert c.output('r1') == runs.RunOutput('héllo\n', 'running', False)
    assert c._api.get.call_args[0][0] == '/v1/runs/r1/output'
    assert c._api.get.call_args[1]['headers'] == {'Accept': 'text/plain'}
    assert c.output('r1') == runs.RunOutput('all\n', 'finished', True)


def test_results_listing():
    body = {'results': [{'path': '/results/a.csv', 'size': 3,
                         'sha256': 'x'}], 'refused': []}
    c = client(Response(body=body))
    assert c.results('r1') == body
    assert c._api.get.call_args[0][0] == '/v1/runs/r1/results'


def test_result_checks_both_digests():
    data = b'1,2\n'
    digest = hashlib.sha256(data).hexdigest()
    c = client(Response(content=data, headers={'X-Result-Sha256': digest}))
    assert c.result('r1', '/results/a b.csv', sha256=digest) == data
    assert (c._api.get.call_args[0][0]
            == '/v1/runs/r1/results/results/a%20b.csv')


@pytest.mark.parametrize('header,listed,source', [
    ('0' * 64, None, 'X-Result-Sha256'),
    (None, '1' * 64, 'the results listing')])
def test_result_digest_mismatch(header, listed, source):
    c = client(Response(content=b'data', headers={
        'X-Result-Sha256': header} if header else {}))
    with pytest.raises(runs.RunsError, match=source):
        c.result('r1', '/results/a.csv', sha256=listed)


def test_result_too_large_names_the_file():
    c = client(Response(413, body={'error': {
        'code': 413, 'title': 'Request Entity Too Large',
        'message': 'result /results/big.bin is 40 MiB, more than 16'}}))
    with pytest.raises(runs.RunsError, match='/results/big.bin'):
        c.result('r1', '/results/big.bin')


@pytest.mark.parametrize('path', ['/', '/results/../etc/passwd', '..'])
def test_result_refuses_odd_paths(path):
    c = client()
    with pytest.raises(runs.RunsError, match='without'):
        c.result('r1', path)
    c._api.get.assert_not_called()
