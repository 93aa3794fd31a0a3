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

"""CPU knobs: SMT, cpufreq governor, hotplug, boot-time isolation."""

from ipa_hardware_manager.tunables_base import CPU_DIR
from ipa_hardware_manager.tunables_base import FileKnob
from ipa_hardware_manager.tunables_base import Knob
from ipa_hardware_manager.tunables_base import KnobError
from ipa_hardware_manager.tunables_base import result
from bmc_common.tunables import schema


class SmtKnob(FileKnob):
    """``/sys/devices/system/cpu/smt/control``: on / off."""

    name = 'smt'
    path = CPU_DIR + '/smt/control'
    active = CPU_DIR + '/smt/active'
    missing = 'kernel or hardware without SMT control'

    def unsupported(self, value):
        reason = super().unsupported(value)
        if reason:
            return reason
        state = self.host.read(self.path)
        if state in ('notsupported', 'notimplemented'):
            return ("%s reads '%s': this CPU (or virtual machine) has no "
                    'SMT siblings to switch' % (self.host.show(self.path),
                                                state))
        return None

    def apply(self, value):
        if value == 'on' and self.read() == 'forceoff':
            raise KnobError('SMT was forced off at boot (nosmt=force); '
                            'turning it on needs a reboot without it')
        super().apply(value)

    def check(self, value, actual):
        if value == 'off' and actual == 'forceoff':
            actual = 'off'
        if actual != value:
            return False, 'smt/control reads back %r' % actual
        if value == 'off' and self.host.exists(self.active):
            active = self.host.read(self.active)
            if active != '0':
                return False, 'smt/active still reads %s' % active
        return True, None


class GovernorKnob(Knob):
    """``cpuN/cpufreq/scaling_governor`` of every online CPU."""

    name = 'cpufreq_governor'

    def _cpus(self):
        return sorted(self.host.online_cpus())

    @staticmethod
    def _file(cpu, leaf='scaling_governor'):
        return '%s/cpu%d/cpufreq/%s' % (CPU_DIR, cpu, leaf)

    def unsupported(self, value):
        cpus = self._cpus()
        if not any(self.host.exists(self._file(c)) for c in cpus):
            return ('%s/cpu%d/cpufreq missing: no cpufreq driver (usual in '
                    'virtual machines)' % (self.host.show(CPU_DIR), cpus[0]))
        return None

    def read(self):
        found = {'cpu%d' % c: (self.host.read(self._file(c))
                               if self.host.exists(self._file(c)) else None)
                 for c in self._cpus()}
        values = set(found.values())
        if len(values) == 1 and None not in values:
            return values.pop()
        return found

    def _available(self):
        for cpu in self._cpus():
            leaf = self._file(cpu, 'scaling_available_governors')
            if self.host.exists(leaf):
                return self.host.read(leaf).split()
        return None

    def apply(self, value):
        available = self._available()
        if available is not None and value not in available:
            # Governors may be modules (cpufreq_performance, ...).
            try:
                self.host.run(['modprobe', 'cpufreq_%s' % value])
            except OSError:
                pass
            available = self._available() or []
            if value not in available:
                raise KnobError('governor %r is not available (available: '
                                '%s)' % (value, ', '.join(available)))
        errors = []
        for cpu in self._cpus():
            if not self.host.exists(self._file(cpu)):
                errors.append('cpu%d has no cpufreq' % cpu)
                continue
            try:
                self.host.write(self._file(cpu), value)
            except KnobError as exc:
                errors.append(str(exc))
        if errors:
            raise KnobError('; '.join(errors))


