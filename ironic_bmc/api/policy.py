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

"""Policy of the container runs API, in code.

A run belongs to the project that launched it (``project_id`` in its
report: the Nova server's project, which Ironic also makes the node's
lessee for the life of the instance) and is visible to the node's owner.
The defaults let a reader of either project read the run; system readers
read every run.  Only system readers see what the operator keeps to
itself (boot file URLs, the artifact's place on the conductor, the
conductors, BMC errors).

The rules are read from Ironic's policy file (``[oslo_policy]
policy_file``), so operators override them where they override Ironic's;
``oslopolicy-sample-generator --namespace ironic_bmc`` lists them.
"""

from oslo_config import cfg
from oslo_policy import policy

_SYSTEM_READER = ('(role:reader and system_scope:all) or '
                  '(role:service and system_scope:all)')
_RUN_READER = ('role:reader and (project_id:%(project_id)s or '
               'project_id:%(node_owner)s)')

#: Who reads a run (its report, output and results).
_READ = ('rule:baremetal_container:system_reader or '
         'rule:baremetal_container:run_reader')

RUN_LIST = 'baremetal_container:run:list'
RUN_LIST_ALL = 'baremetal_container:run:list_all'
RUN_GET = 'baremetal_container:run:get'
RUN_OUTPUT = 'baremetal_container:run:get_output'
RUN_RESULTS = 'baremetal_container:run:get_results'
OPERATOR_FIELDS = 'baremetal_container:run:show_operator_fields'

_RULES = [
    policy.RuleDefault(
        'baremetal_container:system_reader', _SYSTEM_READER,
        description='Readers of the whole deployment.'),
    policy.RuleDefault(
        'baremetal_container:run_reader', _RUN_READER,
        description='Readers of the project that launched the run or of '
                    'the node\'s owner project.'),
    policy.DocumentedRuleDefault(
        name=RUN_LIST,
        check_str='rule:baremetal_container:system_reader or role:reader',
        description='List runs: the runs the caller\'s project '
                    'launched.',
        operations=[{'path': '/v1/runs', 'method': 'GET'}]),
    policy.DocumentedRuleDefault(
        name=RUN_LIST_ALL,
        check_str='rule:baremetal_container:system_reader',
        description='List the runs of every project.',
        operations=[{'path': '/v1/runs', 'method': 'GET'}]),
    policy.DocumentedRuleDefault(
        name=RUN_GET,
        check_str=_READ,
        description='Read a run\'s report.  A caller denied this gets '
                    '404, as for a run that does not exist.',
        operations=[{'path': '/v1/runs/{deploy_id}', 'method': 'GET'}]),
    policy.DocumentedRuleDefault(
        name=RUN_OUTPUT,
        check_str=_READ,
        description='Read a run\'s output.',
        operations=[{'path': '/v1/runs/{deploy_id}/output',
                     'method': 'GET'}]),
    policy.DocumentedRuleDefault(
        name=RUN_RESULTS,
        check_str=_READ,
        description='List and download a run\'s result files.',
        operations=[{'path': '/v1/runs/{deploy_id}/results',
                     'method': 'GET'},
                    {'path': '/v1/runs/{deploy_id}/results/{path}',
                     'method': 'GET'}]),
    policy.DocumentedRuleDefault(
        name=OPERATOR_FIELDS,
        check_str='rule:baremetal_container:system_reader',
        description='See the fields of a report the operator keeps to '
                    'itself: boot file URLs, the rootfs artifact, the '
                    'conductors that ran the deploy, BMC errors.',
        operations=[{'path': '/v1/runs/{deploy_id}', 'method': 'GET'}]),
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
    target = {}
    if run is not None:
        target = {'project_id': run.get('project_id'),
                  'node_owner': run.get('node_owner')}
    return enforcer().enforce(rule, target, context.to_policy_values(),
                              do_raise=False)
