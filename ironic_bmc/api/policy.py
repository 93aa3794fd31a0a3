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

"""Policy of the container runs API, in code: Secure RBAC.

The personas are Ironic's (since 2024.1, ``ironic/common/policy.py``):

* **system reader** (``role:reader`` on a system-scoped token; Keystone's
  system admins and members imply it) and the **service** role with
  system scope: every run, and the fields the operator keeps to itself
  (boot file URLs, the artifact's place on the conductor, the
  conductors, BMC errors).
* **project reader** of the project the run is for
  (:func:`ironic_bmc.ownership.run_project`: the lessee, Nova's project,
  else the owner): its runs' reports, output and result files.  Members,
  managers and admins imply reader.
* **owner reader**, of the node's owner project, when the run is another
  project's (the owner's lessee): the report (state, timings, energy:
  what its hardware did), not the output nor the result files (the
  tenant's data).

A token without a project (domain-scoped) matches no project rule: the
rules' ``scope_types`` are system and project, so oslo.policy refuses a
domain-scoped token before any rule is read, and :func:`allowed` leaves
a None owner out of the target, so ``project_id:%(node_owner)s`` never
matches a None token project with a None owner.

The rules are read from Ironic's policy file (``[oslo_policy]
policy_file``), so operators override them where they override Ironic's;
``oslopolicy-sample-generator --namespace ironic_bmc`` lists them.
"""

from oslo_config import cfg
from oslo_policy import policy


_SCOPES = ['system', 'project']

SYSTEM_READER = 'role:reader and system_scope:all'
SYSTEM_SERVICE = 'role:service and system_scope:all'
PROJECT_READER = 'role:reader and project_id:%(project_id)s'
OWNER_READER = 'role:reader and project_id:%(node_owner)s'

#: Who reads a run's report.
_READ = ('rule:baremetal_container:system_reader or '
         'rule:baremetal_container:project_reader or '
         'rule:baremetal_container:owner_reader')
#: Who reads a run's output and result files: not the owner of a
#: lessee's node.
_READ_DATA = ('rule:baremetal_container:system_reader or '
              'rule:baremetal_container:project_reader')

RUN_LIST = 'baremetal_container:run:list'
RUN_LIST_ALL = 'baremetal_container:run:list_all'
RUN_GET = 'baremetal_container:run:get'
RUN_OUTPUT = 'baremetal_container:run:get_output'
RUN_RESULTS = 'baremetal_container:run:get_results'
OPERATOR_FIELDS = 'baremetal_container:run:show_operator_fields'

_RULES = [
    policy.RuleDefault(
        'baremetal_container:system_reader',
        '(%s) or (%s)' % (SYSTEM_READER, SYSTEM_SERVICE),
        description='Readers of the whole deployment (system scope), and '
                    'the service role with system scope.'),
    policy.RuleDefault(
        'baremetal_container:project_reader', PROJECT_READER,
        description='Readers of the project the run is for: the node\'s '
                    'lessee (with Ironic\'s automatic lessee, the Nova '
                    'instance\'s project), else the project of the '
                    'instance holding the node, else the node\'s owner.'),
    policy.RuleDefault(
        'baremetal_container:owner_reader', OWNER_READER,
        description='Readers of the node\'s owner project.'),
    policy.DocumentedRuleDefault(
        name=RUN_LIST,
        check_str='rule:baremetal_container:system_reader or '
                  'rule:baremetal_container:project_reader',
        description='List runs: the runs of the caller\'s project, and '
                    'the runs on the nodes it owns.  The target\'s '
                    'project_id is the token\'s own.',
        operations=[{'path': '/v1/runs', 'method': 'GET'}],
        scope_types=_SCOPES),
    policy.DocumentedRuleDefault(
        name=RUN_LIST_ALL,
        check_str='rule:baremetal_container:system_reader',
        description='List the runs of every project.',
        operations=[{'path': '/v1/runs', 'method': 'GET'}],
        scope_types=_SCOPES),
    policy.DocumentedRuleDefault(
        name=RUN_GET,
        check_str=_READ,
        description='Read a run\'s report.  A caller denied this gets '
                    '404, as for a run that does not exist.',
        operations=[{'path': '/v1/runs/{deploy_id}', 'method': 'GET'}],
        scope_types=_SCOPES),
    policy.DocumentedRuleDefault(
        name=RUN_OUTPUT,
        check_str=_READ_DATA,
        description='Read a run\'s output.',
        operations=[{'path': '/v1/runs/{deploy_id}/output',
                     'method': 'GET'}],
        scope_types=_SCOPES),
    policy.DocumentedRuleDefault(
        name=RUN_RESULTS,
        check_str=_READ_DATA,
        description='List and download a run\'s result files.',
        operations=[{'path': '/v1/runs/{deploy_id}/results',
                     'method': 'GET'},
                    {'path': '/v1/runs/{deploy_id}/results/{path}',
                     'method': 'GET'}],
        scope_types=_SCOPES),
    policy.DocumentedRuleDefault(
        name=OPERATOR_FIELDS,
        check_str='rule:baremetal_container:system_reader',
        description='See the fields of a report the operator keeps to '
                    'itself: boot file URLs, the rootfs artifact, the '
                    'conductors that ran the deploy, BMC errors.',
        operations=[{'path': '/v1/runs/{deploy_id}', 'method': 'GET'}],
        scope_types=_SCOPES),
]

_ENFORCER = None


def list_rules():
    """The rules, for ``oslopolicy-sample-generator``."""
    return _RULES


def enforcer():
    global _ENFORCER
    if _ENFORCER is None:
        _ENFORCER = policy.Enforcer(cfg.CONF)
        _ENFORCER.register_defaults(_RULES)
    return _ENFORCER


def allowed(rule, context, run=None):
    """Whether ``context`` (an oslo.context RequestContext) may do
    ``rule`` on ``run`` (a report; its owners are the target)."""
    if run is None:
        # (A list: the caller's own project is the target; a token
        # without one has none.)
        run = {'project_id': context.project_id}
    # None is left out: a rule naming a missing key does not match, where
    # 'None' would match a project-less token's 'None'.
    target = {key: run[key] for key in ('project_id', 'node_owner')
              if isinstance(run.get(key), str) and run[key]}
    return enforcer().enforce(rule, target, context.to_policy_values(),
                              do_raise=False)
