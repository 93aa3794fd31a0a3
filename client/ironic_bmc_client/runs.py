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

"""A client of the runs API (service type ``baremetal-container``).

The API is read-only and scoped to the caller's project: another
project's run answers 404 as one that does not exist.  Every call goes
through a keystoneauth1 session, so the CLI, Horizon and scripts
authenticate as they do with any other OpenStack service::

    runs = RunsClient(session)
    report = runs.get(runs.list(node='node-0', limit=1)[0]['deploy_id'])
"""

import collections
import hashlib
from urllib import parse

from keystoneauth1 import adapter

SERVICE_TYPE = 'baremetal-container'
#: ``output()``: the text, the run's state (``X-Run-State``) and whether
#: the text is the whole kept output (``X-Run-Output: full``) or the tail
#: the report holds while the run goes on (``tail``).
RunOutput = collections.namedtuple('RunOutput', 'text state full')


class RunsError(Exception):
    """The API refused a call; the message is the server's."""

    def __init__(self, message, status_code=None):
        super().__init__(message)
        self.status_code = status_code


class NotFound(RunsError):
    """No such run (or none of the caller's project)."""


class RunsClient:
    """The runs API through a keystoneauth1 session."""

    def __init__(self, session, service_type=SERVICE_TYPE, interface=None,
                 region_name=None, endpoint_override=None):
        self._api = adapter.Adapter(
            session, service_type=service_type, interface=interface,
            region_name=region_name, endpoint_override=endpoint_override)

    def list(self, node=None, instance_uuid=None, limit=None):
        """The caller's runs, newest first (each a summary row)."""
        params = {key: value for key, value in (
            ('node', node), ('instance_uuid', instance_uuid),
            ('limit', limit)) if value is not None}
        return self._json('/v1/runs', params=params)['runs']

    def get(self, run_id):
        """The run report of ``run_id`` (a deploy id)."""
        return self._json(self._run_url(run_id))

    def output(self, run_id):
        """The run's output: the tail while it runs, all of the kept
        output once it has ended (:class:`RunOutput`)."""
        resp = self._get(self._run_url(run_id, 'output'),
                         accept='text/plain')
        resp.encoding = 'utf-8'
        return RunOutput(resp.text, resp.headers.get('X-Run-State'),
                         resp.headers.get('X-Run-Output') == 'full')

    def results(self, run_id):
        """``{"results": [{"path", "size", "sha256"}], "refused": [...]}``:
        the result files kept, and those kept back with why."""
        return self._json(self._run_url(run_id, 'results'))

    def result(self, run_id, path, sha256=None):
        """One result file's bytes, by its absolute path in the container.

        The bytes are checked against the server's ``X-Result-Sha256`` and
        against ``sha256`` when given (the listing's).

        :raises RunsError: the digests do not match.
        """
        relative = path.lstrip('/')
        if not relative or '..' in relative.split('/'):
            raise RunsError('result path must be an absolute path inside '
                            'the container without "..", got %r' % path)
        resp = self._get(self._run_url(run_id, 'results', relative),
                         accept='application/octet-stream')
        data = resp.content
        actual = hashlib.sha256(data).hexdigest()
        for source, expected in (('X-Result-Sha256',
                                  resp.headers.get('X-Result-Sha256')),
                                 ('the results listing', sha256)):
            if expected and expected.lower() != actual:
                raise RunsError(
                    'result %s of run %s: sha256 %s does not match %s '
                    '(%s); the file was not written'
                    % (path, run_id, actual, expected, source))
        return data

    def _run_url(self, run_id, *parts):
        segments = [parse.quote(str(run_id), safe='')]
        segments += [parse.quote(part, safe='/') for part in parts]
        return '/v1/runs/' + '/'.join(segments)

    def _json(self, url, params=None):
        return self._get(url, params=params).json()

    def _get(self, url, params=None, accept='application/json'):
        resp = self._api.get(url, params=params, raise_exc=False,
                             headers={'Accept': accept})
        if resp.status_code >= 400:
            raise _error(resp)
        return resp


def _error(resp):
    """The :class:`RunsError` of an error response, with the server's
    ``error.message`` when it sent one."""
    message = None
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get('error'), dict):
        message = body['error'].get('message') or body['error'].get('title')
    if not message:
        message = '%s %s' % (resp.status_code,
                             (resp.text or resp.reason or '').strip()[:200])
    cls = NotFound if resp.status_code == 404 else RunsError
    return cls(message, status_code=resp.status_code)
