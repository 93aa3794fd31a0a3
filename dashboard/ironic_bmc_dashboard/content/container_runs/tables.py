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

"""The project's runs, newest first."""

from django.template import defaultfilters
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from horizon import tables

from ironic_bmc_dashboard.content.container_runs import display


def _run_link(run):
    return reverse('horizon:project:container_runs:detail',
                   args=(run.deploy_id,))


def _instance(run):
    return (getattr(run, 'instance_name', None) or run.get('instance_uuid')
            or display.NO_VALUE)


def _instance_link(run):
    """The instance's page while Nova knows the instance."""
    if getattr(run, 'instance_name', None):
        return reverse('horizon:project:instances:detail',
                       args=(run.instance_uuid,))
    return None


def _node(run):
    return run.get('node_name') or run.get('node') or display.NO_VALUE


def _created(run):
    created = display.when(run.get('created'))
    return defaultfilters.date(created, 'Y-m-d H:i:s') if created else (
        display.NO_VALUE)


class RunsFilterAction(tables.FilterAction):
    # Filters the rows shown, in the browser.
    name = 'filter'


class RunsTable(tables.DataTable):
    run = tables.Column(lambda run: run.deploy_id[:8],
                        verbose_name=_('Run'), link=_run_link)
    instance = tables.Column(_instance, verbose_name=_('Instance'),
                             link=_instance_link)
    node = tables.Column(_node, verbose_name=_('Node'))
    state = tables.Column('state', verbose_name=_('State'))
    exit_code = tables.Column(
        lambda run: display.exit_code(run.get('workload_exit_code')),
        verbose_name=_('Exit code'))
    image = tables.Column('image', verbose_name=_('Image'), truncate=48)
    t_ready = tables.Column(lambda run: display.seconds(run.get(
        't_ready_s')), verbose_name=_('T_ready'))
    bmc_joules = tables.Column(
        lambda run: display.joules(run.get('bmc_joules_workload')),
        verbose_name=_('BMC energy'))
    rapl_joules = tables.Column(
        lambda run: display.joules(run.get('rapl_joules_workload')),
        verbose_name=_('RAPL energy'))
    created = tables.Column(_created, verbose_name=_('Created'))

    def get_object_id(self, datum):
        return datum.deploy_id

    def get_object_display(self, datum):
        return datum.deploy_id

    class Meta:
        name = 'container_runs'
        verbose_name = _('Container runs')
        table_actions = (RunsFilterAction,)
