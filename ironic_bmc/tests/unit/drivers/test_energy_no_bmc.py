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

"""A run's energy on a node without a BMC (Wake-on-LAN): never sampled,
reported in-band (RAPL) only, with the reason; and RAPL kept whenever the
BMC gave nothing."""

import types
from unittest import mock

from ironic_bmc.drivers import energy
from ironic_bmc.drivers import run_close
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

MEASURED = {'state': 'measured', 'joules': 12.5, 'seconds': 5.0,
            'watts': 2.5, 'domains': {'intel-rapl:0/package-0': 12.5}}
ABSENT = {'state': 'absent',
          'reason': '/sys/class/powercap missing: kernel without powercap'}


def _node(power_interface, **driver_info):
    return types.SimpleNamespace(uuid='u', driver='container-wol',
                                 power_interface=power_interface,
                                 driver_info=driver_info)


@mock.patch.object(energy.sampler, 'start', autospec=True)
@mock.patch.object(energy.readers, 'reader_for_node', autospec=True)
def test_wol_node_is_never_sampled(mock_reader, mock_start):
    # (Even with the IPMI fields an earlier driver left.)
    section = energy.start(_node('wol', ipmi_address='127.0.0.1'))
    mock_reader.assert_not_called()
    mock_start.assert_not_called()
    assert section == {
        'available': False,
        'bmc': 'unavailable: no BMC (Wake-on-LAN node)',
        'in_band_only': True,
        'reason': 'no BMC (Wake-on-LAN node): the energy is measured '
                  'in-band only (RAPL)'}


@mock.patch.object(energy.sampler, 'start', autospec=True)
@mock.patch.object(energy.readers, 'reader_for_node', autospec=True)
def test_a_bmc_node_is_still_sampled(mock_reader, mock_start):
    assert energy.start(_node('ipmitool')) is None
    mock_reader.assert_called_once()
    mock_start.assert_called_once()


def test_with_rapl_measured():
    section = energy.with_rapl(energy.in_band_only('Wake-on-LAN node'),
                               MEASURED)
    assert section['rapl']['available'] is True
    assert section['rapl']['joules'] == 12.5
    assert section['rapl_joules_workload'] == 12.5
    assert section['bmc'] == 'unavailable: no BMC (Wake-on-LAN node)'
    assert section['in_band_only'] is True


def test_with_rapl_absent_says_why():
    section = energy.with_rapl(energy.in_band_only('Wake-on-LAN node'),
                               ABSENT)
    assert section['rapl'] == {'available': False,
                               'reason': ABSENT['reason']}
    assert 'rapl_joules_workload' not in section


class FinishTestCase(base.ContainerDeployTestCase):

    def _report(self, section):
        report = run_report.new(self.node, mock.Mock(
            image='i', rootfs='ramfs', mode='job'))
        report['energy'] = section
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        return report

    def test_job_end_keeps_the_reason_and_adds_rapl(self):
        report = self._report(energy.in_band_only('Wake-on-LAN node'))
        with mock.patch.object(energy, 'finish', autospec=True) as finish:
            run_close.finish_energy(self.node, report,
                                    {'rapl': MEASURED})
        finish.assert_not_called()
        section = run_report.get(self.node)['energy']
        self.assertEqual('unavailable: no BMC (Wake-on-LAN node)',
                         section['bmc'])
        self.assertIn('in-band only', section['reason'])
        self.assertIs(False, section['available'])
        self.assertEqual(12.5, section['rapl_joules_workload'])

    def test_bmc_without_readings_keeps_rapl_too(self):
        report = self._report({'available': False,
                               'reason': 'no DCMI power reading'})
        run_close.finish_energy(self.node, report, {'rapl': ABSENT})
        section = run_report.get(self.node)['energy']
        self.assertEqual('no DCMI power reading', section['reason'])
        self.assertEqual({'available': False, 'reason': ABSENT['reason']},
                         section['rapl'])
