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

"""Every knob against a fake sysfs/procfs tree (never the real one)."""

import os
from unittest import mock

import pytest

from ipa_hardware_manager import steps_tunables
from ipa_hardware_manager import tunables
from ipa_hardware_manager.tests import fakesys
from ipa_hardware_manager.tests.fakesys import CPU
from ipa_hardware_manager.tests.fakesys import THP
from bmc_common.tunables import schema


@pytest.fixture
def root(tmp_path):
    return fakesys.make(str(tmp_path / 'root'))


def apply(root, knobs, **host_kwargs):
    host = fakesys.FakeHost(root, **host_kwargs)
    return tunables.apply_all(knobs, host=host), host


# --- single-file knobs: apply, read back, missing, refused -----------------

FILE_KNOBS = [
    # knob, value, path, previous, text after the write
    ('thp', 'never', THP + '/enabled', 'madvise', 'never'),
    ('thp_defrag', 'never', THP + '/defrag', 'madvise', 'never'),
    ('hugepages', 16, 'proc/sys/vm/nr_hugepages', 0, '16'),
    ('numa_balancing', 0, 'proc/sys/kernel/numa_balancing', 1, '0'),
    ('rps_sock_flow_entries', 32768,
     'proc/sys/net/core/rps_sock_flow_entries', 0, '32768'),
    ('smt', 'off', CPU + '/smt/control', 'on', 'off'),
]


@pytest.mark.parametrize('knob,value,path,previous,text', FILE_KNOBS)
def test_file_knob_applied(root, knob, value, path, previous, text):
    hooks = {CPU + '/smt/control': lambda v: v}
    if knob == 'smt':
        # The kernel parks the siblings: smt/active drops to 0.
        def hook(v):
            with open(os.path.join(root, CPU, 'smt/active'), 'w') as f:
                f.write('0' if v == 'off' else '1')
            return v
        hooks = {path: hook}
    results, host = apply(root, {knob: value}, hooks=hooks)
    res = results[knob]
    assert res['ok'] is True, res
    assert res['supported'] is True
    assert res['previous'] == previous
    assert res['actual'] == value
    assert fakesys.read(root, path) == text


@pytest.mark.parametrize('knob,value,path,previous,text', FILE_KNOBS)
def test_file_knob_missing_is_unsupported(tmp_path, knob, value, path,
                                          previous, text):
    root = fakesys.make(str(tmp_path), drop=[path])
    res = apply(root, {knob: value})[0][knob]
    assert res['supported'] is False
    assert res['ok'] is False
    assert res['reason'].startswith('/%s missing: ' % path)


@pytest.mark.parametrize('knob,value,path,previous,text', FILE_KNOBS)
def test_file_knob_refused(root, knob, value, path, previous, text):
    results, _ = apply(root, {knob: value, 'thp_defrag': 'defer'}
                       if knob != 'thp_defrag' else {knob: value},
                       refuse={path: fakesys.EINVAL})
    res = results[knob]
    assert res['ok'] is False and res['supported'] is True
    assert 'Invalid argument' in res['error'] and path in res['error']
    assert res['actual'] == previous
    if knob != 'thp_defrag':
        # The other knob was still applied.
        assert results['thp_defrag']['ok'] is True


def test_thp_bracket_format(root):
    hook = fakesys.thp_hook(('always', 'madvise', 'never'))
    res = apply(root, {'thp': 'always'},
                hooks={THP + '/enabled': hook})[0]['thp']
    assert res['ok'] and res['actual'] == 'always'
    assert fakesys.read(root, THP + '/enabled') == '[always] madvise never'


def test_reapply_writes_nothing(root):
    results, host = apply(root, {'thp': 'madvise', 'numa_balancing': 1})
    assert all(r['ok'] for r in results.values())
    assert host.writes == []


def test_hugepages_partial_allocation(root):
    res = apply(root, {'hugepages': 64},
                hooks={'proc/sys/vm/nr_hugepages': lambda v: '40'})[0]
    assert res['hugepages']['ok'] is False
    assert 'allocated 40 of 64' in res['hugepages']['error']


# --- SMT ---------------------------------------------------------------------

