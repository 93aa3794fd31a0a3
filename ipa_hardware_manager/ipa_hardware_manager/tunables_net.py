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

"""RPS / RFS: ``/sys/class/net/<nic>/queues/rx-<n>/rps_{cpus,flow_cnt}``.

The values are per NIC: ``{"*": v}`` applies to every NIC (an interface
with a ``device``: the physical ones, not lo, bridges or ifb), a named
interface gets its own value.  Every rx queue of a NIC gets the value.
"""

from ipa_hardware_manager.tunables_base import Knob
from ipa_hardware_manager.tunables_base import KnobError
from bmc_common.tunables import schema

NET = 'sys/class/net'


def nics(host):
    """Interfaces backed by a device (what "every NIC" means)."""
    return [n for n in host.listdir(NET)
            if host.exists('%s/%s/device' % (NET, n))]


class _RpsKnob(Knob):
    leaf = None

    def __init__(self, host=None):
        super().__init__(host)
        self.named = set()

    def _targets(self, value):
        names = set(nics(self.host)) if '*' in value else set()
        names |= set(value) - {'*'}
        return [(nic, value.get(nic, value.get('*'))) for nic in sorted(names)]

    def _queues(self, nic):
        base = '%s/%s/queues' % (NET, nic)
        return ['%s/%s' % (base, q) for q in self.host.listdir(base)
                if q.startswith('rx-')]

    def run(self, value):
        self.named = set(value)
        return super().run(value)

    def unsupported(self, value):
        targets = self._targets(value)
        if not targets:
            return ('no network interface to tune (no %s/*/device)'
                    % self.host.show(NET))
        files = ['%s/%s' % (q, self.leaf) for nic, _v in targets
                 for q in self._queues(nic)]
        if files and not any(self.host.exists(f) for f in files):
            return ('%s missing on every rx queue: kernel without '
                    'CONFIG_RPS' % self.leaf)
        return None

    def parse(self, text):
        raise NotImplementedError

    def render(self, item):
        raise NotImplementedError

    def expected(self, item):
        return item

    def read(self):
        found = {}
        names = set(nics(self.host)) | (self.named - {'*'})
        for nic in sorted(names):
            for queue in self._queues(nic):
                leaf = '%s/%s' % (queue, self.leaf)
                if self.host.exists(leaf):
                    found['%s/%s' % (nic, queue.rsplit('/', 1)[1])] = (
                        self.parse(self.host.read(leaf)))
        return found

    def apply(self, value):
        errors = []
        for nic, item in self._targets(value):
            if not self.host.exists('%s/%s' % (NET, nic)):
                errors.append('no network interface %s' % nic)
                continue
            queues = self._queues(nic)
            if not queues:
                errors.append('%s has no rx queues' % nic)
            for queue in queues:
                try:
                    self.host.write('%s/%s' % (queue, self.leaf),
                                    self.render(item))
                except KnobError as exc:
                    errors.append(str(exc))
        if errors:
            raise KnobError('; '.join(errors))

    def check(self, value, actual):
        wrong = []
        for nic, item in self._targets(value):
            want = self.expected(item)
            keys = [k for k in actual if k.split('/')[0] == nic]
            if not keys:
                wrong.append('%s: no rx queue with %s' % (nic, self.leaf))
            for key in keys:
                if actual[key] != want:
                    wrong.append('%s reads %s' % (key, actual[key]))
        if wrong:
            return False, '; '.join(wrong)
        return True, None


class RpsCpusKnob(_RpsKnob):
    """``rps_cpus``: all, none, or a CPU list (kept as a CPU list)."""

    name = 'rps_cpus'
    leaf = 'rps_cpus'

    def parse(self, text):
        cpus = schema.mask_to_cpus(text or '0')
        return schema.format_cpulist(cpus) if cpus else 'none'

    def _cpus(self, item):
        if item == 'all':
            return self.host.online_cpus()
        if item == 'none':
            return set()
        return schema.expand_cpulist(item, self.host.last_cpu())

    def render(self, item):
        return schema.cpus_to_mask(self._cpus(item))

    def expected(self, item):
        cpus = self._cpus(item)
        return schema.format_cpulist(cpus) if cpus else 'none'


class RpsFlowCntKnob(_RpsKnob):
    name = 'rps_flow_cnt'
    leaf = 'rps_flow_cnt'

    def parse(self, text):
        return int(text)

    def render(self, item):
        return str(item)
