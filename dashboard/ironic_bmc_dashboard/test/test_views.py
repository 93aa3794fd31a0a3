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

"""Project -> Compute -> Container runs: the index, a run's page, its
downloads, and a run the project may not read."""

import hashlib
from unittest import mock

from django.urls import reverse
from openstack_dashboard.api import nova

from ironic_bmc_client import charts
from ironic_bmc_client import runs
from ironic_bmc_dashboard import api
from ironic_bmc_dashboard.test import base
from ironic_bmc_dashboard.test import data

INDEX_URL = reverse('horizon:project:container_runs:index')
DETAIL_URL = reverse('horizon:project:container_runs:detail',
                     args=(data.DEPLOY_ID,))


class FakeResponse:
    """What requests gives ResultStream: headers and chunks."""

    def __init__(self, body, sha256):
        self.headers = {'Content-Length': str(len(body)),
                        'X-Result-Sha256': sha256}
        self.body = body
        self.closed = False

    def iter_content(self, size):
        for i in range(0, len(self.body), 8):
            yield self.body[i:i + 8]

    def close(self):
        self.closed = True


class IndexTests(base.TestCase):

    def test_index_lists_the_runs(self):
        server = self.servers.first()
        gone = '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b'
        run_list = self.patch(api, 'run_list', return_value=[
            data.row(server.id),
            data.row(gone, deploy_id=data.OTHER_ID, state='failed',
                     workload_exit_code=3, t_ready_s=None,
                     bmc_joules_workload=None, rapl_joules_workload=12.6)])
        server_list = self.patch(nova, 'server_list',
                                 return_value=(self.servers.list(), False))

        res = self.client.get(INDEX_URL)

        self.assertTemplateUsed(res, 'horizon/common/_data_table_view.html')
        table = res.context['table']
        self.assertEqual([data.DEPLOY_ID, data.OTHER_ID],
                         [row.deploy_id for row in table.data])
        run_list.assert_called_once_with(mock.ANY)
        server_list.assert_called_once_with(mock.ANY)
        # The run links to its page, the instance to the instance's page.
        self.assertContains(res, 'href="%s"' % DETAIL_URL)
        self.assertContains(res, 'href="%s"' % reverse(
            'horizon:project:instances:detail', args=(server.id,)))
        self.assertContains(res, '>%s</a>' % server.name)
        # An instance Nova no longer has: its UUID, not linked.
        self.assertContains(res, gone)
        self.assertNotContains(res, reverse(
            'horizon:project:instances:detail', args=(gone,)))
        for text in ('node-0', '53.9 s', '21,890 J', '13 J', 'failed',
                     data.IMAGE):
            self.assertContains(res, text)

    def test_index_without_instances_asks_nova_nothing(self):
        self.patch(api, 'run_list', return_value=[data.row(None)])
        server_list = self.patch(nova, 'server_list')
        res = self.client.get(INDEX_URL)
        self.assertEqual(1, len(res.context['table'].data))
        server_list.assert_not_called()

    def test_index_nova_down_lists_the_runs(self):
        self.patch(api, 'run_list', return_value=[data.row('x')])
        self.patch(nova, 'server_list',
                   side_effect=self.exceptions.nova)
        res = self.client.get(INDEX_URL)
        table = res.context['table']
        self.assertEqual(1, len(table.data))
        # The instance's UUID, without a link.
        self.assertEqual('x', table.columns['instance'].get_data(
            table.data[0]))
        self.assertIsNone(table.columns['instance'].get_link_url(
            table.data[0]))

    def test_index_api_error_is_a_message(self):
        self.patch(api, 'run_list', side_effect=runs.RunsError(
            'Listing runs is not allowed to this token.', 403))
        res = self.client.get(INDEX_URL)
        self.assertEqual(200, res.status_code)
        self.assertEqual([], res.context['table'].data)
        self.assertMessageCount(res, error=1)

    def test_index_refused_token_is_unauthorized(self):
        # As a 401 of Nova's: Horizon's "not authorized" page.
        self.patch(runs.RunsClient, 'list', side_effect=runs.RunsError(
            'The request you have made requires authentication.', 401))
        res = self.client.get(INDEX_URL)
        self.assertEqual(403, res.status_code)
        self.assertTemplateUsed(res, 'not_authorized.html')

    def test_panel_needs_the_runs_api_in_the_catalog(self):
        self.without_runs_api()
        run_list = self.patch(api, 'run_list')
        res = self.client.get(INDEX_URL)
        self.assertNotEqual(200, res.status_code)
        run_list.assert_not_called()


