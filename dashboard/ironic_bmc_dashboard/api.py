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

"""The container runs API, called with the logged-in user's token.

The endpoint is the catalog's ``baremetal-container`` (Horizon's
``OPENSTACK_ENDPOINT_TYPE``, in the user's region); the calls go through
``ironic_bmc_client.runs.RunsClient`` on a keystoneauth1 session whose
auth plugin is the user's token, so the API sees the tenant exactly as
the CLI would.  A run of another project answers 404 as a missing one
(:class:`ironic_bmc_client.runs.NotFound`); a token the API refuses
(401) is Horizon's NotAuthorized, as a 401 of Nova's is.
"""

import functools
import hashlib
import logging
from urllib import parse

from django.conf import settings
from horizon import exceptions as horizon_exceptions
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from openstack_dashboard.api import base

from ironic_bmc_client import runs

LOG = logging.getLogger(__name__)

SERVICE_TYPE = runs.SERVICE_TYPE
#: Seconds to wait for the API (connect, and each read of a download).
TIMEOUT = 60
#: Bytes per read of a result file streamed through.
CHUNK = 64 * 1024


class Run(base.APIDictWrapper):
    """A run, as a row of ``GET /v1/runs`` or a whole report; its id is
    its deploy id."""

    @property
    def id(self):
        return self._apidict.get('deploy_id')


def _session(request):
    """(keystoneauth1 session with the user's token, endpoint)."""
    endpoint = base.url_for(request, SERVICE_TYPE)
    cacert = getattr(settings, 'OPENSTACK_SSL_CACERT', None)
    insecure = getattr(settings, 'OPENSTACK_SSL_NO_VERIFY', False)
    session = ks_session.Session(
        auth=token_endpoint.Token(endpoint, request.user.token.id),
        verify=cacert or not insecure, timeout=TIMEOUT,
        app_name='ironic-bmc-dashboard')
    return session, endpoint


def client(request):
    """The :class:`RunsClient` of this request's user."""
    session, endpoint = _session(request)
    return runs.RunsClient(session, endpoint_override=endpoint)


def _unauthorized_logs_out(func):
    """A 401 of the runs API is Horizon's NotAuthorized, as Nova's or
    Glance's 401 is."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except runs.RunsError as exc:
            if exc.status_code == 401:
                raise horizon_exceptions.NotAuthorized(str(exc)) from exc
            raise
    return wrapper


@_unauthorized_logs_out
def run_list(request, instance_uuid=None, node=None, limit=None):
    """The project's runs, newest first (:class:`Run` rows)."""
    return [Run(row) for row in client(request).list(
        node=node, instance_uuid=instance_uuid, limit=limit)]


@_unauthorized_logs_out
def run_get(request, deploy_id):
    """The run report (a dict, as the API returns it)."""
    return client(request).get(deploy_id)


@_unauthorized_logs_out
def run_output(request, deploy_id):
    """``RunOutput(text, state, full)``: the tail while the run goes on,
    all of the kept output once it has ended."""
    return client(request).output(deploy_id)


@_unauthorized_logs_out
def run_results(request, deploy_id):
    """``{"results": [{"path", "size", "sha256"}], "refused": [...]}``."""
    return client(request).results(deploy_id)


class ResultStream:
    """One result file, read from the API as it is sent on.

    Iterating gives the file's chunks; the digest is checked against the
    server's ``X-Result-Sha256`` once the last chunk is read, and a
    mismatch raises :class:`ironic_bmc_client.runs.RunsError` (the
    download breaks off instead of completing with other bytes).
    """

    def __init__(self, response, deploy_id, path):
        self._response = response
        self.deploy_id = deploy_id
        self.path = path
        self.sha256 = response.headers.get('X-Result-Sha256')
        length = response.headers.get('Content-Length')
        self.size = int(length) if length and length.isdigit() else None

    def __iter__(self):
        digest = hashlib.sha256()
        try:
            for chunk in self._response.iter_content(CHUNK):
                digest.update(chunk)
                yield chunk
        finally:
            self._response.close()
        if self.sha256 and digest.hexdigest() != self.sha256.lower():
            LOG.error('Result %s of run %s: sha256 %s, the API said %s; '
                      'the download was broken off', self.path,
                      self.deploy_id, digest.hexdigest(), self.sha256)
            raise runs.RunsError('result %s of run %s does not match its '
                                 'sha256' % (self.path, self.deploy_id))

    def close(self):
        self._response.close()


@_unauthorized_logs_out
def run_result(request, deploy_id, path):
    """The result file ``path`` (absolute in the container) of a run, as
    a :class:`ResultStream`."""
    relative = path.lstrip('/')
    if not relative or '..' in relative.split('/'):
        raise runs.NotFound('no result %r in run %s' % (path, deploy_id),
                            status_code=404)
    session, endpoint = _session(request)
    url = '/v1/runs/%s/results/%s' % (parse.quote(deploy_id, safe=''),
                                      parse.quote(relative, safe='/'))
    response = session.get(url, endpoint_override=endpoint, stream=True,
                           raise_exc=False,
                           headers={'Accept': 'application/octet-stream'})
    if response.status_code >= 400:
        try:
            raise _error(response)
        finally:
            response.close()
    return ResultStream(response, deploy_id, path)


def _error(response):
    """The runs client's exception for an error answer of the API (its
    ``error.message`` when it sent one)."""
    message = None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get('error'), dict):
        message = body['error'].get('message')
    message = message or '%s %s' % (response.status_code, response.reason)
    cls = runs.NotFound if response.status_code == 404 else runs.RunsError
    return cls(message, status_code=response.status_code)
