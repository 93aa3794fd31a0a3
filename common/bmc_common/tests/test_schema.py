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

import ast
import os
import sys

import pytest

from bmc_common.tunables import profiles
from bmc_common.tunables import schema
from bmc_common.tunables import TunableError
from bmc_common.tunables import validate


def test_normalises_every_knob():
    knobs = validate({
        'smt': False, 'thp': ' Never', 'thp_defrag': 'defer+madvise',
        'rps_cpus': '0x0f', 'rps_flow_cnt': '32768',
        'rps_sock_flow_entries': 32768,
        'sysctl': {'vm.swappiness': 10, 'net.ipv4.tcp_rmem': [4096, 87380],
                   'kernel.sched_autogroup_enabled': True},
        'cpufreq_governor': 'performance', 'hugepages': '128',
        'numa_balancing': False, 'cpus_online': [3, 1, 2],
        'cpus_offline': '7,6', 'kernel_modules': 'tcp_bbr, erofs tcp_bbr',
        'isolcpus': 'domain,managed_irq,3-5,1-2',
        'nohz_full': '1-N', 'rcu_nocbs': '4,1-3',
        'housekeeping_cpus': 0, 'workload_cpus': '1-N'})
    assert knobs == {
        'kernel_modules': ['tcp_bbr', 'erofs'],
        'cpus_online': '1-3', 'cpus_offline': '6-7', 'smt': 'off',
        'cpufreq_governor': 'performance', 'thp': 'never',
        'thp_defrag': 'defer+madvise', 'hugepages': 128,
        'numa_balancing': 0,
        'sysctl': {'kernel.sched_autogroup_enabled': '1',
                   'net.ipv4.tcp_rmem': '4096 87380',
                   'vm.swappiness': '10'},
        'rps_sock_flow_entries': 32768, 'rps_flow_cnt': {'*': 32768},
        'rps_cpus': {'*': '0-3'}, 'housekeeping_cpus': '0',
        'workload_cpus': '1-N', 'isolcpus': 'domain,managed_irq,1-5',
        'nohz_full': '1-N', 'rcu_nocbs': '1-4'}
    # Idempotent.
    assert validate(knobs) == knobs
    # Applied in this order by the agent.
    assert list(knobs) == [k for k in schema.KNOBS if k in knobs]


@pytest.mark.parametrize('knobs,message', [
    ({'thp_enable': 'never'},
     "container_tunables: unknown knob 'thp_enable' (did you mean 'thp'?)"),
    ({'numa': 1}, "unknown knob 'numa' (did you mean 'numa_balancing'?)"),
    ({'governor': 1}, "(did you mean 'cpufreq_governor'?)"),
    ({'profile': 'rfs'}, "container_tunables: unknown knob 'profile' "
     '(profiles are resolved'),
    ({'thp': 'sometimes'}, "container_tunables/thp: 'sometimes' is not one "
     "of always, madvise, never"),
    ({'thp_defrag': 1}, 'container_tunables/thp_defrag: 1 is not one of'),
    ({'smt': 'maybe'}, "container_tunables/smt: 'maybe' is not one of on, "
     'off, force-off'),
    ({'hugepages': -1}, 'container_tunables/hugepages: -1 is out of range'),
    ({'hugepages': True}, 'container_tunables/hugepages: expected an integ'),
    ({'rps_flow_cnt': 1000}, 'container_tunables/rps_flow_cnt: 1000 is not '
     'a power of two (the kernel rounds it up to 1024'),
    ({'rps_sock_flow_entries': 1 << 30}, 'out of range'),
    ({'rps_flow_cnt': {'eth/0': 4}}, "rps_flow_cnt: 'eth/0' is not a "
     'network interface name'),
    ({'rps_flow_cnt': {'..': 4}}, 'is not a network interface name'),
    ({'rps_cpus': {'eth0': 'most'}}, "container_tunables/rps_cpus.eth0: "
     "'most' is not a CPU list"),
    ({'rps_cpus': '0xzz'}, "rps_cpus: '0xzz' is not a hex CPU mask"),
    ({'sysctl': {'vm/swappiness': 1}}, "container_tunables/sysctl: "
     "'vm/swappiness' is not a sysctl name"),
    ({'sysctl': {'vm..swappiness': 1}}, 'is not a sysctl name'),
    ({'sysctl': {'..': 1}}, 'is not a sysctl name'),
    ({'sysctl': {'swappiness': 1}}, 'is not a sysctl name'),
    ({'sysctl': {'vm.swappiness': 'a\nb'}}, 'container_tunables/sysctl.'
     'vm.swappiness: expected an integer or a one-line string'),
    ({'sysctl': 'vm.swappiness=1'}, 'sysctl: expected a mapping'),
    ({'sysctl': {'kernel.numa_balancing': 0}, 'numa_balancing': 0},
     'kernel.numa_balancing is the knob numa_balancing as well'),
    ({'cpufreq_governor': 'Perf ormance'}, 'is not a cpufreq governor'),
    ({'numa_balancing': 2}, "numa_balancing: 2 is not one of 0, 1"),
    ({'cpus_offline': '0-1'}, 'cpus_offline: CPU 0 is never taken offline'),
    ({'cpus_online': '3-1'}, 'cpus_online: ' "'3-1': range 3-1 goes back"),
    ({'cpus_online': '1', 'cpus_offline': '1-2'}, 'overlaps cpus_online'),
    ({'cpus_online': '9000'}, 'CPU numbers go up to 8191'),
    ({'housekeeping_cpus': '0-1', 'workload_cpus': '1-N'},
     'container_tunables/workload_cpus: 1-N overlaps housekeeping_cpus'),
    ({'housekeeping_cpus': '2', 'cpus_offline': '1-N'},
     'housekeeping_cpus: 2 overlaps cpus_offline'),
    ({'kernel_modules': ['../evil']}, "kernel_modules: '../evil' is not a "
     'kernel module name'),
    ({'isolcpus': 'nohz,fast,1'}, "isolcpus: 'fast' is not an isolcpus "
     'flag'),
    ({'nohz_full': ''}, 'nohz_full: expected a CPU list'),
    (['thp'], 'container_tunables: expected a mapping of knob names'),
])
def test_errors_name_the_knob(knobs, message):
    with pytest.raises(TunableError) as exc:
        validate(knobs)
    assert message in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_none_drops_a_knob():
    assert validate({'thp': None, 'smt': 'on'}) == {'smt': 'on'}
    assert validate(None) == {}


