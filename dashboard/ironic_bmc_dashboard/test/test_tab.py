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

"""The "Container run" tab of Horizon's instance page (EXTRA_TABS)."""

from unittest import mock

from django.urls import reverse
from openstack_dashboard.api import neutron
from openstack_dashboard.dashboards.project.instances import tabs

from ironic_bmc_client import runs
from ironic_bmc_dashboard import api
from ironic_bmc_dashboard.test import base
from ironic_bmc_dashboard.test import data

TAB = 'instance_details__container_run'


class InstanceTabTests(base.TestCase):

    def setUp(self):
        super().setUp()
        self.server = self.servers.first()
        # Horizon's Interfaces tab asks Neutron when it is built.
        self.patch(neutron, 'is_extension_supported', return_value=False)

    def _tab(self, selected=True):
        request = self.factory.get(
            '/project/instances/%s/' % self.server.id,
            {'tab': TAB} if selected else {})
        group = tabs.InstanceDetailTabs(request, instance=self.server)
        return group, group.get_tab('container_run')

    def test_the_instance_page_has_the_tab(self):
        group, tab = self._tab(selected=False)
        self.assertIsNotNone(tab)
        # After Horizon's own tabs, loaded only when opened.
        self.assertEqual('container_run', list(group._tabs)[-1])
        self.assertFalse(tab.load)

    def test_the_tab_shows_the_newest_run(self):
        run_list = self.patch(api, 'run_list',
                              return_value=[data.row(self.server.id)])
        run_get = self.patch(api, 'run_get',
                             return_value=data.report(self.server.id))
        _group, tab = self._tab()

        html = tab.render()

        run_list.assert_called_once_with(mock.ANY,
                                         instance_uuid=self.server.id,
                                         limit=1)
        run_get.assert_called_once_with(mock.ANY, data.DEPLOY_ID)
        self.assertIn(reverse('horizon:project:container_runs:detail',
                              args=(data.DEPLOY_ID,)), html)
        self.assertEqual(2, html.count('<svg class="bmc-chart'))
        self.assertIn('53.9 s', html)
        self.assertIn('&lt;b&gt;from a Glance property', html)
        # The result files are on the run's page.
        self.assertNotIn('bmc-results', html)

    def test_an_instance_without_a_run(self):
        self.patch(api, 'run_list', return_value=[])
        run_get = self.patch(api, 'run_get')
        _group, tab = self._tab()
        html = tab.render()
        self.assertIn('This instance has no container run (yet).', html)
        run_get.assert_not_called()

    def test_runs_api_down(self):
        self.patch(api, 'run_list', side_effect=runs.RunsError('down', 503))
        _group, tab = self._tab()
        html = tab.render()
        self.assertIn('could not be read', html)

    def test_no_tab_without_the_runs_api(self):
        self.without_runs_api()
        _group, tab = self._tab()
        self.assertIsNone(tab)
