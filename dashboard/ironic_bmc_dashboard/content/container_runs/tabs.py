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

"""The "Container run" tab of an instance's page (Project -> Compute ->
Instances -> the instance): the instance's newest run.  Added to
Horizon's ``InstanceDetailTabs`` by the enabled file's EXTRA_TABS."""

from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import tabs

from ironic_bmc_dashboard import api
from ironic_bmc_dashboard.content.container_runs import views


class ContainerRunTab(tabs.Tab):
    name = _('Container run')
    slug = 'container_run'
    template_name = 'project/container_runs/_instance_tab.html'
    # Loaded when the tab is opened: one list and one report call.
    preload = False
    permissions = ('openstack.services.baremetal-container',)

    def get_context_data(self, request):
        instance = self.tab_group.kwargs['instance']
        context = {'instance': instance, 'run': None, 'error': False}
        try:
            found = api.run_list(request, instance_uuid=instance.id,
                                 limit=1)
            report = api.run_get(request, found[0].id) if found else None
        except Exception:
            exceptions.handle(request, _('Unable to retrieve the container '
                                         'run of instance %s.')
                              % instance.id)
            context['error'] = True
            return context
        if report is not None:
            context.update(views.run_context(request, report))
        return context
