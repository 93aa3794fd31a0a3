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

"""The container runs API: a tenant reads its runs with its own token.

Read-only, served beside the conductor that keeps the reports
(``[container]report_dir``)::

    GET /                                     versions (no token)
    GET /v1/runs[?node=&instance_uuid=&limit=]
    GET /v1/runs/{deploy_id}                  the report
    GET /v1/runs/{deploy_id}/output           text/plain
    GET /v1/runs/{deploy_id}/results          the result files
    GET /v1/runs/{deploy_id}/results/{path}   one, application/octet-stream

Why a service of its own rather than Ironic's vendor passthru: Ironic's
default policy gives ``baremetal:node:vendor_passthru`` to system admins
only, and one rule covers every vendor method of every driver (the
ipmitool vendor's ``send_raw`` too), so opening it to lessees is not a
change an operator should make.  This service checks Keystone tokens
(keystonemiddleware) and its own rules (:mod:`.policy`), and owns the
run record: a run is the launching project's even after the node has
gone to another tenant.  A run a caller may not read answers 404, as a
run that does not exist.
"""

import os

from ironic.common import exception
from keystonemiddleware import auth_token
from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_log import log
from oslo_middleware import request_id
from oslo_utils import uuidutils
import webob
import webob.exc
from webob import static

from bmc_common import protocol
from ironic_bmc.api import policy
from ironic_bmc.api import views
from ironic_bmc import run_files
from ironic_bmc import run_store

LOG = log.getLogger(__name__)
CONF = cfg.CONF

VERSION = 'v1'
#: Paths answered without a token.
PUBLIC = ('/', '/v1', '/v1/')
#: Service type in the Keystone catalog.
SERVICE_TYPE = 'baremetal-container'


class ApiError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def _not_found(deploy_id):
    return ApiError(404, 'Run %s not found.' % deploy_id)


def _data_refused(deploy_id):
    """The caller reads the run's report but not its output and result
    files (the node's owner, of a run of its lessee's)."""
    return ApiError(403, 'The output and result files of run %s are the '
                         'project\'s the run is for; this token reads its '
                         'report only.' % deploy_id)


def _json(data, status=200):
    return webob.Response(json=data, status=status, charset='utf-8')


def _error(status, message):
    title = webob.exc.status_map[status].title
    return _json({'error': {'code': status, 'title': title,
                            'message': message}}, status)


def _context(request):
    if CONF.container_api.auth_strategy == 'noauth':
        return oslo_context.RequestContext(
            roles=['admin', 'member', 'reader'], system_scope='all')
    return oslo_context.RequestContext.from_environ(request.environ)


def _limit(request):
    value = request.GET.get('limit')
    if value is None:
        return CONF.container_api.max_list
    try:
        limit = int(value)
    except ValueError:
        raise ApiError(400, 'limit must be a positive integer, got %r'
                       % value[:40]) from None
    if limit < 1:
        raise ApiError(400, 'limit must be a positive integer, got %d'
                       % limit)
    return min(limit, CONF.container_api.max_list)


def _uuid_param(request, name):
    value = request.GET.get(name)
    if value is not None and not uuidutils.is_uuid_like(value):
        raise ApiError(400, '%s must be a UUID, got %r' % (name, value[:40]))
    return value


def _node_param(request):
    """A node's UUID or name (Ironic's names: letters, digits and
    ``-._~``, at most 255)."""
    value = request.GET.get('node')
    if value is not None and not (
            0 < len(value) <= 255
            and all(c.isalnum() or c in '-._~' for c in value)):
        raise ApiError(400, 'node must be a node UUID or name, got %r'
                       % value[:40])
    return value


