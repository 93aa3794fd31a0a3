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

"""The Container runs panel: the project's runs, a run's page, and the
downloads of its output and result files (streamed through from the
runs API with the user's token)."""

import posixpath

from django import http
from django.urls import reverse
from django.urls import reverse_lazy
from django.utils import http as http_utils
from django.utils.translation import gettext_lazy as _
from horizon import exceptions
from horizon import tables
from horizon import views
from openstack_dashboard.api import nova

from ironic_bmc_client import runs
from ironic_bmc_dashboard import api
from ironic_bmc_dashboard.content.container_runs import display
from ironic_bmc_dashboard.content.container_runs import tables as \
    runs_tables

INDEX_URL = reverse_lazy('horizon:project:container_runs:index')


def detail_url(deploy_id):
    return reverse('horizon:project:container_runs:detail',
                   args=(deploy_id,))


class IndexView(tables.DataTableView):
    table_class = runs_tables.RunsTable
    template_name = 'horizon/common/_data_table_view.html'
    page_title = _('Container runs')

    def get_data(self):
        try:
            found = api.run_list(self.request)
        except Exception:
            exceptions.handle(self.request,
                              _('Unable to retrieve the container runs.'))
            return []
        name_instances(self.request, found)
        return found


def name_instances(request, found):
    """Give the runs whose instance Nova still has its name (the table
    links those to the instance's page)."""
    wanted = {run.get('instance_uuid') for run in found} - {None}
    if not wanted:
        return
    try:
        servers = nova.server_list(request)[0]
    except Exception:
        # The runs are listed all the same, with the instances' UUIDs.
        exceptions.handle(request, ignore=True)
        return
    names = {server.id: server.name for server in servers
             if server.id in wanted}
    for run in found:
        name = names.get(run.get('instance_uuid'))
        if name:
            run.instance_name = name


def get_report(request, deploy_id, redirect=INDEX_URL):
    """The run report; a run the project may not read, or that does not
    exist, is "Run not found" (the API answers 404 for both)."""
    try:
        return api.run_get(request, deploy_id)
    except runs.NotFound:
        exceptions.handle(request, _('Run not found: %s') % deploy_id,
                          redirect=redirect, details='')
    except Exception:
        exceptions.handle(request, _('Unable to retrieve container run '
                                     '%s.') % deploy_id, redirect=redirect)


def run_context(request, report, output=None):
    """What the run template shows of a report.  ``output``: the
    ``RunOutput`` of the API, else the report's tail."""
    deploy_id = report.get('deploy_id')
    if output is None:
        output = runs.RunOutput(report.get('output_tail') or '',
                                report.get('state'), False)
    return {
        'run': report,
        'summary': display.summary(report),
        'tunables': display.tunables(report),
        'charts': display.all_charts(report),
        'output': display.output(output.text, output.full),
        'output_url': reverse('horizon:project:container_runs:output',
                              args=(deploy_id,)),
        'detail_url': detail_url(deploy_id),
    }


def result_links(request, report):
    """(files with their download URLs, files not kept with why)."""
    if not report.get('results'):
        return [], []
    deploy_id = report['deploy_id']
    try:
        listing = api.run_results(request, deploy_id)
    except Exception:
        exceptions.handle(request, _('Unable to retrieve the result files '
                                     'of run %s.') % deploy_id)
        return [], []
    files = []
    for entry in listing.get('results') or ():
        entry = dict(entry)
        entry['url'] = reverse('horizon:project:container_runs:result',
                               args=(deploy_id, entry['path'].lstrip('/')))
        files.append(entry)
    return files, list(listing.get('refused') or ())


class DetailView(views.HorizonTemplateView):
    template_name = 'project/container_runs/detail.html'
    page_title = _('Container run {{ short_id }}')

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        deploy_id = self.kwargs['deploy_id']
        report = get_report(self.request, deploy_id)
        try:
            output = api.run_output(self.request, deploy_id)
        except Exception:
            exceptions.handle(self.request, _('Unable to retrieve the '
                                              'output of run %s; the page '
                                              'shows its tail.') % deploy_id)
            output = None
        context.update(run_context(self.request, report, output))
        context['results'], context['refused'] = result_links(
            self.request, report)
        context['short_id'] = deploy_id[:8]
        context['url'] = INDEX_URL
        return context


def download_output(request, deploy_id):
    """The run's output as a text file: all of the kept output once the
    run has ended, the tail until then."""
    try:
        output = api.run_output(request, deploy_id)
    except runs.NotFound:
        exceptions.handle(request, _('Run not found: %s') % deploy_id,
                          redirect=INDEX_URL, details='')
    except Exception:
        exceptions.handle(request, _('Unable to retrieve the output of run '
                                     '%s.') % deploy_id,
                          redirect=detail_url(deploy_id))
    name = '%s-output%s.txt' % (deploy_id[:8], '' if output.full else
                                '-tail')
    response = http.HttpResponse(output.text,
                                 content_type='text/plain; charset=utf-8')
    response['Content-Disposition'] = http_utils.content_disposition_header(
        True, name)
    return response


def download_result(request, deploy_id, path):
    """One result file, streamed through from the runs API."""
    path = '/' + path
    try:
        stream = api.run_result(request, deploy_id, path)
    except Exception:
        exceptions.handle(
            request, _('Unable to download result %(path)s of run '
                       '%(run)s.') % {'path': path, 'run': deploy_id},
            redirect=detail_url(deploy_id))
    response = http.StreamingHttpResponse(
        stream, content_type='application/octet-stream')
    response['Content-Disposition'] = http_utils.content_disposition_header(
        True, posixpath.basename(path) or 'result')
    if stream.size is not None:
        response['Content-Length'] = str(stream.size)
    if stream.sha256:
        response['X-Result-Sha256'] = stream.sha256
    return response