def test_is_runtime():
    assert schema.is_runtime('thp')
    assert schema.is_runtime('smt', 'off')
    assert not schema.is_runtime('smt', 'force-off')
    assert not schema.is_runtime('smt', 'forceoff')
    for name in ('isolcpus', 'nohz_full', 'rcu_nocbs'):
        assert not schema.is_runtime(name)
    with pytest.raises(TunableError, match="unknown knob 'thp_enable'"):
        schema.is_runtime('thp_enable')


def test_split_boot_only():
    runtime, args = schema.split({'smt': 'force-off', 'thp': 'never',
                                  'isolcpus': 'managed_irq,1-N',
                                  'nohz_full': '1-3', 'rcu_nocbs': '1-3'})
    assert runtime == {'thp': 'never'}
    assert args == ['nosmt=force', 'isolcpus=managed_irq,1-N',
                    'nohz_full=1-3', 'rcu_nocbs=1-3']


def test_split_prefer_boot():
    runtime, args = schema.split(
        {'smt': 'off', 'thp': 'never', 'hugepages': 64, 'numa_balancing': 0,
         'cpufreq_governor': 'performance', 'housekeeping_cpus': '0',
         'thp_defrag': 'never', 'rps_cpus': 'all',
         'sysctl': {'vm.swappiness': 10, 'net.ipv4.tcp_rmem': '1 2 3'}},
        prefer_boot=True)
    assert args == ['nosmt', 'cpufreq.default_governor=performance',
                    'transparent_hugepage=never', 'hugepages=64',
                    'numa_balancing=disable', 'sysctl.vm.swappiness=10',
                    'irqaffinity=0']
    assert runtime == {'thp_defrag': 'never', 'rps_cpus': {'*': 'all'},
                       'sysctl': {'net.ipv4.tcp_rmem': '1 2 3'}}


def test_cpulists_and_masks():
    assert schema.format_cpulist(schema.parse_cpulist('5,0-2,3,7-N,9')) \
        == '0-3,5,7-N'
    assert schema.expand_cpulist('1-N', 3) == {1, 2, 3}
    assert schema.cpus_to_mask({0, 1, 2, 3}) == '0000000f'
    assert schema.cpus_to_mask({0, 33}) == '00000002,00000001'
    assert schema.cpus_to_mask(set()) == '00000000'
    assert schema.mask_to_cpus('00000002,00000001') == {0, 33}
    assert schema.mask_to_cpus('0x3') == {0, 1}
    assert schema.cpulists_overlap('0-3', '3-N')
    assert not schema.cpulists_overlap('0', '1-N')


def test_stdlib_only():
    """Conductor and agent ramdisk import this package: standard library
    (and the package itself) only."""
    import bmc_common
    root = os.path.dirname(bmc_common.__file__)
    base = os.path.dirname(schema.__file__)
    checked = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ('tests',
                                                         '__pycache__')]
        for name in filenames:
            if not name.endswith('.py'):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                tree = ast.parse(f.read())
            checked += 1
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    mods = [node.module]
                else:
                    continue
                for mod in mods:
                    top = mod.split('.')[0]
                    assert (top in sys.stdlib_module_names
                            or top == 'bmc_common'), (path, mod)
    assert checked >= 4
    assert profiles.SHIPPED_DIR.startswith(base)
