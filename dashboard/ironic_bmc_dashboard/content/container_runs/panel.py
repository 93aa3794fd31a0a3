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

from django.utils.translation import gettext_lazy as _
import horizon


class ContainerRuns(horizon.Panel):
    """Project -> Compute -> Container runs (added by the enabled file's
    ADD_PANEL)."""
    name = _('Container runs')
    slug = 'container_runs'
    # Only where the catalog has the container runs API.
    permissions = ('openstack.services.baremetal-container',)
