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

"""API tests: the deploy templates that let flavor traits pick tunables.

The operator runs ironic-bmc-deploy-templates; each tunables profile has
a template CUSTOM_BMC_TUNABLES_<PROFILE> running the container deploy
step bmc_apply_tunables with the profile.  A trait of that prefix with no
template is refused at validate (Ironic would ignore it).
"""

from tempest import config
from tempest.lib import decorators

from ironic_bmc_tempest_plugin.tests.api import base

CONF = config.CONF
PREFIX = 'CUSTOM_BMC_TUNABLES_'


def template_name(profile):
    return PREFIX + profile.upper().replace('-', '_')


class TestTunablesDeployTemplates(base.ContainerNodeTest):

    # Deploy templates: API 1.55 (node traits: 1.37).
    min_microversion = '1.55'

    @decorators.idempotent_id('4d6f8a0c-5e7b-4c9d-8f2a-6b8d0f2a4c88')
    def test_each_profile_has_its_template(self):
        for profile in CONF.baremetal_container.tunables_profiles:
            _, template = self.client.show_deploy_template(
                template_name(profile))
            steps = [(s['interface'], s['step'], s['args'])
                     for s in template['steps']]
            self.assertIn(('deploy', 'bmc_apply_tunables',
                           {'tunables': profile}), steps)

    @decorators.idempotent_id('6f8a0c2e-7b9d-4e1f-8a4c-8d0f2b4c6e99')
    def test_template_trait_is_accepted(self):
        # As Nova leaves a node: the flavor's traits in instance_info, and
        # Ironic requires the node to carry them.
        traits = [template_name(p)
                  for p in CONF.baremetal_container.tunables_profiles]
        self.client.set_node_traits(self.node['uuid'], traits)
        result = self.deploy_validation(
            container_image='registry.example:5000/app:1', traits=traits)
        self.assertTrue(result['result'], result)

    @decorators.idempotent_id('8a0c2e4f-9d1b-4f3a-8c6e-0f2b4d6e8a10')
    def test_trait_without_template_is_refused(self):
        trait = template_name('no-such-profile')
        self.client.set_node_traits(self.node['uuid'], [trait])
        result = self.deploy_validation(
            container_image='registry.example:5000/app:1', traits=[trait])
        self.assertRefused(result, trait, 'ironic-bmc-deploy-templates')
