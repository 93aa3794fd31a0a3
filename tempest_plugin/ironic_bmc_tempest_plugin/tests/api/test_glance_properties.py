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

"""API tests: container keys read from the Glance image (the Nova path).

A node whose instance_info names only a Glance image (image_source, what
Nova's ironic driver sets) takes the container keys from the image's
properties; bad ones are refused at validate, naming the property and
the image, and operator-only keys are refused on an image.
"""

from tempest import config
from tempest.lib import decorators

from ironic_bmc_tempest_plugin import images
from ironic_bmc_tempest_plugin.tests.api import base

CONF = config.CONF


class TestGlanceImageProperties(base.ContainerNodeTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.glance:
            raise cls.skipException('Glance is not available')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.images = cls.os_admin.image_client_v2

    def _image(self, **kwargs):
        return images.create(self, self.images, **kwargs)

    @decorators.idempotent_id('5b1e7d3a-9c2f-4a6e-8d0b-3f5a7c9e1b44')
    def test_image_properties_are_valid(self):
        image = self._image(container_image='registry.example:5000/app:1',
                            container_mode='job',
                            container_command=['/bin/true'])
        result = self.deploy_validation(image_source=image['id'])
        self.assertTrue(result['result'], result)

    @decorators.idempotent_id('8e2a4c6f-1b3d-4f5a-9c7e-0d2f4b6a8c55')
    def test_bad_property_names_property_and_image(self):
        image = self._image(container_image='registry.example:5000/app:1',
                            container_command='not a list')
        result = self.deploy_validation(image_source=image['id'])
        self.assertRefused(result, 'container_command', image['id'],
                           'JSON list of strings')

    @decorators.idempotent_id('2c4e6a8b-3d5f-4b7c-8e1a-5f7b9d1c3e66')
    def test_operator_only_key_is_refused(self):
        image = self._image(container_image='registry.example:5000/app:1',
                            kernel='file:///etc/shadow')
        result = self.deploy_validation(image_source=image['id'])
        self.assertRefused(result, 'kernel', image['id'],
                           'may only be set by the operator')
        self.assertNotIn('/etc/shadow', result['reason'])

    @decorators.idempotent_id('9f1b3d5e-7a2c-4e6b-8d0f-1a3c5e7b9d77')
    def test_instance_info_wins_over_the_image(self):
        image = self._image(container_image='registry.example:5000/app:1',
                            container_command='not a list')
        result = self.deploy_validation(image_source=image['id'],
                                        container_command=['/bin/true'])
        self.assertTrue(result['result'], result)

    @decorators.idempotent_id('b3d5f7a9-2c4e-4a6b-9d8f-0e2a4c6b8d99')
    def test_kernel_id_must_name_a_kernel(self):
        # The slip of naming the container's own image as the kernel.
        not_a_kernel = self._image(
            container_image='registry.example:5000/app:1')
        image = self._image(container_image='registry.example:5000/app:1',
                            kernel_id=not_a_kernel['id'])
        result = self.deploy_validation(image_source=image['id'])
        self.assertRefused(result, 'property kernel_id of Glance image %s'
                           % image['id'], not_a_kernel['id'],
                           'is not a kernel', '--disk-format aki')

    @decorators.idempotent_id('c4e6a8b0-3d5f-4b7c-8e9a-1f3b5d7c9e20')
    def test_kernel_and_ramdisk_images_accepted(self):
        kernel = self._image(disk_format='aki')
        ramdisk = self._image(disk_format='ari')
        image = self._image(container_image='registry.example:5000/app:1',
                            kernel_id=kernel['id'], ramdisk_id=ramdisk['id'])
        result = self.deploy_validation(image_source=image['id'])
        self.assertTrue(result['result'], result)