def test_smt_notsupported(tmp_path):
    root = fakesys.make(str(tmp_path),
                        {CPU + '/smt/control': 'notsupported'})
    res = apply(root, {'smt': 'off'})[0]['smt']
    assert res['supported'] is False
    assert "reads 'notsupported'" in res['reason']


def test_smt_on_when_forced_off(tmp_path):
    root = fakesys.make(str(tmp_path), {CPU + '/smt/control': 'forceoff',
                                        CPU + '/smt/active': '0'})
    results, host = apply(root, {'smt': 'on'})
    assert results['smt']['ok'] is False
    assert 'nosmt=force' in results['smt']['error']
    # off is already true: nothing written, ok.
    results, host = apply(root, {'smt': 'off'})
    assert results['smt']['ok'] is True and host.writes == []


def test_smt_active_checked(root):
    res = apply(root, {'smt': 'off'})[0]['smt']
    assert res['ok'] is False
    assert 'smt/active still reads 1' in res['error']


# --- cpufreq -----------------------------------------------------------------

def test_governor_every_cpu(root):
    res = apply(root, {'cpufreq_governor': 'performance'})[0]
    res = res['cpufreq_governor']
    assert res['ok'] and res['previous'] == 'schedutil'
    assert res['actual'] == 'performance'
    for cpu in range(4):
        assert fakesys.read(
            root, '%s/cpu%d/cpufreq/scaling_governor' % (CPU, cpu)
        ) == 'performance'


def test_governor_unavailable_tries_module(root):
    run = mock.Mock(return_value=(1, 'FATAL: Module not found'))
    res = apply(root, {'cpufreq_governor': 'ondemand'}, run=run)[0]
    res = res['cpufreq_governor']
    assert run.call_args[0][0] == ['modprobe', 'cpufreq_ondemand']
    assert res['ok'] is False
    assert "governor 'ondemand' is not available" in res['error']


def test_governor_no_cpufreq(tmp_path):
    root = fakesys.make(str(tmp_path), drop=['%s/cpu%d/cpufreq' % (CPU, c)
                                             for c in range(4)])
    res = apply(root, {'cpufreq_governor': 'performance'})[0]
    assert res['cpufreq_governor']['supported'] is False
    assert 'no cpufreq driver' in res['cpufreq_governor']['reason']


def test_governor_refused_on_one_cpu(root):
    path = CPU + '/cpu2/cpufreq/scaling_governor'
    res = apply(root, {'cpufreq_governor': 'performance'},
                refuse={path: fakesys.EINVAL})[0]['cpufreq_governor']
    assert res['ok'] is False and path in res['error']
    assert res['actual']['cpu2'] == 'schedutil'
    assert res['actual']['cpu1'] == 'performance'


# --- CPU hotplug -------------------------------------------------------------

def test_cpus_offline_and_online(root):
    res = apply(root, {'cpus_offline': '2-N'})[0]['cpus_offline']
    assert res['ok'] and res['previous'] == '0-3' and res['actual'] == '0-1'
    assert fakesys.read(root, CPU + '/cpu3/online') == '0'
    res = apply(root, {'cpus_online': '3'})[0]['cpus_online']
    assert res['ok'] and res['actual'] == '0-1,3'


def test_cpus_offline_missing_cpu(root):
    res = apply(root, {'cpus_offline': '3,7'})[0]['cpus_offline']
    assert res['ok'] is False and 'cpu7 does not exist' in res['error']
    assert res['actual'] == '0-2'


def test_cpus_offline_refused(root):
    res = apply(root, {'cpus_offline': '1'},
                refuse={CPU + '/cpu1/online': fakesys.EIO})[0]
    assert res['cpus_offline']['ok'] is False
    assert 'Input/output error' in res['cpus_offline']['error']
    assert 'still online' in res['cpus_offline']['error']


def test_cpus_hotplug_unsupported(tmp_path):
    root = fakesys.make(str(tmp_path), drop=[CPU + '/online'])
    res = apply(root, {'cpus_online': '1'})[0]['cpus_online']
    assert res['supported'] is False and 'hotplug' in res['reason']


# --- sysctl and modules ------------------------------------------------------

