
"""API tests: the container deploy interface refuses bad input at validate.

They need only the Ironic API and a conductor running the plugin (no node
is deployed): every refusal must name the instance_info key and why.
"""

from ironic_tempest_plugin.tests.api import base
from tempest import config
from tempest.lib import decorators

CONF = config.CONF


class TestContainerDeployValidate(base.BaseBaremetalTest):
    """``node validate`` of a container node names each bad key."""

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

    def _deploy_validation(self, **instance_info):
        if instance_info:
            self.client.update_node(self.node['uuid'], patch=[
                {'op': 'add', 'path': '/instance_info/%s' % key,
                 'value': value} for key, value in instance_info.items()])
        _, body = self.client.validate_driver_interface(self.node['uuid'])
        return body['deploy']

    @decorators.idempotent_id('0f3d5b2e-6c1a-4f7e-9b8d-2a4c6e8f0b11')
    def test_image_is_required(self):
        result = self._deploy_validation()
        self.assertFalse(result['result'])
        self.assertIn('instance_info/container_image', result['reason'])

    @decorators.idempotent_id('7a9c1e3b-5d2f-4e6a-8b0c-1d3e5f7a9b22')
    def test_rootfs_modes_not_built_are_refused(self):
        result = self._deploy_validation(
            container_image='registry.example:5000/app:1',
            container_rootfs='nfs')
        self.assertFalse(result['result'])
        self.assertIn('container_rootfs', result['reason'])
        self.assertIn('not supported yet', result['reason'])

    @decorators.idempotent_id('c4e6a8b0-2d1f-4a3c-9e5b-7f9a1c3e5d33')
    def test_unknown_tunable_is_refused(self):
        result = self._deploy_validation(
            container_image='registry.example:5000/app:1',
            container_tunables='{"thp_enable": "never"}')
        self.assertFalse(result['result'])
        self.assertIn('thp_enable', result['reason'])
