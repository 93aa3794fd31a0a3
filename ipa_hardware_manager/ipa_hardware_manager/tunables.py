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

"""Apply and verify the kernel tunables of a run on the node.

The knobs are defined (names, values, boot forms) by
``bmc_common.tunables.schema``; here every runtime knob has a small class
with ``read()``, ``apply(value)`` and ``verify(value)`` working under a
root directory (``/`` on the node, a fake sysfs/procfs tree in tests).

``apply_all`` applies the knobs in the schema's order (modules first,
then CPU hotplug and SMT, ..., the housekeeping CPUs last), saving each
previous value, reading each one back.  Every knob gets a result
``{"requested", "previous", "actual", "ok", "supported"}`` with
``"reason"`` when the machine lacks the feature and ``"error"`` when
applying or verifying failed: nothing is skipped silently, and one knob
failing does not stop the others.  Boot-only knobs are checked against
``/proc/cmdline``: present → verified; absent → refused ("needs a
reboot; ask for it at deploy time").
"""

import json
import os
import threading
import time

from oslo_log import log

from ipa_hardware_manager import tunables_base as base
from ipa_hardware_manager import tunables_cpu as cpu
from ipa_hardware_manager import tunables_isolation as isolation
from ipa_hardware_manager import tunables_net as net
from ipa_hardware_manager.tunables_base import Host  # noqa: F401
from ipa_hardware_manager.tunables_base import KnobError  # noqa: F401
from bmc_common.tunables import schema

LOG = log.getLogger(__name__)

STATE_DIR = '/run/bmc-tunables'
STATE_FILE = 'tunables.json'
_lock = threading.Lock()


class ThpKnob(base.FileKnob):
    name = 'thp'
    path = 'sys/kernel/mm/transparent_hugepage/enabled'
    missing = 'kernel built without transparent huge pages'

    def parse(self, text):
        return base.selected(text)


class ThpDefragKnob(ThpKnob):
    name = 'thp_defrag'
    path = 'sys/kernel/mm/transparent_hugepage/defrag'


class HugepagesKnob(base.IntFileKnob):
    name = 'hugepages'
    path = 'proc/sys/vm/nr_hugepages'
    missing = 'kernel built without huge pages (CONFIG_HUGETLBFS)'

    def check(self, value, actual):
        if actual != value:
            return False, ('the kernel allocated %d of %d huge pages '
                           '(memory too small or fragmented)'
                           % (actual, value))
        return True, None


class NumaBalancingKnob(base.IntFileKnob):
    name = 'numa_balancing'
    path = 'proc/sys/kernel/numa_balancing'
    missing = 'kernel built without NUMA balancing'


class RpsSockFlowEntriesKnob(base.IntFileKnob):
    name = 'rps_sock_flow_entries'
    path = 'proc/sys/net/core/rps_sock_flow_entries'
    missing = 'kernel built without RPS (CONFIG_RPS)'


class SysctlKnob(base.Knob):
    """Any sysctl: ``{"vm.swappiness": "10"}`` → /proc/sys/vm/swappiness."""

    name = 'sysctl'

    def __init__(self, host=None):
        super().__init__(host)
        self.keys = ()

    @staticmethod
    def _path(key):
        return 'proc/sys/' + key.replace('.', '/')

    def run(self, value):
        self.keys = tuple(value)
        return super().run(value)

    def unsupported(self, value):
        missing = [k for k in value if not self.host.exists(self._path(k))]
        if missing and len(missing) == len(value):
            return 'no such sysctl on this kernel: %s' % ', '.join(missing)
        return None

    def read(self):
        found = {}
        for key in self.keys:
            try:
                found[key] = ' '.join(self.host.read(self._path(key)).split())
            except OSError:
                found[key] = None
        return found

    def apply(self, value):
        errors = []
        for key, item in value.items():
            if not self.host.exists(self._path(key)):
                errors.append('%s: no such sysctl on this kernel' % key)
                continue
            try:
                self.host.write(self._path(key), item)
            except KnobError as exc:
                errors.append(str(exc))
        if errors:
            raise KnobError('; '.join(errors))

    def check(self, value, actual):
        wrong = ['%s reads %r' % (k, actual.get(k)) for k, v in value.items()
                 if actual.get(k) != ' '.join(v.split())]
        return (False, '; '.join(wrong)) if wrong else (True, None)


