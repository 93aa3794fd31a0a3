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

"""API tests: the container deploy interface refuses bad input at validate.

They need only the Ironic API and a conductor running the plugin (no node
is deployed): every refusal must name the instance_info key and why.
"""

from tempest.lib import decorators

from ironic_bmc_tempest_plugin.tests.api import base


class TestContainerDeployValidate(base.ContainerNodeTest):
    """``node validate`` of a container node names each bad key."""

    @decorators.idempotent_id('0f3d5b2e-6c1a-4f7e-9b8d-2a4c6e8f0b11')
    def test_image_is_required(self):
        result = self.deploy_validation()
        self.assertFalse(result['result'])
        self.assertIn('instance_info/container_image', result['reason'])

    @decorators.idempotent_id('3b8d0f2a-6c4e-4a1b-9d7f-5e2c8a0b4d61')
    def test_unknown_rootfs_mode_is_refused(self):
        result = self.deploy_validation(
            container_image='registry.example:5000/app:1',
            container_rootfs='floppy')
        self.assertFalse(result['result'])
        self.assertIn('instance_info/container_rootfs', result['reason'])
        self.assertIn("unknown value 'floppy'", result['reason'])

    @decorators.idempotent_id('e1b794e0-1473-4136-b810-dd0b171a094e')
    def test_stream_cache_that_is_not_a_size_is_refused(self):
        result = self.deploy_validation(
            container_image='registry.example:5000/app:1',
            container_rootfs='stream', container_stream_cache='plenty')
        self.assertFalse(result['result'])
        self.assertIn('instance_info/container_stream_cache must be a size',
                      result['reason'])

    @decorators.idempotent_id('25000d2e-48ea-4f01-9aa0-2bacfca215f9')
    def test_walltime_that_is_not_a_duration_is_refused(self):
        result = self.deploy_validation(
            container_image='registry.example:5000/app:1',
            container_walltime='-1h')
        self.assertFalse(result['result'])
        self.assertIn('instance_info/container_walltime', result['reason'])
        self.assertIn('more than 0 seconds', result['reason'])

    @decorators.idempotent_id('c4e6a8b0-2d1f-4a3c-9e5b-7f9a1c3e5d33')
    def test_unknown_tunable_is_refused(self):
        result = self.deploy_validation(
            container_image='registry.example:5000/app:1',
            container_tunables='{"thp_enable": "never"}')
        self.assertFalse(result['result'])
        self.assertIn('thp_enable', result['reason'])
