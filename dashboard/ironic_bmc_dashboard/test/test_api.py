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

"""ironic_bmc_dashboard.api: the user's token, the catalog's endpoint,
result files streamed and checked."""

import hashlib
from unittest import mock

from horizon import exceptions as horizon_exceptions
from keystoneauth1 import token_endpoint

from ironic_bmc_client import runs
from ironic_bmc_dashboard import api
from ironic_bmc_dashboard.test import base
from ironic_bmc_dashboard.test import data


class FakeResponse:

    def __init__(self, status, body=b'', headers=None, json=None):
        self.status_code = status
        self.reason = 'Reason'
        self.headers = headers or {}
        self.body = body
        self._json = json
        self.closed = False

    def json(self):
        if self._json is None:
            raise ValueError('not JSON')
        return self._json

    def iter_content(self, size):
        yield self.body

    def close(self):
        self.closed = True


class ApiTests(base.TestCase):

    def test_the_session_has_the_users_token_and_the_endpoint(self):
        session, endpoint = api._session(self.request)
        self.assertEqual(base.ENDPOINT, endpoint)
        self.assertIsInstance(session.auth, token_endpoint.Token)
        self.assertEqual(self.token.id, session.auth.get_token(session))
        self.assertEqual(base.ENDPOINT, session.auth.get_endpoint(session))

    def test_list_calls_the_api(self):
        with mock.patch.object(runs.RunsClient, 'list',
                               return_value=[{'deploy_id': 'd'}]) as call:
            found = api.run_list(self.request, instance_uuid='i', limit=1)
        call.assert_called_once_with(node=None, instance_uuid='i', limit=1)
        self.assertEqual(['d'], [run.id for run in found])

    def test_no_catalog_entry(self):
        self.without_runs_api()
        request = self.factory.get('/')
        with self.assertRaises(horizon_exceptions.ServiceCatalogException):
            api.client(request)

    def _result(self, response, path='/results/a b.csv'):
        session = mock.Mock()
        session.get.return_value = response
        with mock.patch.object(api, '_session',
                               return_value=(session, base.ENDPOINT)):
            stream = api.run_result(self.request, data.DEPLOY_ID, path)
        return session, stream

    def test_result_streamed_and_checked(self):
        body = b'x' * 100
        response = FakeResponse(200, body, {
            'Content-Length': '100',
            'X-Result-Sha256': hashlib.sha256(body).hexdigest()})
        session, stream = self._result(response)
        session.get.assert_called_once_with(
            '/v1/runs/%s/results/results/a%%20b.csv' % data.DEPLOY_ID,
            endpoint_override=base.ENDPOINT, stream=True, raise_exc=False,
            headers={'Accept': 'application/octet-stream'})
        self.assertEqual(100, stream.size)
        self.assertEqual(body, b''.join(stream))
        self.assertTrue(response.closed)

    def test_result_with_other_bytes(self):
        response = FakeResponse(200, b'abc', {
            'X-Result-Sha256': hashlib.sha256(b'xyz').hexdigest()})
        _session, stream = self._result(response)
        self.assertIsNone(stream.size)
        with self.assertRaises(runs.RunsError):
            b''.join(stream)

    def test_result_not_found_says_the_servers_message(self):
        response = FakeResponse(404, json={'error': {
            'code': 404, 'message': 'Result /x of run d was not kept: '
                                    'too big'}})
        with self.assertRaises(runs.NotFound) as ctx:
            self._result(response)
        self.assertIn('was not kept: too big', str(ctx.exception))
        self.assertTrue(response.closed)

    def test_result_refused_token(self):
        with self.assertRaises(horizon_exceptions.NotAuthorized):
            self._result(FakeResponse(401))

    def test_result_path_without_dot_dot(self):
        session = mock.Mock()
        with mock.patch.object(api, '_session',
                               return_value=(session, base.ENDPOINT)):
            for path in ('/', '/results/../../etc/shadow'):
                with self.assertRaises(runs.NotFound):
                    api.run_result(self.request, data.DEPLOY_ID, path)
        session.get.assert_not_called()
