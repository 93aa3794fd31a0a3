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

"""The runs API's persona matrix (Secure RBAC), cell by cell.

Each persona is a token as keystonemiddleware hands it to the API; each
cell is the status the documented table (doc/source/admin/
trust-model.rst) gives.  The runs: a lessee's on a node an owner lent
it, and the operator's own (no project at all: the run a project-less
token must never reach).
"""

from oslo_context import context as oslo_context
from oslo_policy import policy as oslo_policy

from ironic_bmc.api import policy
from ironic_bmc.tests.unit.api import test_runs_api as base

LESSEE = 'd' * 32
OWNER = base.OWNER
OTHER = base.PROJECT_B

#: persona -> (project, roles, system, domain)
PERSONAS = {
    'system admin': (None, 'admin,member,reader', True, None),
    'system reader': (None, 'reader', True, None),
    'service': (None, 'service', True, None),
    'owner admin': (OWNER, 'admin,member,reader', False, None),
    'owner member': (OWNER, 'member,reader', False, None),
    'lessee admin': (LESSEE, 'admin,manager,member,reader', False, None),
    'lessee manager': (LESSEE, 'manager,member,reader', False, None),
    'lessee member': (LESSEE, 'member,reader', False, None),
    'other project reader': (OTHER, 'reader', False, None),
    'domain-scoped reader': (None, 'admin,reader', False, 'e' * 32),
}

#: persona -> (list: which runs it lists, get lessee run, its output, its
#: results, get operator run, operator fields shown)
EXPECTED = {
    'system admin': ({'lessee', 'operator'}, 200, 200, 200, 200, True),
    'system reader': ({'lessee', 'operator'}, 200, 200, 200, 200, True),
    'service': ({'lessee', 'operator'}, 200, 200, 200, 200, True),
    'owner admin': ({'lessee'}, 200, 403, 403, 404, False),
    'owner member': ({'lessee'}, 200, 403, 403, 404, False),
    'lessee admin': ({'lessee'}, 200, 200, 200, 404, False),
    'lessee manager': ({'lessee'}, 200, 200, 200, 404, False),
    'lessee member': ({'lessee'}, 200, 200, 200, 404, False),
    'other project reader': (set(), 404, 404, 404, 404, False),
    'domain-scoped reader': (403, 404, 404, 404, 404, False),
}


class PersonaMatrixTestCase(base.RunsAPIBase):

    def setUp(self):
        super().setUp()
        self.lessee_run = self._run(base.NODE_1, LESSEE, owner=OWNER,
                                    output=b'secret\n',
                                    results={'/out/r.txt': b'1\n'})
        self.operator_run = self._run(base.NODE_2, None, owner=None)
        self.names = {self.lessee_run['deploy_id']: 'lessee',
                      self.operator_run['deploy_id']: 'operator'}

    def _as(self, persona, path):
        project, roles, system, domain = PERSONAS[persona]
        return self._get(path, project=project, roles=roles, system=system,
                         domain=domain)

    def test_every_cell(self):
        run = '/v1/runs/%s' % self.lessee_run['deploy_id']
        for persona, expected in EXPECTED.items():
            (listed, get, output, results, get_operator,
             operator_fields) = expected
            response = self._as(persona, '/v1/runs')
            if isinstance(listed, int):
                self.assertEqual(listed, response.status_int, persona)
            else:
                self.assertEqual(200, response.status_int, persona)
                seen = {self.names.get(r['deploy_id'], 'other')
                        for r in response.json['runs']}
                self.assertEqual(listed, seen - {'other'}, persona)
            response = self._as(persona, run)
            self.assertEqual(get, response.status_int, persona)
            if get == 200:
                self.assertEqual(operator_fields,
                                 'kernel' in response.json, persona)
            self.assertEqual(output, self._as(
                persona, run + '/output').status_int, persona)
            self.assertEqual(results, self._as(
                persona, run + '/results').status_int, persona)
            self.assertEqual(results, self._as(
                persona, run + '/results/out/r.txt').status_int, persona)
            self.assertEqual(get_operator, self._as(
                persona, '/v1/runs/%s' % self.operator_run['deploy_id']
            ).status_int, persona)

    def test_the_owner_is_told_why_not_the_data(self):
        response = self._as('owner member', '/v1/runs/%s/output'
                            % self.lessee_run['deploy_id'])
        self.assertIn('reads its report only',
                      response.json['error']['message'])

    def test_a_project_less_token_matches_no_project_rule(self):
        # 'None' == 'None' must not match: the operator's run has neither
        # a project nor an owner.
        ctx = oslo_context.RequestContext(roles=['reader'],
                                               project_id=None)
        for rule in (policy.RUN_GET, policy.RUN_OUTPUT, policy.RUN_RESULTS):
            self.assertFalse(policy.allowed(rule, ctx, self.operator_run),
                             rule)
        self.assertFalse(policy.allowed(policy.RUN_LIST, ctx))

    def test_every_rule_is_scoped(self):
        for rule in policy.list_rules():
            if isinstance(rule, oslo_policy.DocumentedRuleDefault):
                self.assertEqual(['system', 'project'], rule.scope_types,
                                 rule.name)
