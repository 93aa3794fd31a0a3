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

"""A fake sysfs/procfs tree of a 4-CPU machine with one 2-queue NIC."""

import errno
import os

from ipa_hardware_manager import tunables_base

CPU = 'sys/devices/system/cpu'
THP = 'sys/kernel/mm/transparent_hugepage'

FILES = {
    CPU + '/online': '0-3',
    CPU + '/possible': '0-3',
    CPU + '/present': '0-3',
    CPU + '/smt/control': 'on',
    CPU + '/smt/active': '1',
    CPU + '/isolated': '',
    THP + '/enabled': 'always [madvise] never',
    THP + '/defrag': 'always defer defer+madvise [madvise] never',
    'proc/sys/vm/nr_hugepages': '0',
    'proc/sys/vm/swappiness': '60',
    'proc/sys/net/ipv4/tcp_rmem': '4096\t131072\t6291456',
    'proc/sys/kernel/numa_balancing': '1',
    'proc/sys/net/core/rps_sock_flow_entries': '0',
    'proc/cmdline': 'BOOT_IMAGE=/vmlinuz console=ttyS0',
    'proc/irq/default_smp_affinity': 'f',
    'sys/devices/virtual/workqueue/cpumask': 'f',
    'sys/class/net/eth0/device/vendor': '0x1af4',
    'sys/class/net/lo/queues/rx-0/rps_cpus': '0',
}
# cgroup v2 with systemd: the root cgroup and the units of the services.
CG = 'sys/fs/cgroup'
FILES.update({
    'run/systemd/system/.keep': '',
    CG + '/cgroup.controllers': 'cpuset cpu io memory hugetlb pids',
    CG + '/cgroup.subtree_control': 'cpu memory pids',
    CG + '/cpuset.cpus.effective': '0-3',
    CG + '/cpuset.mems.effective': '0',
})
SERVICE_UNITS = ('init.scope', 'system.slice', 'user.slice')
for _unit in SERVICE_UNITS:
    FILES[CG + '/%s/cpuset.cpus' % _unit] = ''
    FILES[CG + '/%s/cpuset.cpus.effective' % _unit] = '0-3'
    FILES[CG + '/%s/cpuset.mems' % _unit] = ''
    FILES[CG + '/%s/cpuset.mems.effective' % _unit] = '0'
FILES[CG + '/system.slice/memory.current'] = '41943040'
for _cpu in range(4):
    FILES['%s/cpu%d/cpufreq/scaling_governor' % (CPU, _cpu)] = 'schedutil'
    FILES['%s/cpu%d/cpufreq/scaling_available_governors' % (CPU, _cpu)] = (
        'performance powersave schedutil')
    if _cpu:
        FILES['%s/cpu%d/online' % (CPU, _cpu)] = '1'
for _queue in ('rx-0', 'rx-1'):
    FILES['sys/class/net/eth0/queues/%s/rps_cpus' % _queue] = '00000000'
    FILES['sys/class/net/eth0/queues/%s/rps_flow_cnt' % _queue] = '0'
for _irq in ('0', '1', '24', '25'):
    FILES['proc/irq/%s/smp_affinity_list' % _irq] = '0-3'


def make(root, files=None, drop=()):
    """Write the fake tree under ``root``; return ``root``."""
    for rel, text in dict(FILES, **(files or {})).items():
        if any(rel == d or rel.startswith(d + '/') for d in drop):
            continue
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text + '\n')
    return root


def read(root, rel):
    with open(os.path.join(root, rel)) as f:
        return f.read().strip()


class FakeHost(tunables_base.Host):
    """A Host over the fake tree that behaves a little like the kernel.

    ``refuse``: {path: errno} writes that fail; ``hooks``: {path:
    fn(value) -> text} what the kernel shows after a write.
    """

    def __init__(self, root, refuse=None, hooks=None, partition=None,
                 systemctl=None, **kwargs):
        kwargs.setdefault('run', self._run)
        super().__init__(root, **kwargs)
        self.refuse = dict(refuse or {})
        self.hooks = dict(hooks or {})
        self.writes = []
        self.commands = []
        #: What the kernel makes of ``cpuset.cpus.partition = root``.
        self.partition = partition or 'root'
        #: (exit code, output) of systemctl; None: it works.
        self.systemctl = systemctl

    def _run(self, cmd):
        """systemctl set-property AllowedCPUs=, as systemd does it."""
        self.commands.append(list(cmd))
        if cmd[0] != 'systemctl':
            return 127, '%s: not found' % cmd[0]
        if self.systemctl:
            return self.systemctl
        unit = cmd[4]
        for arg in cmd[5:]:
            if '=' not in arg:
                return 1, 'Not an assignment: %s' % arg
            if arg.startswith('AllowedCPUs='):
                self.write('%s/%s/cpuset.cpus' % (CG, unit),
                           arg.split('=', 1)[1])
        return 0, ''

    def mkdir(self, rel):
        super().mkdir(rel)
        if rel.startswith(CG + '/'):
            for name, text in (('cpuset.cpus', ''), ('cpuset.mems', ''),
                               ('cpuset.cpus.partition', 'member')):
                with open(self.path(rel + '/' + name), 'w') as f:
                    f.write(text + '\n')
            self._effective(rel)

    def _effective(self, cgroup):
        """cpuset.*.effective of a cgroup: its own sets, or its parent's."""
        for kind in ('cpus', 'mems'):
            own = read(self.root, '%s/cpuset.%s' % (cgroup, kind))
            value = own or read(self.root, '%s/cpuset.%s.effective'
                                % (CG, kind))
            with open(self.path('%s/cpuset.%s.effective' % (cgroup, kind)),
                      'w') as f:
                f.write(value + '\n')

    def write(self, rel, value):
        rel = rel.lstrip('/')
        if rel in self.refuse:
            code = self.refuse[rel]
            raise tunables_base.KnobError('writing %r to %s: %s' % (
                str(value), self.show(rel), os.strerror(code))) from OSError(
                code, os.strerror(code))
        super().write(rel, value)
        self.writes.append((rel, str(value)))
        if rel in self.hooks:
            with open(self.path(rel), 'w') as f:
                f.write(self.hooks[rel](str(value)) + '\n')
        if rel.endswith('/online') and rel.startswith(CPU + '/cpu'):
            self._hotplug(rel, str(value))
        if rel.startswith(CG + '/') and rel.rsplit('/', 1)[-1] in (
                'cpuset.cpus', 'cpuset.mems'):
            self._effective(rel.rsplit('/', 1)[0])
        if rel.endswith('/cpuset.cpus.partition') and value == 'root':
            with open(self.path(rel), 'w') as f:
                f.write(self.partition + '\n')

    def _hotplug(self, rel, value):
        cpu = int(rel.split('/')[-2][3:])
        online = tunables_base.schema.expand_cpulist(
            read(self.root, CPU + '/online'), 0)
        if value.strip() == '1':
            online.add(cpu)
        else:
            online.discard(cpu)
        with open(self.path(CPU + '/online'), 'w') as f:
            f.write(tunables_base.schema.format_cpulist(online) + '\n')


def thp_hook(choices):
    def hook(value):
        return ' '.join('[%s]' % c if c == value else c for c in choices)
    return hook


EINVAL = errno.EINVAL
EIO = errno.EIO