class ModulesKnob(base.Knob):
    """``modprobe`` every module; verify in /sys/module or builtin."""

    name = 'kernel_modules'

    def __init__(self, host=None):
        super().__init__(host)
        self.modules = ()

    def run(self, value):
        self.modules = tuple(value)
        return super().run(value)

    def _builtin(self):
        release = os.uname().release
        try:
            text = self.host.read('lib/modules/%s/modules.builtin' % release)
        except OSError:
            return set()
        return {os.path.basename(line)[:-3].replace('-', '_')
                for line in text.split() if line.endswith('.ko')}

    def read(self):
        builtin = None
        state = {}
        for module in self.modules:
            sysname = module.replace('-', '_')
            if self.host.exists('sys/module/%s' % sysname):
                state[module] = 'loaded'
                continue
            if builtin is None:
                builtin = self._builtin()
            state[module] = 'builtin' if sysname in builtin else 'absent'
        return state

    def apply(self, value):
        errors = []
        for module in value:
            try:
                code, output = self.host.run(['modprobe', module])
            except OSError as exc:
                errors.append('cannot run modprobe: %s' % exc)
                break
            if code != 0:
                errors.append('modprobe %s failed (exit %d): %s'
                              % (module, code, output[-300:]))
        if errors:
            raise KnobError('; '.join(errors))

    def check(self, value, actual):
        absent = [m for m in value if actual.get(m) == 'absent']
        if absent:
            return False, 'not loaded: %s' % ', '.join(absent)
        return True, None


#: The class of every runtime knob.
KNOB_CLASSES = {cls.name: cls for cls in (
    ModulesKnob, cpu.CpusOnlineKnob, cpu.CpusOfflineKnob, cpu.SmtKnob,
    cpu.GovernorKnob, ThpKnob, ThpDefragKnob, HugepagesKnob,
    NumaBalancingKnob, SysctlKnob, RpsSockFlowEntriesKnob,
    net.RpsFlowCntKnob, net.RpsCpusKnob)}

_PARTITION = ('housekeeping_cpus', 'workload_cpus')


def apply_all(knobs, root='/', host=None, state_dir=None):
    """Apply and verify ``knobs``; return ``{knob: result}``.

    Raises ``schema.TunableError`` for invalid knobs (nothing applied).
    ``state_dir`` (default STATE_DIR on the real root, none otherwise)
    keeps the results and the workload CPUs for the workload supervisor.
    """
    knobs = schema.validate(knobs)
    host = host or base.Host(root)
    if state_dir is None and host.real:
        state_dir = STATE_DIR
    results, cpusets = {}, None
    with _lock:
        for name, value in knobs.items():
            try:
                if name in _PARTITION:
                    if name in results:
                        continue
                    part, cpusets = isolation.CpuPartition(host).run(
                        knobs.get(_PARTITION[0]), knobs.get(_PARTITION[1]))
                    results.update(part)
                elif not schema.is_runtime(name, value):
                    results[name] = cpu.BootKnob(host, name).run(value)
                else:
                    results[name] = KNOB_CLASSES[name](host).run(value)
            except Exception as exc:
                LOG.exception('Tunable %s failed unexpectedly', name)
                results[name] = base.result(
                    value, error='internal error: %s' % exc)
            level = LOG.info if results[name]['ok'] else LOG.warning
            level('Tunable %s=%s: %s', name, value, results[name])
        if state_dir:
            _save(state_dir, knobs, results, cpusets)
    return results


def _save(state_dir, knobs, results, cpusets):
    record = {'applied': time.time(), 'knobs': knobs, 'results': results}
    if cpusets:
        record['housekeeping_cpus'], record['workload_cpus'] = cpusets
    tmp = os.path.join(state_dir, STATE_FILE + '.tmp')
    try:
        os.makedirs(state_dir, exist_ok=True)
        with open(tmp, 'w') as f:
            json.dump(record, f)
        os.replace(tmp, os.path.join(state_dir, STATE_FILE))
    except (OSError, TypeError, ValueError) as exc:
        LOG.warning('Could not record the tunables in %s: %s',
                    state_dir, exc)


def load_state(state_dir=STATE_DIR):
    """The record of the last ``apply_all`` (or None)."""
    try:
        with open(os.path.join(state_dir, STATE_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def workload_cpus(state_dir=STATE_DIR):
    """The CPUs the workload should run on (a set), or None if unset."""
    record = load_state(state_dir) or {}
    cpus = record.get('workload_cpus')
    return set(cpus) if cpus else None


def summary(results):
    """Names of the knobs that failed and of those unsupported here."""
    return {
        'failed': sorted(n for n, r in results.items()
                         if r.get('supported', True) and not r['ok']),
        'unsupported': sorted(n for n, r in results.items()
                              if not r.get('supported', True)),
    }