def test_sysctl(root):
    res = apply(root, {'sysctl': {'vm.swappiness': 10,
                                  'net.ipv4.tcp_rmem': [4096, 87380,
                                                        6291456]}})[0]
    res = res['sysctl']
    assert res['ok'], res
    assert res['previous']['vm.swappiness'] == '60'
    assert res['actual'] == {'vm.swappiness': '10',
                             'net.ipv4.tcp_rmem': '4096 87380 6291456'}
    assert fakesys.read(root, 'proc/sys/vm/swappiness') == '10'


def test_sysctl_missing_key_does_not_stop_others(root):
    res = apply(root, {'sysctl': {'vm.swappiness': 5,
                                  'vm.nosuch': 1}})[0]['sysctl']
    assert res['ok'] is False and res['supported'] is True
    assert 'vm.nosuch: no such sysctl' in res['error']
    assert res['actual']['vm.swappiness'] == '5'


def test_sysctl_all_missing_unsupported(root):
    res = apply(root, {'sysctl': {'vm.nosuch': 1}})[0]['sysctl']
    assert res['supported'] is False and 'vm.nosuch' in res['reason']


def test_sysctl_refused(root):
    res = apply(root, {'sysctl': {'vm.swappiness': 5}},
                refuse={'proc/sys/vm/swappiness': fakesys.EINVAL})[0]
    assert res['sysctl']['ok'] is False
    assert 'Invalid argument' in res['sysctl']['error']


def test_kernel_modules(root):
    def run(cmd):
        os.makedirs(os.path.join(root, 'sys/module',
                                 cmd[1].replace('-', '_')))
        return 0, ''
    res = apply(root, {'kernel_modules': ['tcp-bbr']},
                run=mock.Mock(side_effect=run))[0]['kernel_modules']
    assert res['ok'] and res['previous'] == {'tcp-bbr': 'absent'}
    assert res['actual'] == {'tcp-bbr': 'loaded'}


def test_kernel_modules_builtin(root):
    release = os.uname().release
    path = os.path.join(root, 'lib/modules', release)
    os.makedirs(path)
    with open(os.path.join(path, 'modules.builtin'), 'w') as f:
        f.write('kernel/fs/erofs/erofs.ko\n')
    res = apply(root, {'kernel_modules': 'erofs'},
                run=mock.Mock(return_value=(0, '')))[0]['kernel_modules']
    assert res['ok'] and res['actual'] == {'erofs': 'builtin'}


def test_kernel_modules_fail(root):
    run = mock.Mock(return_value=(1, 'modprobe: FATAL: Module nope not '
                                     'found'))
    res = apply(root, {'kernel_modules': ['nope']}, run=run)[0]
    assert res['kernel_modules']['ok'] is False
    assert 'modprobe nope failed (exit 1)' in res['kernel_modules']['error']
    run = mock.Mock(side_effect=FileNotFoundError(2, 'No such file'))
    res = apply(root, {'kernel_modules': ['nope']}, run=run)[0]
    assert 'cannot run modprobe' in res['kernel_modules']['error']


# --- RPS / RFS ---------------------------------------------------------------

def test_rps_all_queues_of_every_nic(root):
    res = apply(root, {'rps_cpus': 'all', 'rps_flow_cnt': 32768})[0]
    assert res['rps_cpus']['ok'], res
    assert res['rps_cpus']['actual'] == {'eth0/rx-0': '0-3',
                                         'eth0/rx-1': '0-3'}
    for queue in ('rx-0', 'rx-1'):
        base = 'sys/class/net/eth0/queues/%s/' % queue
        assert fakesys.read(root, base + 'rps_cpus') == '0000000f'
        assert fakesys.read(root, base + 'rps_flow_cnt') == '32768'
    # lo is not a NIC.
    assert fakesys.read(root, 'sys/class/net/lo/queues/rx-0/rps_cpus') == '0'
    assert res['rps_flow_cnt']['ok']


def test_rps_per_nic_override(root):
    res = apply(root, {'rps_cpus': {'*': 'none', 'lo': '0x2'}})[0]
    assert res['rps_cpus']['ok'], res
    assert res['rps_cpus']['actual']['lo/rx-0'] == '1'
    assert res['rps_cpus']['actual']['eth0/rx-1'] == 'none'


def test_rps_unknown_nic(root):
    res = apply(root, {'rps_cpus': {'eth9': 'all'}})[0]['rps_cpus']
    assert res['ok'] is False and 'no network interface eth9' in res['error']


