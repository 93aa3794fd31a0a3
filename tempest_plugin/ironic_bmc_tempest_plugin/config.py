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

"""tempest options of the ironic-bmc tests: [baremetal_container]."""

from oslo_config import cfg

group = cfg.OptGroup(name='baremetal_container',
                     title='Bare-Metal Container (container deploy) tests')

opts = [
    cfg.BoolOpt('enabled', default=False,
                help='Whether the cloud runs the ironic-bmc conductor '
                     'plugin: the container-ipmi hardware type and the '
                     'container deploy interface are enabled.'),
    cfg.StrOpt('driver', default='container-ipmi',
               help='Hardware type of the nodes the API tests enroll.'),
    cfg.ListOpt('tunables_profiles', default=['thp-never'],
                help='Tunables profiles the operator made deploy templates '
                     'for (ironic-bmc-deploy-templates); the API tests '
                     'check each template.'),
    cfg.StrOpt('container_image',
               help='OCI reference of a container image that a node can '
                    'pull, for the scenario test (a tenant boots it '
                    'through Nova). Unset: the scenario test is skipped.'),
    cfg.StrOpt('message_env', default='DEMO_MESSAGE',
               help='An environment variable that container_image\'s '
                    'command prints; the scenario test sets it to a token '
                    'of its own and looks for the token in the run '
                    'report\'s output.'),
    cfg.StrOpt('flavor', default='bm.container',
               help='Name of the bare-metal flavor of the scenario test.'),
    cfg.StrOpt('network',
               help='Name of the network the scenario test\'s server is '
                    'attached to (Nova requires one).'),
    cfg.IntOpt('deploy_timeout', default=1200,
               help='Seconds for a server to be built and its run to '
                    'finish.'),
]
