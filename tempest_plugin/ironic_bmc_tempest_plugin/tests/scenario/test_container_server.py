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

"""Scenario: a tenant boots a container image through Nova.

As a tenant would: a Glance image whose properties name the container,
a server of the bare-metal flavor; Nova's ironic driver deploys a node,
the container deploy interface reads the container from the image, the
node runs it.  The operator's side then checks the node's run report:
the workload's output holds a token this test put in the container's
environment through the image's properties.
"""

import time

from tempest.common import waiters
from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc
from tempest import test

from ironic_bmc_tempest_plugin import images

CONF = config.CONF
BUILT = ('ACTIVE', 'SHUTOFF')
#: Node fields such as deploy_interface: API 1.31 and later.
API_VERSION = {'X-OpenStack-Ironic-API-Version': '1.31'}


class TestContainerServer(test.BaseTestCase):

    credentials = ['primary', 'admin', 'system_admin']

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        opts = CONF.baremetal_container
        if not opts.enabled:
            raise cls.skipException('[baremetal_container]enabled is False')
        for service in ('ironic', 'nova', 'glance', 'neutron'):
            if not getattr(CONF.service_available, service):
                raise cls.skipException('%s is not available' % service)
        if not (opts.container_image and opts.network):
            raise cls.skipException(
                '[baremetal_container]container_image and network must '
                'be set')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.servers = cls.os_primary.servers_client
        cls.images = cls.os_primary.image_client_v2
        cls.flavors = cls.os_primary.flavors_client
        cls.networks = cls.os_primary.networks_client
        operator = (cls.os_system_admin if CONF.enforce_scope.ironic
                    else cls.os_admin)
        cls.baremetal = operator.baremetal.BaremetalClient()

    def _image(self, token):
        opts = CONF.baremetal_container
        return images.create(
            self, self.images, container_image=opts.container_image,
            container_mode='job', container_env={opts.message_env: token})

    def _find(self, listing, key, name, what):
        found = [x for x in listing[key] if x['name'] == name]
        if not found:
            self.fail('no %s named %s' % (what, name))
        return found[0]['id']

    def _wait_built(self, server_id, deadline):
        while True:
            server = self.servers.show_server(server_id)['server']
            if server['status'] in BUILT:
                return server
            if server['status'] == 'ERROR':
                self.fail('server %s went to ERROR: %s' % (
                    server_id, server.get('fault', {}).get('message')))
            if time.monotonic() > deadline:
                self.fail('server %s is %s after %ds' % (
                    server_id, server['status'],
                    CONF.baremetal_container.deploy_timeout))
            time.sleep(5)

    def _node_of(self, server_id):
        _, body = self.baremetal._show_request(
            'nodes', uri='v1/nodes/detail?instance_uuid=%s' % server_id,
            headers=API_VERSION, extra_headers=True)
        self.assertEqual(1, len(body['nodes']), body)
        return body['nodes'][0]

    def _wait_report(self, node_uuid, deadline):
        report = None
        while time.monotonic() < deadline:
            try:
                _, report = self.baremetal._show_request(
                    'nodes', uri='v1/nodes/%s/vendor_passthru'
                    '?method=run_report' % node_uuid)
            except lib_exc.ServerFault:
                report = None
            if report and report.get('state') == 'finished':
                return report
            time.sleep(5)
        self.fail('the run of node %s did not finish; last report: %s'
                  % (node_uuid, report))

    @decorators.idempotent_id('3a5c7e9b-1d3f-4a5c-8e7b-9d1f3a5c7e21')
    def test_tenant_boots_a_container_image(self):
        opts = CONF.baremetal_container
        deadline = time.monotonic() + opts.deploy_timeout
        token = data_utils.rand_name('bmc-tempest-token')
        image = self._image(token)
        flavor_id = self._find(self.flavors.list_flavors(), 'flavors',
                               opts.flavor, 'flavor')
        network_id = self._find(
            self.networks.list_networks(name=opts.network), 'networks',
            opts.network, 'network')
        server = self.servers.create_server(
            name=data_utils.rand_name('bmc-container'),
            imageRef=image['id'], flavorRef=flavor_id,
            networks=[{'uuid': network_id}])['server']
        self.addCleanup(waiters.wait_for_server_termination, self.servers,
                        server['id'])
        self.addCleanup(self.servers.delete_server, server['id'])

        self._wait_built(server['id'], deadline)
        node = self._node_of(server['id'])
        # Nova set only the image's UUID; the deploy read the rest.
        self.assertEqual(image['id'], node['instance_info']['image_source'])
        self.assertEqual('container', node['deploy_interface'])
        report = self._wait_report(node['uuid'], deadline)
        self.assertEqual(opts.container_image, report['image'])
        self.assertEqual(0, report['workload_exit_code'], report)
        self.assertIn(token, report['output_tail'])
