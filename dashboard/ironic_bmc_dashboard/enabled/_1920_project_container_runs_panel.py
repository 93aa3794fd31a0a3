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

"""Horizon's pluggable settings of the Container runs panel.

Copy this file into ``openstack_dashboard/local/enabled/`` of the Horizon
that has ironic-bmc-dashboard installed, and restart Horizon.  The panel
goes into Project -> Compute and shows only when the catalog has the
container runs API (service type ``baremetal-container``); the instance
page gets a "Container run" tab.
"""

from ironic_bmc_client import runs

# The panel's slug.
PANEL = 'container_runs'
# The dashboard and the panel group it is in.
PANEL_DASHBOARD = 'project'
PANEL_GROUP = 'compute'
# The panel's class.
ADD_PANEL = ('ironic_bmc_dashboard.content.container_runs.panel.'
             'ContainerRuns')
# The templates of the panel come with the application.
ADD_INSTALLED_APPS = ['ironic_bmc_dashboard']
# What the runs API raises, sorted as Horizon's error handling sorts
# exceptions: a missing run is a message, not a server error.
ADD_EXCEPTIONS = {
    'not_found': (runs.NotFound,),
    'recoverable': (runs.RunsError,),
}
# The instance page's tabs, and the newest run of the instance.
EXTRA_TABS = {
    'openstack_dashboard.dashboards.project.instances.tabs.'
    'InstanceDetailTabs': (
        'ironic_bmc_dashboard.content.container_runs.tabs.'
        'ContainerRunTab',
    ),
}
