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

"""The container runs API, as keystonemiddleware hands it requests."""

import base64
import gzip
import hashlib
import os
import types

from ironic.tests import base
from keystonemiddleware import auth_token
from oslo_utils import uuidutils
import webob

from bmc_common import reference

from ironic_bmc.api import app
from ironic_bmc.api import policy
from ironic_bmc.api import views
from ironic_bmc.conf import CONF
from ironic_bmc import report as run_report
from ironic_bmc import run_files
from ironic_bmc import run_store

PROJECT_A = 'a' * 32
PROJECT_B = 'b' * 32
OWNER = 'c' * 32
NODE_1 = '1a1a1a1a-0000-4000-8000-000000000001'
NODE_2 = '1a1a1a1a-0000-4000-8000-000000000002'


def _packed(data):
    return base64.b64encode(gzip.compress(data, mtime=0)).decode()


class RunsAPIBase(base.TestCase):
    """Three runs on disk; requests with a token's headers."""

    def _clear_attrs(self):
        # Ironic's base deletes the test's attributes at cleanup, which
        # pytest's unittest runner then trips over.
        pass

    def setUp(self):
        super().setUp()
        self.config_temp_dir('report_dir', group='container')
        self.config(auth_strategy='keystone', group='container_api')
        # One enforcer per test: rules are read once.
        policy._ENFORCER = None
        self.addCleanup(setattr, policy, '_ENFORCER', None)
        self.app = app.RunsAPI()
        self.run_a = self._run(NODE_1, PROJECT_A, state='finished',
                               output=b'line 1\nline 2\n',
                               results={'/out/result.txt': b'42\n'})
        self.run_b = self._run(NODE_2, PROJECT_B, state='running')
        self.run_owner = self._run(NODE_2, None, owner=OWNER,
                                   state='finished')

    def _run(self, node, project, owner=None, state='finished', output=None,
             results=None, created=1000.0):
        deploy_id = uuidutils.generate_uuid()
        report = {
            'version': 1, 'deploy_id': deploy_id, 'node': node,
            'node_name': 'n', 'project_id': project, 'node_owner': owner,
            'instance_uuid': uuidutils.generate_uuid(), 'state': state,
            'image': '127.0.0.1:5000/demo:1', 'mode': 'job',
            'workload_exit_code': 0 if state == 'finished' else None,
            'output_tail': 'tail so far\n', 'created': created,
            'kernel': 'file:///var/lib/ironic/secret-kernel',
            'artifact': {'url': 'http://conductor/artifacts/x'},
            'takeovers': [{'conductor': 'cond-1', 'time': 1}],
            'stages': [{'name': 'workload-started', 'start': created + 30,
                        'end': created + 40.5}],
            'energy': {'available': True, 'bmc_joules_workload': 12.5,
                       'first_error': 'ipmitool 10.1.2.3: timeout'},
            'boot': {'firmware_s': 3, 'http': [{'url': 'http://x/k'}]},
        }
        if output is not None or results:
            collected = {'output': {'data': _packed(output or b''),
                                    'bytes': len(output or b'')},
                         'results': {p: {'data': _packed(c)}
                                     for p, c in (results or {}).items()}}
            report['output'], report['results'] = run_files.save(
                types.SimpleNamespace(uuid=node), deploy_id, collected,
                list(results or ()))
        run_report._write(report)
        run_store.save_power_series(node, deploy_id, {
            't0': created, 'points': [[0, 100.0], [2, 120.0]],
            'workload': [1, 2], 'period_s': 2.0})
        return report

    def _get(self, path, project=PROJECT_A, roles='reader,member',
             system=False, method='GET', domain=None):
        """A request with the headers keystonemiddleware sets for a token
        of ``project`` (or the system, or ``domain``) with ``roles``."""
        request = webob.Request.blank(path, method=method)
        request.environ.update({'HTTP_X_IDENTITY_STATUS': 'Confirmed',
                                'HTTP_X_ROLES': roles,
                                'HTTP_X_USER_ID': 'u' * 32})
        if system:
            request.environ['HTTP_OPENSTACK_SYSTEM_SCOPE'] = 'all'
        elif project:
            request.environ['HTTP_X_PROJECT_ID'] = project
        if domain:
            request.environ['HTTP_X_DOMAIN_ID'] = domain
        return request.get_response(self.app)