def test_rps_no_nic(tmp_path):
    root = fakesys.make(str(tmp_path), drop=['sys/class/net/eth0'])
    res = apply(root, {'rps_cpus': 'all'})[0]['rps_cpus']
    assert res['supported'] is False
    assert 'no network interface to tune' in res['reason']


def test_rps_missing_files(tmp_path):
    root = fakesys.make(str(tmp_path), drop=[
        'sys/class/net/eth0/queues/rx-0/rps_cpus',
        'sys/class/net/eth0/queues/rx-1/rps_cpus'])
    res = apply(root, {'rps_cpus': 'all'})[0]['rps_cpus']
    assert res['supported'] is False and 'CONFIG_RPS' in res['reason']


def test_rps_refused(root):
    path = 'sys/class/net/eth0/queues/rx-1/rps_flow_cnt'
    res = apply(root, {'rps_flow_cnt': 4096},
                refuse={path: fakesys.EINVAL})[0]['rps_flow_cnt']
    assert res['ok'] is False and path in res['error']
    assert res['actual'] == {'eth0/rx-0': 4096, 'eth0/rx-1': 0}


# --- boot-time knobs ---------------------------------------------------------

def test_boot_knob_refused_at_runtime(root):
    results, host = apply(root, {'isolcpus': '1-3', 'thp': 'never'})
    res = results['isolcpus']
    assert res['ok'] is False and res['boot'] is True
    assert res['error'].startswith(
        'isolcpus needs a reboot; ask for it at deploy time')
    assert 'isolcpus=1-3' in res['error']
    assert results['thp']['ok'] is True
    assert all(not w[0].startswith('proc/cmdline') for w in host.writes)


def test_boot_knobs_verified_on_cmdline(tmp_path):
    root = fakesys.make(str(tmp_path), {
        'proc/cmdline': 'console=ttyS0 isolcpus=managed_irq,domain,1-N '
                        'nohz_full=1-N rcu_nocbs=1-N nosmt=force',
        CPU + '/isolated': '1-3',
        CPU + '/smt/control': 'forceoff'})
    results, _ = apply(root, {'isolcpus': 'managed_irq,domain,1-N',
                              'nohz_full': '1-N', 'rcu_nocbs': '1-N',
                              'smt': 'force-off'})
    assert results['isolcpus']['ok'] is True
    assert results['rcu_nocbs']['ok'] is True
    assert results['smt']['ok'] is True
    # No /sys/devices/system/cpu/nohz_full: the kernel ignored it.
    assert results['nohz_full']['ok'] is False
    assert 'CONFIG_NO_HZ_FULL' in results['nohz_full']['error']


# --- housekeeping / workload CPUs -------------------------------------------

def _affinity(root, pid=4242, tids=(4242, 4243)):
    for tid in tids:
        os.makedirs(os.path.join(root, 'proc/%d/task/%d' % (pid, tid)))
    state = {'cpus': {0, 1, 2, 3}}
    setaff = mock.Mock(side_effect=lambda tid, cpus: state.update(
        cpus=set(cpus)))
    return {'pid': pid, 'setaffinity': setaff,
            'getaffinity': lambda pid: state['cpus']}


