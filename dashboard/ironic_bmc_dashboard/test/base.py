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

"""The plugin's test case: Horizon's, with the container runs API in the
user's catalog."""

from unittest import mock

from openstack_dashboard.test import helpers

ENDPOINT = 'http://public.bmc.example.com:6388'


class TestCase(helpers.TestCase):

    def _setup_test_data(self):
        super()._setup_test_data()
        self.service_catalog.append({
            'type': 'baremetal-container', 'name': 'ironic-bmc',
            'endpoints_links': [],
            'endpoints': [
                {'region': region, 'interface': interface,
                 'url': ENDPOINT if interface == 'public' else
                 'http://%s.bmc.example.com:6388' % interface}
                for region in ('RegionOne', 'RegionTwo')
                for interface in ('public', 'internal', 'admin')]})

    def without_runs_api(self):
        """The user's catalog without the container runs API."""
        catalog = [s for s in self.service_catalog
                   if s['type'] != 'baremetal-container']
        self.setActiveUser(
            id=self.user.id, token=self.token, username=self.user.name,
            domain_id=self.domain.id, user_domain_name=self.domain.name,
            user_domain_id=self.domain.id, tenant_id=self.tenant.id,
            service_catalog=catalog,
            authorized_tenants=self.tenants.list(),
            roles=[{'id': '2', 'name': 'member'}])

    def patch(self, obj, name, **kwargs):
        # Stopped by Horizon's tearDown (mock.patch.stopall).
        return mock.patch.object(obj, name, **kwargs).start()
