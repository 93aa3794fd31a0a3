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

"""The conductor's samples are split between the plugin and Ironic."""

from bmc_lab import cpu_profile

ROOT = ('process 1:"ironic-conductor";run (futurist/_utils.py:67);'
        'wrapped (ironic/common/metrics.py:61)')
HEARTBEAT = ROOT + (
    ';heartbeat (ironic_bmc/drivers/container_deploy.py:430)'
    ';HeartbeatMixin.heartbeat (ironic/drivers/modules/agent_base.py:700)')
# py-spy's raw format: a stack (root first), a space, a sample count.
RAW = [
    # Ironic's heartbeat machinery, called through the plugin's override.
    HEARTBEAT + ';save (ironic/objects/node.py:500) 50\n',
    # ... which runs the plugin's step: the plugin's again.
    HEARTBEAT + (';process_next_step (ironic/drivers/modules/agent_base.py'
                 ':1100);after_stage_rootfs (ironic_bmc/drivers/'
                 'step_hooks.py:70);update (ironic_bmc/report.py:66);'
                 '_write (ironic_bmc/report.py:80) 20\n'),
    # The plugin's own work in its own step.
    ROOT + (';deploy (ironic_bmc/drivers/container_deploy.py:190);'
            'prepare (ironic_bmc/drivers/boot_files.py:180);'
            'render (ironic/common/pxe_utils.py:300) 10\n'),
    # A power action the plugin asks for is Ironic's.
    ROOT + (';deploy (ironic_bmc/drivers/container_deploy.py:220);'
            'node_power_action (ironic/conductor/utils.py:300) 10\n'),
    # Ironic's periodic tasks.
    ROOT + ';_sync_power_states (ironic/conductor/manager.py:1500) 10\n',
    'a line that is not a sample\n',
]


def test_owner_follows_the_innermost_switch():
    assert cpu_profile.owner(RAW[0].rsplit(' ', 1)[0].split(';')) == (
        'ironic')
    assert cpu_profile.owner(RAW[1].rsplit(' ', 1)[0].split(';')) == (
        'plugin')


def test_shares_and_where_the_plugin_spends():
    got = cpu_profile.shares(RAW)
    assert got['samples'] == 100
    assert got['plugin'] == 0.3
    assert got['ironic'] == 0.7
    assert got['plugin_top'][0] == (
        '_write (ironic_bmc/report.py)', 0.2)
    assert got['plugin_top'][1] == (
        'prepare (ironic_bmc/drivers/boot_files.py)', 0.1)


def test_no_samples_is_an_error_not_a_zero():
    assert cpu_profile.shares(['garbage\n']) == {'error': 'no samples'}


def test_two_conductors_weigh_by_their_samples():
    one = {'samples': 300, 'plugin': 0.1, 'ironic': 0.9,
           'plugin_top': [('f', 0.1)]}
    two = {'samples': 100, 'plugin': 0.5, 'ironic': 0.5,
           'plugin_top': [('f', 0.3), ('g', 0.2)]}
    got = cpu_profile.combine([one, two, {'error': 'not sampled'}])
    assert got['samples'] == 400
    assert got['plugin'] == 0.2
    assert got['plugin_top'] == [('f', 0.15), ('g', 0.05)]


def test_without_py_spy_the_reason_is_kept(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu_profile, '_py_spy', lambda: None)
    sampler = cpu_profile.Sampler(1, str(tmp_path / 'p.raw'))
    assert sampler.stop() == {'error': 'py-spy is not installed'}