def test_low_noise_partition(root, tmp_path):
    kwargs = _affinity(root)
    host = fakesys.FakeHost(root, refuse={'proc/irq/0/smp_affinity_list':
                                          fakesys.EIO}, **kwargs)
    state = str(tmp_path / 'state')
    results = tunables.apply_all({'housekeeping_cpus': '0',
                                  'workload_cpus': '1-N'}, host=host,
                                 state_dir=state)
    hk, wl = results['housekeeping_cpus'], results['workload_cpus']
    assert hk['ok'], hk
    assert hk['previous'] == {'agent_cpus': '0-3'}
    assert hk['actual']['agent_threads']['confined'] == 2
    assert hk['actual']['agent_threads']['agent_cpus'] == '0'
    assert hk['actual']['irqs'] == {
        'moved': 3, 'refused': 1, 'refused_irqs': {'0': 'Input/output error'}}
    assert hk['actual']['default_smp_affinity'] == '0'
    assert fakesys.read(root, 'proc/irq/default_smp_affinity') == '00000001'
    assert fakesys.read(root, 'proc/irq/24/smp_affinity_list') == '0'
    assert hk['actual']['workqueue_cpumask'] == '0'
    # The NodeOS partitions, read back from the cgroup files.
    assert host.commands == [
        ['systemctl', 'set-property', '--runtime', '--', unit,
         'AllowedCPUs=0']
        for unit in ('init.scope', 'system.slice', 'user.slice')]
    assert hk['actual']['services'] == {
        'cpus_effective': {'init.scope': '0', 'system.slice': '0',
                           'user.slice': '0'},
        'ok': True, 'memory_current': 41943040}
    assert wl['ok'], wl
    assert wl['actual'] == {'cpus': '1-3', 'cgroup': '/bmc-workload',
                            'cpus_effective': '1-3', 'mems_effective': '0',
                            'partition': 'root', 'exclusive': True,
                            'ok': True}
    assert fakesys.read(root, CG + '/bmc-workload/cpuset.mems') == '0'
    assert (CG + '/cgroup.subtree_control', '+cpuset') in host.writes
    kwargs['setaffinity'].assert_any_call(4243, {0})
    assert tunables.workload_cpus(state) == {1, 2, 3}
    assert tunables.load_state(state)['results']['workload_cpus']['ok']


CG = fakesys.CG


def _low_noise(root, **host_kwargs):
    kwargs = dict(_affinity(root), **host_kwargs)
    results, host = apply(root, {'housekeeping_cpus': '0',
                                 'workload_cpus': '1-N'}, **kwargs)
    return results['housekeeping_cpus'], results['workload_cpus'], host


def test_partition_services_not_confined(root):
    # systemd accepted the property but a unit kept every CPU.
    hk, wl, _ = _low_noise(root, systemctl=(0, ''), refuse={})
    assert hk['ok'] is False
    assert hk['error'] == ('init.scope, system.slice, user.slice not '
                           'confined to CPUs 0')
    assert hk['actual']['services']['cpus_effective']['system.slice'] == \
        '0-3'
    assert wl['ok']


def test_partition_systemctl_fails(root):
    hk, _, _ = _low_noise(root, systemctl=(1, 'Unknown assignment'))
    assert hk['ok'] is False
    assert ('systemctl set-property system.slice AllowedCPUs=0: Unknown '
            'assignment' in hk['error'])


def test_partition_root_refused_by_the_kernel(root):
    hk, wl, host = _low_noise(root, partition=(
        'root invalid (Cpu list in cpuset.cpus not exclusive)'))
    # Still the workload's CPUs, only not exclusive: said, not failed.
    assert wl['ok'] and hk['ok']
    assert wl['actual']['exclusive'] is False
    assert wl['actual']['partition'] == 'member'
    assert 'not exclusive' in wl['actual']['partition_error']


def test_partition_workload_cgroup_refused(root):
    _, wl, _ = _low_noise(root, refuse={CG + '/bmc-workload/cpuset.cpus':
                                        fakesys.EINVAL})
    assert wl['ok'] is False
    assert wl['error'].startswith('the workload cgroup /bmc-workload: '
                                  "writing '1-3' to /sys/fs/cgroup/")


def test_partition_without_systemd(tmp_path):
    root = fakesys.make(str(tmp_path), drop=('run/systemd',))
    hk, wl, host = _low_noise(root)
    assert host.commands == []
    assert hk['actual']['services'] == {
        'supported': False, 'ok': False,
        'reason': 'systemd does not run here: the services cannot be '
                  'confined (only the agent is)'}
    assert hk['ok'] and wl['ok']


def test_partition_without_cgroup2(tmp_path):
    root = fakesys.make(str(tmp_path), drop=(CG,))
    hk, wl, _ = _low_noise(root)
    assert hk['actual']['services']['supported'] is False
    assert wl['ok'] is False
    assert wl['error'] == (
        'the workload CPUs cannot be given to a cgroup and read back: '
        '/sys/fs/cgroup is not a cgroup v2 (unified) hierarchy')