class RunsAPITestCase(RunsAPIBase):

    # --- reading one's own run ------------------------------------------

    def test_tenant_reads_its_run_without_operator_fields(self):
        response = self._get('/v1/runs/%s' % self.run_a['deploy_id'])
        self.assertEqual(200, response.status_int)
        shown = response.json
        self.assertEqual('finished', shown['state'])
        self.assertEqual(40.5, shown['t_ready_s'])
        for hidden in ('kernel', 'artifact', 'takeovers'):
            self.assertNotIn(hidden, shown)
        self.assertNotIn('first_error', shown['energy'])
        self.assertEqual(12.5, shown['energy']['bmc_joules_workload'])
        self.assertNotIn('http', shown['boot'])
        self.assertEqual([[0, 100.0], [2, 120.0]],
                         shown['power_series']['points'])

    def test_system_reader_sees_operator_fields(self):
        response = self._get('/v1/runs/%s' % self.run_a['deploy_id'],
                             system=True)
        self.assertEqual(200, response.status_int)
        self.assertEqual('file:///var/lib/ironic/secret-kernel',
                         response.json['kernel'])
        self.assertIn('first_error', response.json['energy'])

    def test_node_owner_reads_operator_run(self):
        response = self._get('/v1/runs/%s' % self.run_owner['deploy_id'],
                             project=OWNER)
        self.assertEqual(200, response.status_int)
        self.assertNotIn('kernel', response.json)

    # --- another project's run is not there -----------------------------

    def test_other_project_gets_404_like_a_missing_run(self):
        deploy_id = self.run_a['deploy_id']
        missing = uuidutils.generate_uuid()
        for suffix in ('', '/output', '/results', '/results/out/result.txt'):
            theirs = self._get('/v1/runs/%s%s' % (deploy_id, suffix),
                               project=PROJECT_B)
            nothing = self._get('/v1/runs/%s%s' % (missing, suffix),
                                project=PROJECT_B)
            self.assertEqual(404, theirs.status_int, suffix)
            self.assertEqual(404, nothing.status_int, suffix)
            self.assertEqual(
                theirs.json['error']['message'].replace(deploy_id, 'X'),
                nothing.json['error']['message'].replace(missing, 'X'))

    def test_member_without_reader_role_is_refused(self):
        response = self._get('/v1/runs/%s' % self.run_a['deploy_id'],
                             roles='member')
        self.assertEqual(404, response.status_int)

    def test_operator_run_is_nobodys_project(self):
        response = self._get('/v1/runs/%s' % self.run_owner['deploy_id'],
                             project=PROJECT_A)
        self.assertEqual(404, response.status_int)

    # --- lists ----------------------------------------------------------

    def test_list_shows_the_callers_runs_only(self):
        response = self._get('/v1/runs')
        self.assertEqual(200, response.status_int)
        self.assertEqual([self.run_a['deploy_id']],
                         [r['deploy_id'] for r in response.json['runs']])
        summary = response.json['runs'][0]
        self.assertEqual(12.5, summary['bmc_joules_workload'])
        self.assertEqual(40.5, summary['t_ready_s'])
        response = self._get('/v1/runs', project=PROJECT_B)
        self.assertEqual([self.run_b['deploy_id']],
                         [r['deploy_id'] for r in response.json['runs']])

    def test_list_by_node_name(self):
        response = self._get('/v1/runs?node=n')
        self.assertEqual([self.run_a['deploy_id']],
                         [r['deploy_id'] for r in response.json['runs']])
        response = self._get('/v1/runs?node=other-name')
        self.assertEqual([], response.json['runs'])
        response = self._get('/v1/runs?node=n', system=True)
        self.assertEqual(3, len(response.json['runs']))

    def test_list_by_instance(self):
        response = self._get('/v1/runs?instance_uuid=%s'
                             % self.run_a['instance_uuid'])
        self.assertEqual(1, len(response.json['runs']))
        response = self._get('/v1/runs?instance_uuid=%s'
                             % self.run_b['instance_uuid'])
        self.assertEqual([], response.json['runs'])

    def test_system_reader_lists_everything_newest_first(self):
        os.utime(os.path.join(CONF.container.report_dir, NODE_1,
                              self.run_a['deploy_id'] + '.json'),
                 (1, 1))
        response = self._get('/v1/runs', system=True)
        ids = [r['deploy_id'] for r in response.json['runs']]
        self.assertEqual(3, len(ids))
        self.assertEqual(self.run_a['deploy_id'], ids[-1])
        response = self._get('/v1/runs?node=%s&limit=1' % NODE_2,
                             system=True)
        self.assertEqual(1, len(response.json['runs']))

    def test_bad_list_parameters_are_named(self):
        response = self._get('/v1/runs?limit=zero')
        self.assertEqual(400, response.status_int)
        self.assertIn('limit', response.json['error']['message'])
        response = self._get('/v1/runs?node=../etc')
        self.assertEqual(400, response.status_int)
        self.assertIn('node must be a node UUID or name',
                      response.json['error']['message'])
        response = self._get('/v1/runs?instance_uuid=x')
        self.assertEqual(400, response.status_int)
        self.assertIn('instance_uuid must be a UUID',
                      response.json['error']['message'])

    # --- output and results ---------------------------------------------

    def test_full_output_once_the_run_ended(self):
        response = self._get('/v1/runs/%s/output' % self.run_a['deploy_id'])
        self.assertEqual(200, response.status_int)
        self.assertEqual(b'line 1\nline 2\n', response.body)
        self.assertEqual('full', response.headers['X-Run-Output'])
        self.assertTrue(response.content_type.startswith('text/plain'))

    def test_tail_while_the_run_goes_on(self):
        response = self._get('/v1/runs/%s/output' % self.run_b['deploy_id'],
                             project=PROJECT_B)
        self.assertEqual(b'tail so far\n', response.body)
        self.assertEqual('tail', response.headers['X-Run-Output'])
        self.assertEqual('running', response.headers['X-Run-State'])

    def test_results_listed_and_downloaded(self):
        base_path = '/v1/runs/%s/results' % self.run_a['deploy_id']
        listing = self._get(base_path).json
        digest = hashlib.sha256(b'42\n').hexdigest()
        self.assertEqual([{'path': '/out/result.txt', 'size': 3,
                           'sha256': digest}], listing['results'])
        response = self._get(base_path + '/out/result.txt')
        self.assertEqual(200, response.status_int)
        self.assertEqual(b'42\n', response.body)
        self.assertEqual(digest, response.headers['X-Result-Sha256'])
        self.assertEqual('application/octet-stream', response.content_type)

    def test_unknown_and_refused_results_are_named(self):
        run = self._run(NODE_1, PROJECT_A)
        run['results'] = {'/big.bin': {'error': 'larger than '
                                                '[container]results_max_mb'}}
        run_report._write(run)
        base_path = '/v1/runs/%s/results' % run['deploy_id']
        response = self._get(base_path + '/big.bin')
        self.assertEqual(404, response.status_int)
        self.assertIn('/big.bin', response.json['error']['message'])
        self.assertIn('results_max_mb', response.json['error']['message'])
        self.assertEqual([{'path': '/big.bin', 'error': run['results'][
            '/big.bin']['error']}], self._get(base_path).json['refused'])
        response = self._get(base_path + '/nope')
        self.assertEqual(404, response.status_int)
        self.assertIn('has no result /nope',
                      response.json['error']['message'])

    def test_files_of_another_conductor_are_explained(self):
        os.remove(run_files.output_file(NODE_1, self.run_a['deploy_id']))
        response = self._get('/v1/runs/%s/output' % self.run_a['deploy_id'])
        # The report says it ended, the file is gone: the tail, still.
        self.assertEqual('tail', response.headers['X-Run-Output'])
        os.remove(run_files.result_file(NODE_1, self.run_a['deploy_id'],
                                        '/out/result.txt'))
        response = self._get('/v1/runs/%s/results/out/result.txt'
                             % self.run_a['deploy_id'])
        self.assertEqual(404, response.status_int)
        self.assertIn('another conductor', response.json['error']['message'])

    # --- the rest -------------------------------------------------------

    def test_read_only(self):
        response = self._get('/v1/runs/%s' % self.run_a['deploy_id'],
                             method='DELETE')
        self.assertEqual(405, response.status_int)
        self.assertIn('read-only', response.json['error']['message'])

    def test_versions(self):
        response = self._get('/', project=None)
        self.assertEqual('v1', response.json['versions'][0]['id'])
        self.assertEqual(404, self._get('/v2/runs').status_int)

    def test_noauth_is_the_operator(self):
        self.config(auth_strategy='noauth', group='container_api')
        response = self._get('/v1/runs/%s' % self.run_a['deploy_id'],
                             project=None, roles='')
        self.assertEqual(200, response.status_int)
        self.assertIn('kernel', response.json)

    def test_token_required_but_not_for_versions(self):
        auth_token.AuthProtocol(None, {'oslo_config_config': CONF})
        self.config(www_authenticate_uri='http://127.0.0.1:5000/v3',
                    group='keystone_authtoken')
        application = app.setup_app()
        response = webob.Request.blank('/').get_response(application)
        self.assertEqual(200, response.status_int)
        self.assertIn('X-Openstack-Request-Id', response.headers)
        response = webob.Request.blank('/v1/runs').get_response(application)
        self.assertEqual(401, response.status_int)


class ViewsTestCase(base.TestCase):

    def _clear_attrs(self):
        pass

    def test_every_report_field_is_shown_to_tenants_or_not_on_purpose(self):
        documented = {f.name for f in reference.REPORT_FIELDS}
        undecided = documented - views.TENANT_FIELDS - views.OPERATOR_FIELDS
        self.assertEqual(set(), undecided)
        self.assertEqual(set(), views.TENANT_FIELDS & views.OPERATOR_FIELDS)