class RunsAPI:
    """The WSGI application (without authentication middleware)."""

    def __call__(self, environ, start_response):
        request = webob.Request(environ)
        try:
            response = self._dispatch(request)
        except ApiError as exc:
            response = _error(exc.status, exc.message)
        except Exception:
            LOG.exception('Container runs API request %s %s failed',
                          request.method, request.path)
            response = _error(500, 'The server failed to answer; its log '
                                   'has the details.')
        return response(environ, start_response)

    def _dispatch(self, request):
        if request.method not in ('GET', 'HEAD'):
            raise ApiError(405, 'The container runs API is read-only: %s '
                           'is not allowed.' % request.method)
        parts = [p for p in request.path_info.split('/') if p]
        if not parts:
            return _json({'versions': [self._version(request)]})
        if parts[0] != VERSION:
            raise ApiError(404, 'No such resource: %s' % request.path_info)
        if len(parts) == 1:
            return _json({'version': self._version(request)})
        context = _context(request)
        if parts[1] != 'runs':
            raise ApiError(404, 'No such resource: %s' % request.path_info)
        if len(parts) == 2:
            return self.list(request, context)
        run = self._run(context, parts[2])
        if len(parts) == 3:
            return self.show(context, run)
        if parts[3] == 'output' and len(parts) == 4:
            return self.output(context, run)
        if parts[3] == 'results':
            if len(parts) == 4:
                return self.results(context, run)
            return self.result(context, run, '/' + '/'.join(parts[4:]))
        raise ApiError(404, 'No such resource: %s' % request.path_info)

    def _version(self, request):
        return {'id': VERSION, 'status': 'CURRENT',
                'links': [{'rel': 'self',
                           'href': request.host_url + '/' + VERSION + '/'}]}

    def _run(self, context, deploy_id):
        """The run ``deploy_id`` if the caller may read it; 404 if not,
        whether it exists or not."""
        run = run_store.find(deploy_id)
        if run is None or not policy.allowed(policy.RUN_GET, context, run):
            raise _not_found(deploy_id)
        return run

    def list(self, request, context):
        if not policy.allowed(policy.RUN_LIST, context):
            raise ApiError(403, 'Listing runs is not allowed to this '
                                'token.')
        node = _node_param(request)
        instance = _uuid_param(request, 'instance_uuid')
        limit = _limit(request)
        if policy.allowed(policy.RUN_LIST_ALL, context):
            found = run_store.runs(node=node, instance_uuid=instance,
                                   limit=limit)
        elif not context.project_id:
            # (Not reached with the default rules: a token with neither
            # system nor project scope matches none.)
            raise ApiError(403, 'Listing runs needs a project- or '
                                'system-scoped token; this one has '
                                'neither.')
        else:
            found = run_store.runs(project_id=context.project_id, node=node,
                                   instance_uuid=instance, limit=limit)
            found = [r for r in found
                     if policy.allowed(policy.RUN_GET, context, r)]
        return _json({'runs': [views.summary(r) for r in found]})

    def show(self, context, run):
        shown = views.report(run, operator=policy.allowed(
            policy.OPERATOR_FIELDS, context))
        series = run_store.power_series(run['node'], run['deploy_id'])
        if series is not None:
            shown['power_series'] = series
        return _json(shown)

    def output(self, context, run):
        if not policy.allowed(policy.RUN_OUTPUT, context, run):
            raise _data_refused(run['deploy_id'])
        path = run_files.output_file(run['node'], run['deploy_id'])
        headers = {'X-Run-State': str(run.get('state'))}
        if run.get('state') in protocol.RUN_FINAL_STATES and os.path.exists(
                path):
            headers['X-Run-Output'] = 'full'
            return self._file(path, 'text/plain', headers)
        # Until the run ends (and the node's output is collected), the
        # tail the agent reports with each status.
        headers['X-Run-Output'] = 'tail'
        response = webob.Response(
            body=(run.get('output_tail') or '').encode('utf-8'),
            content_type='text/plain', charset='utf-8')
        response.headers.update(headers)
        return response

    def results(self, context, run):
        if not policy.allowed(policy.RUN_RESULTS, context, run):
            raise _data_refused(run['deploy_id'])
        files, refused = views.result_files(run)
        return _json({'deploy_id': run['deploy_id'], 'results': files,
                      'refused': refused})

    def result(self, context, run, path):
        if not policy.allowed(policy.RUN_RESULTS, context, run):
            raise _data_refused(run['deploy_id'])
        files, refused = views.result_files(run)
        entry = next((f for f in files if f['path'] == path), None)
        if entry is None:
            why = next((r['error'] for r in refused if r['path'] == path),
                       None)
            if why:
                raise ApiError(404, 'Result %s of run %s was not kept: %s'
                               % (path, run['deploy_id'], why))
            raise ApiError(404, 'Run %s has no result %s (GET .../results '
                           'lists them).' % (run['deploy_id'], path))
        try:
            filename = run_files.result_file(run['node'], run['deploy_id'],
                                             path)
        except exception.InvalidParameterValue as exc:
            raise ApiError(400, str(exc)) from None
        return self._file(filename, 'application/octet-stream',
                          {'X-Result-Sha256': entry['sha256']})

    def _file(self, filename, content_type, headers):
        try:
            f = open(filename, 'rb')
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ApiError(404, 'The file is not on this server: the run '
                           'ran on another conductor, or its files were '
                           'pruned ([container]report_retention_days).'
                           ) from None
        response = webob.Response(
            app_iter=static.FileIter(f),
            content_length=os.fstat(f.fileno()).st_size)
        response.headers['Content-Type'] = (
            content_type + ('; charset=utf-8'
                            if content_type.startswith('text/') else ''))
        response.headers.update(headers)
        return response


def setup_app():
    """The WSGI application with its middleware: request ids, and
    Keystone tokens unless ``[container_api]auth_strategy=noauth``."""
    app = RunsAPI()
    if CONF.container_api.auth_strategy == 'keystone':
        app = _PublicPaths(auth_token.AuthProtocol(
            app, {'oslo_config_config': CONF}), app)
    return request_id.RequestId(app)


class _PublicPaths:
    """Send the version documents around the token check."""

    def __init__(self, protected, public):
        self.protected = protected
        self.public = public

    def __call__(self, environ, start_response):
        if environ.get('PATH_INFO', '/') in PUBLIC:
            return self.public(environ, start_response)
        return self.protected(environ, start_response)