def test_partitions_read_back_while_running(root):
    from ipa_hardware_manager import nodeos
    _, _, host = _low_noise(root)
    affinity = {'cpus': {1, 2, 3}}
    host.getaffinity = lambda pid: affinity['cpus']
    back = nodeos.read_back(host, {0}, {1, 2, 3}, pid=77)
    assert back['housekeeping_cpus']['ok']
    assert back['workload_cpus'] == {
        'cgroup': '/bmc-workload', 'cpus_effective': '1-3',
        'mems_effective': '0', 'partition': 'root', 'affinity': '1-3',
        'ok': True}
    affinity['cpus'] = {0, 1, 2, 3}
    back = nodeos.read_back(host, {0}, {1, 2, 3}, pid=77)
    assert back['workload_cpus']['ok'] is False
    assert back['workload_cpus']['error'] == (
        'the workload should own CPUs 1-3: its init runs on CPUs 0-3')


def test_partition_workload_derived(root):
    kwargs = _affinity(root)
    results, _ = apply(root, {'housekeeping_cpus': '0-1'}, **kwargs)
    assert 'workload_cpus' not in results
    assert results['housekeeping_cpus']['ok']


def test_partition_without_affinity_control_says_so(root):
    results, _ = apply(root, {'housekeeping_cpus': '0'})
    threads = results['housekeeping_cpus']['actual']['agent_threads']
    assert threads['note'] == 'no affinity control on a fake root'


def test_partition_no_workload_cpu_online(tmp_path):
    root = fakesys.make(str(tmp_path), {CPU + '/online': '0',
                                        CPU + '/possible': '0'})
    results, _ = apply(root, {'housekeeping_cpus': '0',
                              'workload_cpus': '1-N'})
    assert results['workload_cpus']['ok'] is False
    assert 'no workload CPU online' in results['workload_cpus']['error']


def test_partition_refused_default_affinity(root):
    kwargs = _affinity(root)
    results, _ = apply(root, {'housekeeping_cpus': '0'},
                       refuse={'proc/irq/default_smp_affinity':
                               fakesys.EINVAL}, **kwargs)
    hk = results['housekeeping_cpus']
    assert hk['ok'] is False and 'default_smp_affinity' in hk['error']


# --- apply_all and the step --------------------------------------------------

def test_apply_all_validates_first(root):
    with pytest.raises(schema.TunableError, match="unknown knob 'thp_on'"):
        apply(root, {'thp': 'never', 'thp_on': 1})
    assert fakesys.read(root, THP + '/enabled') == 'always [madvise] never'


def test_unexpected_error_is_contained(root):
    with mock.patch.object(tunables.ThpKnob, 'run',
                           side_effect=RuntimeError('boom')):
        results, _ = apply(root, {'thp': 'never', 'numa_balancing': 0})
    assert results['thp']['ok'] is False
    assert results['thp']['error'] == 'internal error: boom'
    assert results['numa_balancing']['ok'] is True


def test_summary(root):
    results, _ = apply(root, {'thp': 'never', 'isolcpus': '1',
                              'sysctl': {'vm.nosuch': 1}})
    assert tunables.summary(results) == {'failed': ['isolcpus'],
                                         'unsupported': ['sysctl']}


def test_step_apply_tunables(root):
    node = {'instance_info': {'container_tunables': {'profile': 'rfs',
                                                     'thp': 'never'}}}
    with mock.patch.object(tunables.base, 'Host',
                           lambda r: fakesys.FakeHost(r)):
        out = steps_tunables.bmc_apply_tunables(node, [], root=root)
    assert set(out['tunables']) == {'thp', 'rps_sock_flow_entries',
                                    'rps_flow_cnt', 'rps_cpus'}
    assert out['failed'] == [] and out['unsupported'] == []
    assert out['stages'][0]['name'] == 'tunables-applied'


def test_step_apply_tunables_errors(root):
    from ironic_python_agent import errors
    with pytest.raises(errors.DeploymentError,
                       match="bmc_apply_tunables: container_tunables/thp: "
                             "'sometimes' is not one of"):
        steps_tunables.bmc_apply_tunables({}, [], {'thp': 'sometimes'},
                                          root=root)
    with pytest.raises(errors.DeploymentError, match='not applied: smt'):
        steps_tunables.bmc_apply_tunables(
            {}, [], {'smt': 'off'}, strict='true', root=root)