class DetailTests(base.TestCase):

    def setUp(self):
        super().setUp()
        self.server = self.servers.first()
        self.run_get = self.patch(api, 'run_get',
                                  return_value=data.report(self.server.id))
        self.run_output = self.patch(api, 'run_output', return_value=(
            runs.RunOutput(data.OUTPUT, 'finished', True)))
        self.run_results = self.patch(api, 'run_results',
                                      return_value=data.RESULTS)

    def test_detail_shows_the_run(self):
        res = self.client.get(DETAIL_URL)

        self.assertTemplateUsed(res, 'project/container_runs/detail.html')
        self.run_get.assert_called_once_with(mock.ANY,
                                             data.DEPLOY_ID)
        self.assertContains(res, 'Container run %s' % data.DEPLOY_ID[:8])
        for label, value in (('State', 'finished'), ('Exit code', '0'),
                             ('T_ready', '53.9 s'),
                             ('BMC energy', '21,890 J'),
                             ('RAPL energy', '15,211 J'),
                             ('BMC, whole run', '25,413 J'),
                             ('Workload', '120.0 s')):
            self.assertContains(res, '<dt>%s</dt>\n          <dd>%s</dd>'
                                % (label, value), html=False)
        # The tunables read back, each with its status.
        self.assertContains(res, 'never')
        self.assertContains(res, 'not applied: read back 60')
        self.assertContains(res, 'unsupported: no hugetlbfs in this kernel')
        # Both charts, inline SVG drawn by the client's chart module.
        body = res.content.decode('utf-8')
        self.assertEqual(2, body.count('<svg class="bmc-chart'))
        self.assertIn('bmc-chart-timeline', body)
        self.assertIn('bmc-chart-power', body)
        self.assertNotIn('<?xml', body)
        # The whole output, escaped, with its download link.
        self.assertContains(res, '&lt;b&gt;from a Glance property&lt;/b&gt;')
        self.assertNotContains(res, '<b>from a Glance property')
        self.assertNotContains(res, 'while the run goes on')
        self.assertContains(res, reverse(
            'horizon:project:container_runs:output', args=(data.DEPLOY_ID,)))
        # The result files: one to download, one not kept.
        self.assertContains(res, 'href="%s"' % reverse(
            'horizon:project:container_runs:result',
            args=(data.DEPLOY_ID, 'results/residuals.csv')))
        self.assertContains(res, data.RESULT_SHA256)
        self.assertContains(res, 'not kept: larger than 64 MB')
        self.assertNoMessages()

    def test_detail_of_a_starting_run(self):
        self.run_get.return_value = data.deploying_report(self.server.id)
        self.run_output.return_value = runs.RunOutput('', 'deploying', False)
        res = self.client.get(DETAIL_URL)
        self.assertEqual(200, res.status_code)
        self.assertNotContains(res, '<svg class="bmc-chart')
        self.assertContains(res, 'No chart: no stages recorded yet')
        self.assertContains(res, 'No chart: no BMC power samples')
        self.assertContains(res, 'Output (the tail, while the run goes on)')
        self.assertContains(res, 'The run kept no result files.')
        self.run_results.assert_not_called()

    def test_chart_failure_is_a_message_not_an_error(self):
        self.patch(charts, 'power_curve', side_effect=ValueError('boom'))
        res = self.client.get(DETAIL_URL)
        self.assertEqual(200, res.status_code)
        self.assertEqual(1, res.content.decode().count('<svg class="bmc-'))
        self.assertContains(res, 'The chart could not be drawn')

    def test_output_unreadable_shows_the_tail(self):
        self.run_output.side_effect = runs.RunsError('gone', 500)
        res = self.client.get(DETAIL_URL)
        self.assertEqual(200, res.status_code)
        self.assertContains(res, 'Output (the tail, while the run goes on)')
        self.assertContains(res, 'from a Glance property')
        self.assertMessageCount(res, error=1)

    def test_run_not_found(self):
        self.run_get.side_effect = runs.NotFound(
            'Run %s not found.' % data.DEPLOY_ID, 404)
        self.patch(api, 'run_list', return_value=[])
        res = self.client.get(DETAIL_URL)
        self.assertRedirectsNoFollow(res, INDEX_URL)
        res = self.client.get(DETAIL_URL, follow=True)
        self.assertContains(res, 'Run not found: %s' % data.DEPLOY_ID)
        self.assertNotContains(res, 'Traceback')


