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

import pytest

from bmc_common.tunables import profiles
from bmc_common.tunables import schema
from bmc_common.tunables import TunableError

SHIPPED = ['hpc-compute', 'low-noise', 'low-noise-boot', 'rfs',
           'thp-always', 'thp-never']


def write(directory, name, text):
    directory.mkdir(exist_ok=True)
    (directory / (name + '.conf')).write_text(text)


def test_shipped_profiles():
    assert profiles.available() == SHIPPED
    assert profiles.load('hpc-compute') == {
        'smt': 'off', 'cpufreq_governor': 'performance', 'thp': 'always'}
    assert profiles.load('thp-never') == {'thp': 'never'}
    assert profiles.load('thp-always') == {'thp': 'always'}
    assert profiles.load('rfs') == {
        'rps_sock_flow_entries': 32768, 'rps_flow_cnt': {'*': 32768},
        'rps_cpus': {'*': 'all'}}
    low = profiles.load('low-noise')
    assert low == {'thp_defrag': 'never', 'numa_balancing': 0,
                   'housekeeping_cpus': '0', 'workload_cpus': '1-N'}
    # Nothing in low-noise needs a reboot.
    assert schema.split(low) == (low, [])
    boot = profiles.load('low-noise-boot')
    runtime, args = schema.split(boot)
    assert runtime == low
    assert args == ['isolcpus=managed_irq,domain,1-N', 'nohz_full=1-N',
                    'rcu_nocbs=1-N']
    assert profiles.describe('low-noise-boot')['include'] == ['low-noise']


def test_inheritance_and_override_order(tmp_path):
    ops = tmp_path / 'ops'
    write(ops, 'base', '[main]\n[knobs]\nthp = never\nsmt = off\n'
          'sysctl.vm.swappiness = 10\nsysctl.vm.dirty_ratio = 40\n'
          'rps_cpus = all\n')
    write(ops, 'other', '[knobs]\nthp = madvise\nhugepages = 8\n'
          'sysctl.vm.dirty_ratio = 20\n')
    write(ops, 'child', '[main]\ninclude = base, other\n[knobs]\n'
          'smt = on\nsysctl.vm.swappiness = 1\nrps_cpus.eth0 = 0-1\n'
          'hugepages =\n')
    knobs = profiles.load('child', [str(ops)])
    assert knobs == {
        'smt': 'on',                  # child over base
        'thp': 'madvise',             # later parent over earlier
        'sysctl': {'vm.dirty_ratio': '20', 'vm.swappiness': '1'},
        'rps_cpus': {'*': 'all', 'eth0': '0-1'},
    }                                 # hugepages removed by 'hugepages ='
    # resolve: profile, then overrides, dict knobs key by key.
    knobs = profiles.resolve({'profile': 'child', 'thp': 'always',
                              'smt': None,
                              'sysctl': {'vm.swappiness': 5},
                              'rps_cpus': {'eth1': 'none'}}, [str(ops)])
    assert knobs == {
        'thp': 'always',
        'sysctl': {'vm.dirty_ratio': '20', 'vm.swappiness': '5'},
        'rps_cpus': {'*': 'all', 'eth0': '0-1', 'eth1': 'none'},
    }
    # Several profiles, merged in order.
    assert profiles.resolve({'profile': ['thp-never', 'hpc-compute']}) \
        == profiles.load('hpc-compute')


def test_operator_dir_first_and_include_shipped(tmp_path):
    ops = tmp_path / 'ops'
    write(ops, 'rfs', '[main]\ninclude = thp-never\n[knobs]\n'
          'rps_cpus = 0\n')
    assert profiles.load('rfs', [str(ops)]) == {
        'thp': 'never', 'rps_cpus': {'*': '0'}}
    assert 'rfs' in profiles.available([str(ops)])
    assert profiles.load('rfs')['rps_cpus'] == {'*': 'all'}


def test_cycles_refused(tmp_path):
    ops = tmp_path / 'ops'
    write(ops, 'a', '[main]\ninclude = b\n[knobs]\nthp = never\n')
    write(ops, 'b', '[main]\ninclude = c\n')
    write(ops, 'c', '[main]\ninclude = a\n')
    write(ops, 'self', '[main]\ninclude = self\n')
    with pytest.raises(TunableError,
                       match='profile include cycle: a -> b -> c -> a'):
        profiles.load('a', [str(ops)])
    with pytest.raises(TunableError, match='cycle: self -> self'):
        profiles.load('self', [str(ops)])


def test_unknown_profile_lists_available(tmp_path):
    with pytest.raises(TunableError) as exc:
        profiles.resolve('hpc')
    assert str(exc.value) == (
        "container_tunables: unknown profile 'hpc'; available: "
        + ', '.join(SHIPPED))
    with pytest.raises(TunableError, match="unknown profile 'nope'"):
        profiles.resolve({'profile': 'nope'})
    with pytest.raises(TunableError, match="'../etc/x' is not a profile"):
        profiles.load('../etc/x')


def test_bad_profile_files(tmp_path):
    ops = tmp_path / 'ops'
    write(ops, 'typo', '[knobs]\nthp_enabled = never\n')
    write(ops, 'value', '[knobs]\nthp = sometimes\n')
    write(ops, 'section', '[sysctl]\nvm.swappiness = 1\n')
    write(ops, 'whole', '[knobs]\nsysctl = vm.swappiness=1\n')
    write(ops, 'dotted', '[knobs]\nthp.x = never\n')
    write(ops, 'syntax', 'thp = never\n')
    cases = {
        'typo': "container_tunables: profile 'typo': unknown knob "
                "'thp_enabled' (did you mean 'thp'?)",
        'value': "container_tunables: profile 'value': thp: 'sometimes' is "
                 'not one of always, madvise, never',
        'section': "profile 'section': unknown section(s) sysctl",
        'whole': 'sysctl takes one line per setting',
        'dotted': 'thp takes a single value, not thp.x',
        'syntax': "profile 'syntax'",
    }
    for name, message in cases.items():
        with pytest.raises(TunableError) as exc:
            profiles.load(name, [str(ops)])
        assert message in str(exc.value), (name, str(exc.value))


def test_resolve_forms():
    assert profiles.resolve(None) == {}
    assert profiles.resolve('') == {}
    assert profiles.resolve('thp-never') == {'thp': 'never'}
    assert profiles.resolve('{"profile": "thp-never", "smt": "off"}') == {
        'smt': 'off', 'thp': 'never'}
    assert profiles.resolve({'thp': 'never'}) == {'thp': 'never'}
    with pytest.raises(TunableError, match='not valid JSON'):
        profiles.resolve('{"thp":')
    with pytest.raises(TunableError, match='expected a profile name or a '
                       'mapping'):
        profiles.resolve(['thp'])
    with pytest.raises(TunableError, match="unknown knob 'smt_off'"):
        profiles.resolve({'profile': 'thp-never', 'smt_off': None})


def test_merge():
    base = profiles.load('rfs')
    merged = profiles.merge(base, {'rps_cpus': {'eth0': 'none'},
                                   'rps_flow_cnt': None, 'thp': 'never'})
    assert merged == {'thp': 'never', 'rps_sock_flow_entries': 32768,
                      'rps_cpus': {'*': 'all', 'eth0': 'none'}}
    with pytest.raises(TunableError, match="unknown knob 'nope'"):
        profiles.merge(base, {'nope': None})