class _HotplugKnob(Knob):
    """Bring CPUs online (``target`` '1') or take them offline ('0')."""

    target = None
    online_file = CPU_DIR + '/online'

    def unsupported(self, value):
        if not self.host.exists(self.online_file):
            return '%s missing: no CPU hotplug information' % (
                self.host.show(self.online_file))
        return None

    def _wanted(self, value):
        return schema.expand_cpulist(value, self.host.last_cpu())

    def read(self):
        return schema.format_cpulist(self.host.online_cpus())

    def apply(self, value):
        online = self.host.online_cpus()
        errors = []
        for cpu in sorted(self._wanted(value)):
            if cpu == 0 and self.target == '0':
                errors.append('cpu0 is never taken offline')
                continue
            cpu_dir = '%s/cpu%d' % (CPU_DIR, cpu)
            if not self.host.exists(cpu_dir):
                errors.append('cpu%d does not exist' % cpu)
                continue
            if (cpu in online) == (self.target == '1'):
                continue
            leaf = cpu_dir + '/online'
            if not self.host.exists(leaf):
                errors.append('cpu%d cannot be hot-plugged (no %s)'
                              % (cpu, self.host.show(leaf)))
                continue
            try:
                self.host.write(leaf, self.target)
            except KnobError as exc:
                errors.append(str(exc))
        if errors:
            raise KnobError('; '.join(errors))

    def check(self, value, actual):
        online = schema.expand_cpulist(actual, 0)
        wanted = self._wanted(value)
        if self.target == '1':
            bad, state = wanted - online, 'offline'
        else:
            bad, state = wanted & online, 'online'
        if bad:
            return False, 'CPUs %s are still %s' % (
                schema.format_cpulist(bad), state)
        return True, None


class CpusOnlineKnob(_HotplugKnob):
    name = 'cpus_online'
    target = '1'


class CpusOfflineKnob(_HotplugKnob):
    name = 'cpus_offline'
    target = '0'


class BootKnob:
    """A boot-only knob: verified on /proc/cmdline, never applied."""

    def __init__(self, host, name):
        self.host = host
        self.name = name

    def run(self, value):
        args = schema.kernel_args(self.name, value)
        res = result(value, boot=True, kernel_args=args)
        try:
            cmdline = self.host.read('proc/cmdline').split()
        except OSError as exc:
            res['error'] = 'cannot read /proc/cmdline: %s' % exc
            return res
        keys = {a.partition('=')[0] for a in args}
        current = [w for w in cmdline if w.partition('=')[0] in keys]
        res['actual'] = ' '.join(current) or None
        reason = self._unsupported()
        if reason:
            res.update(supported=False, reason=reason)
            return res
        if not all(a in cmdline for a in args):
            res['error'] = (
                '%s needs a reboot; ask for it at deploy time (kernel '
                'argument %s; this boot has %s)' % (
                    self.name, ' '.join(args), ' '.join(current) or 'none'))
            return res
        ok, detail = self._effect(value)
        res['ok'] = ok
        if detail:
            res['error' if not ok else 'note'] = detail
        return res

    def _unsupported(self):
        control = CPU_DIR + '/smt/control'
        if self.name == 'smt' and self.host.exists(control):
            state = self.host.read(control)
            if state in ('notsupported', 'notimplemented'):
                return ("%s reads '%s': this CPU (or virtual machine) has "
                        'no SMT siblings to switch'
                        % (self.host.show(control), state))
        return None

    def _cpus(self, value):
        items = value.split(',')
        while items and not items[0][:1].isdigit():
            items.pop(0)
        return schema.expand_cpulist(','.join(items), self.host.last_cpu())

    def _compare(self, rel, value, what):
        if not self.host.exists(rel):
            return False, ('%s missing: the kernel ignored %s (built '
                           'without %s)' % (self.host.show(rel), self.name,
                                            what))
        text = self.host.read(rel)
        got = schema.expand_cpulist(text, 0) if text else set()
        wanted = self._cpus(value)
        if got != wanted:
            return False, '%s reads %r, expected %s' % (
                self.host.show(rel), text, schema.format_cpulist(wanted))
        return True, None

    def _effect(self, value):
        if self.name == 'isolcpus':
            flags = [f for f in value.split(',') if not f[:1].isdigit()]
            if flags and 'domain' not in flags:
                return True, 'on the command line; no sysfs view of %s' % (
                    ','.join(flags))
            return self._compare(CPU_DIR + '/isolated', value,
                                 'CPU isolation')
        if self.name == 'nohz_full':
            return self._compare(CPU_DIR + '/nohz_full', value,
                                 'CONFIG_NO_HZ_FULL')
        if self.name == 'smt':
            control = CPU_DIR + '/smt/control'
            if not self.host.exists(control):
                return True, ('%s missing: verified on /proc/cmdline only'
                              % self.host.show(control))
            state = self.host.read(control)
            if state != 'forceoff':
                return False, 'smt/control reads %r, expected forceoff' % (
                    state)
            return True, None
        return True, 'verified on /proc/cmdline only'
