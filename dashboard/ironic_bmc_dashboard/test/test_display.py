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

"""What a run's page makes of a report."""

from unittest import mock

from django import test

from ironic_bmc_client import charts
from ironic_bmc_dashboard.content.container_runs import display
from ironic_bmc_dashboard.test import data


class DisplayTests(test.SimpleTestCase):

    def test_tunables_statuses(self):
        report = data.report('i', tunables={
            'thp': {'requested': 'never', 'actual': 'never', 'ok': True},
            'swappiness': {'requested': 10, 'actual': 60, 'ok': True},
            'workload_cpus': {'ok': False, 'error': 'no such CPU',
                              'requested': {'cpus': '9'}},
            'hugepages': {'supported': False, 'reason': 'no hugetlbfs'},
            'legacy': 'x'})
        rows = {row['knob']: row for row in display.tunables(report)}
        self.assertEqual(
            {'thp': ('ok', True), 'swappiness': ('mismatch', False),
             'workload_cpus': ('not applied', False),
             'hugepages': ('unsupported', None), 'legacy': ('ok', True)},
            {k: (str(r['status']), r['ok']) for k, r in rows.items()})
        self.assertEqual('{"cpus": "9"}', rows['workload_cpus']['requested'])
        self.assertEqual('no such CPU', rows['workload_cpus']['why'])

    def test_summary_of_a_node_without_bmc(self):
        report = data.report('i', energy={
            'available': False, 'in_band_only': True,
            'reason': 'no BMC (Wake-on-LAN node)',
            'rapl_joules_workload': 1234.4})
        rows = {str(k): v for k, v in display.summary(report)}
        self.assertEqual('no BMC (Wake-on-LAN node)', rows['BMC energy'])
        self.assertEqual('1,234 J', rows['RAPL energy'])
        self.assertEqual('0', str(rows['Exit code']))

    def test_long_output_shows_its_end(self):
        text = 'a' * display.OUTPUT_SHOWN + 'the end'
        shown = display.output(text, True)
        self.assertTrue(shown['cut'])
        self.assertTrue(shown['text'].endswith('the end'))
        self.assertEqual(display.OUTPUT_SHOWN, len(shown['text']))

    def test_chart_is_inline_svg(self):
        chart = display.chart(data.report('i'), 'power', 'Power',
                              'power_curve')
        self.assertTrue(chart['svg'].startswith(
            '<svg class="bmc-chart bmc-chart-power" role="img" '))
        self.assertIn('.bmc-chart *{stroke-linejoin', chart['svg'])
        self.assertIsNone(chart['reason'])

    def test_chart_unavailable_says_why(self):
        with mock.patch.object(charts, 'stage_timeline', side_effect=(
                charts.ChartUnavailable('no stages recorded yet'))):
            chart = display.chart(data.report('i'), 'timeline', 'T',
                                  'stage_timeline')
        self.assertIsNone(chart['svg'])
        self.assertEqual('no stages recorded yet', chart['reason'])

    def test_active_svg_is_not_inlined(self):
        svg = b'<?xml version="1.0"?>\n<svg onload="alert(1)"></svg>'
        with mock.patch.object(charts, 'power_curve', return_value=svg):
            chart = display.chart(data.report('i'), 'power', 'P',
                                  'power_curve')
        self.assertIsNone(chart['svg'])
        self.assertEqual('The chart could not be shown.',
                         str(chart['reason']))