class DownloadTests(base.TestCase):

    def test_result_streamed_through(self):
        response = FakeResponse(data.RESULT, data.RESULT_SHA256)
        run_result = self.patch(api, 'run_result', return_value=(
            api.ResultStream(response, data.DEPLOY_ID,
                             '/results/residuals.csv')))
        res = self.client.get(reverse(
            'horizon:project:container_runs:result',
            args=(data.DEPLOY_ID, 'results/residuals.csv')))

        self.assertEqual(200, res.status_code)
        self.assertTrue(res.streaming)
        self.assertEqual(data.RESULT, b''.join(res.streaming_content))
        self.assertEqual('application/octet-stream', res['Content-Type'])
        self.assertEqual('attachment; filename="residuals.csv"',
                         res['Content-Disposition'])
        self.assertEqual(str(len(data.RESULT)), res['Content-Length'])
        self.assertEqual(data.RESULT_SHA256, res['X-Result-Sha256'])
        run_result.assert_called_once_with(
            mock.ANY, data.DEPLOY_ID, '/results/residuals.csv')
        res.close()
        self.assertTrue(response.closed)

    def test_result_with_other_bytes_breaks_off(self):
        response = FakeResponse(data.RESULT,
                                hashlib.sha256(b'other').hexdigest())
        self.patch(api, 'run_result', return_value=api.ResultStream(
            response, data.DEPLOY_ID, '/results/residuals.csv'))
        res = self.client.get(reverse(
            'horizon:project:container_runs:result',
            args=(data.DEPLOY_ID, 'results/residuals.csv')))
        with self.assertRaises(runs.RunsError):
            b''.join(res.streaming_content)

    def test_missing_result_back_to_the_run(self):
        self.patch(api, 'run_result', side_effect=runs.NotFound(
            'Run %s has no result /nope' % data.DEPLOY_ID, 404))
        res = self.client.get(reverse(
            'horizon:project:container_runs:result',
            args=(data.DEPLOY_ID, 'nope')))
        self.assertRedirectsNoFollow(res, DETAIL_URL)

    def test_output_download(self):
        self.patch(api, 'run_output', return_value=runs.RunOutput(
            data.OUTPUT, 'finished', True))
        res = self.client.get(reverse(
            'horizon:project:container_runs:output',
            args=(data.DEPLOY_ID,)))
        self.assertEqual(200, res.status_code)
        self.assertEqual(data.OUTPUT.encode(), res.content)
        self.assertEqual('text/plain; charset=utf-8', res['Content-Type'])
        self.assertEqual('attachment; filename="%s-output.txt"'
                         % data.DEPLOY_ID[:8], res['Content-Disposition'])

    def test_output_of_a_missing_run(self):
        self.patch(api, 'run_output', side_effect=runs.NotFound('x', 404))
        res = self.client.get(reverse(
            'horizon:project:container_runs:output',
            args=(data.DEPLOY_ID,)))
        self.assertRedirectsNoFollow(res, INDEX_URL)
