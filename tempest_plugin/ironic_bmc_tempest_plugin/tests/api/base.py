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

"""A container node enrolled for the API tests (never deployed)."""

from ironic_tempest_plugin.tests.api import base
from tempest import config
from tempest.lib.common.utils import data_utils

CONF = config.CONF


class ContainerNodeTest(base.BaseBaremetalTest):
    """Each test gets a node of [baremetal_container]driver with the
    container deploy interface and a port; ``deploy_validation`` returns
    what ``node validate`` says of its deploy interface."""

    # Node interface fields: API 1.31.
    min_microversion = '1.31'

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.baremetal_container.enabled:
            raise cls.skipException('[baremetal_container]enabled is False')

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        # After the base class: it sets cls.driver from [baremetal]driver.
        cls.driver = CONF.baremetal_container.driver
        _, cls.chassis = cls.create_chassis()

    def setUp(self):
        super().setUp()
        _, node = self.create_node(self.chassis['uuid'])
        # The node client's create_node keeps only the fields it knows;
        # the interfaces are set the way an operator sets them.
        _, self.node = self.client.update_node(node['uuid'], patch=[
            {'op': 'replace', 'path': '/%s_interface' % iface,
             'value': value}
            for iface, value in (('deploy', 'container'), ('boot', 'ipxe'),
                                 ('network', 'noop'))])
        self.assertEqual('container', self.node['deploy_interface'])
        self.assertEqual('ipxe', self.node['boot_interface'])
        # iPXE boot validates only a node with a port (its MAC).
        self.create_port(self.node['uuid'], data_utils.rand_mac_address())

    def deploy_validation(self, **instance_info):
        if instance_info:
            self.client.update_node(self.node['uuid'], patch=[
                {'op': 'add', 'path': '/instance_info/%s' % key,
                 'value': value} for key, value in instance_info.items()])
        _, body = self.client.validate_driver_interface(self.node['uuid'])
        return body['deploy']

    def assertRefused(self, result, *words):
        self.assertFalse(result['result'], result)
        for word in words:
            self.assertIn(word, result['reason'])
