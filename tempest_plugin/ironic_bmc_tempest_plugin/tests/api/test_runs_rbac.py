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

"""The container runs API's default policy, persona by persona (Secure
RBAC), in the manner of ironic-tempest-plugin's RBAC tests: each persona
is a dynamic credential with one role in one scope; no node is deployed.

What each persona may read of a *real* run is the scenario test's and the
lab's business (a run needs a deploy); here: who may list, that a
project's list holds only its own runs, that a token without a project
lists nothing, and that a run one may not read is a 404 like a run that
does not exist.
"""

import json

from oslo_utils import uuidutils
from tempest import config
from tempest.lib.common import rest_client
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc
from tempest import test
import urllib3

CONF = config.CONF

SERVICE_TYPE = 'baremetal-container'


class RunsClient(rest_client.RestClient):
    """The container runs API (``ironic-bmc-api``)."""

    def list_runs(self):
        resp, body = self.get('v1/runs')
        self.expected_success(200, resp.status)
        return json.loads(body)['runs']

    def show_run(self, deploy_id):
        resp, body = self.get('v1/runs/%s' % deploy_id)
        self.expected_success(200, resp.status)
        return json.loads(body)


class TestRunsAPIRBAC(test.BaseTestCase):
    """Personas of the runs API's default rules."""

    credentials = ['system_admin', 'system_reader', 'project_admin',
                   'project_member', 'project_reader', 'domain_reader']

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.baremetal_container.enabled:
            raise cls.skipException('[baremetal_container]enabled is False')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.runs = {
            persona: RunsClient(
                getattr(cls, 'os_' + persona).auth_provider, SERVICE_TYPE,
                CONF.identity.region, endpoint_type='publicURL')
            for persona in cls.credentials}

    @decorators.idempotent_id('5b0f6c1e-2a9d-4c47-8e31-7d4f2b9a6c10')
    def test_system_personas_list_every_run(self):
        for persona in ('system_admin', 'system_reader'):
            self.assertIsInstance(self.runs[persona].list_runs(), list)

    @decorators.idempotent_id('a7c3e9d2-4b18-4f65-9c0a-3e8d1b5f7a22')
    def test_project_personas_list_their_own_runs_only(self):
        for persona in ('project_admin', 'project_member', 'project_reader'):
            project = getattr(self, 'os_' + persona).credentials.project_id
            for run in self.runs[persona].list_runs():
                self.assertIn(project, (run.get('project_id'),
                                        run.get('node_owner')), persona)

    @decorators.idempotent_id('c2e8a4f1-6d3b-4a90-b7e5-1f9c3d6a8b33')
    def test_domain_scoped_reader_lists_nothing(self):
        # No project: no project rule may match, and the rules are scoped
        # to system and project.
        self.assertRaises(lib_exc.Forbidden,
                          self.runs['domain_reader'].list_runs)

    @decorators.idempotent_id('e9d1b7c4-8f2a-4e36-a5c0-6b3d9f1e2c44')
    def test_a_missing_run_is_not_found_for_every_persona(self):
        deploy_id = uuidutils.generate_uuid()
        for persona, client in self.runs.items():
            with self.subTest(persona=persona):
                self.assertRaises(lib_exc.NotFound, client.show_run,
                                  deploy_id)

    @decorators.idempotent_id('1f4a6c8e-3b5d-4f72-9e01-8c2a4d6f0b55')
    def test_no_token_is_unauthorized(self):
        url = self.runs['system_reader'].base_url.rstrip('/') + '/v1/runs'
        response = urllib3.PoolManager().request('GET', url, timeout=30)
        self.assertEqual(401, response.status)
