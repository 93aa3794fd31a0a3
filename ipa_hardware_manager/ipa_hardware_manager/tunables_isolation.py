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

"""Housekeeping / workload CPUs at run time (the low-noise profile).

What the agent really does, and reports:

* every thread of the agent process is confined to the housekeeping
  CPUs (children it starts later inherit that; the workload supervisor
  sets the workload CPUs on the workload itself);
* ``/proc/irq/default_smp_affinity`` and every ``/proc/irq/<n>/
  smp_affinity_list`` it may change get the housekeeping CPUs (managed
  IRQs refuse: they are listed, not hidden);
* unbound workqueues (``/sys/devices/virtual/workqueue/cpumask``);
* the NodeOS partitions (:mod:`nodeos`): every service of the node on
  the housekeeping CPUs (systemd's ``AllowedCPUs``), the workload's
  cgroup owning the workload CPUs, both read back from the cgroup files.

What it does not do, and says so: per-CPU kernel threads, timer ticks
and RCU callbacks stay on the workload CPUs; only the boot-time knobs
(``nohz_full``, ``rcu_nocbs``, ``isolcpus``) move those.
"""

from ipa_hardware_manager import nodeos
from ipa_hardware_manager.tunables_base import KnobError
from ipa_hardware_manager.tunables_base import result
from bmc_common.tunables import schema

IRQ = 'proc/irq'
DEFAULT_AFFINITY = IRQ + '/default_smp_affinity'
WORKQUEUE = 'sys/devices/virtual/workqueue/cpumask'
#: How many refused IRQs are named in the result.
MAX_LISTED = 32


class CpuPartition:
    """The ``housekeeping_cpus`` and ``workload_cpus`` knobs together."""

    def __init__(self, host):
        self.host = host

    def _sets(self, housekeeping, workload):
        online = self.host.online_cpus()
        last = self.host.last_cpu()
        hk = schema.expand_cpulist(housekeeping, last) if housekeeping \
            else None
        wl = schema.expand_cpulist(workload, last) if workload else None
        if hk is None:
            hk = online - wl
        if wl is None:
            wl = online - hk
        return online, hk & online, wl & online, (hk | wl) - online

    def _mask_file(self, rel, cpus):
        """Write a CPU mask file; return (state, error)."""
        if not self.host.exists(rel):
            return 'unsupported: %s missing' % self.host.show(rel), None
        try:
            self.host.write(rel, schema.cpus_to_mask(cpus))
            got = schema.mask_to_cpus(self.host.read(rel))
        except (KnobError, OSError, ValueError) as exc:
            return 'failed', str(exc)
        if got != cpus:
            return 'failed', '%s reads %s' % (self.host.show(rel),
                                               schema.format_cpulist(got))
        return schema.format_cpulist(cpus), None

    def _irqs(self, cpus):
        moved, refused = 0, {}
        text = schema.format_cpulist(cpus)
        for irq in self.host.listdir(IRQ):
            leaf = '%s/%s/smp_affinity_list' % (IRQ, irq)
            if not irq.isdigit() or not self.host.exists(leaf):
                continue
            try:
                self.host.write(leaf, text)
                moved += 1
            except KnobError as exc:
                cause = exc.__cause__
                refused[irq] = getattr(cause, 'strerror', None) or str(exc)
        listed = dict(sorted(refused.items(),
                             key=lambda i: int(i[0]))[:MAX_LISTED])
        return {'moved': moved, 'refused': len(refused),
                'refused_irqs': listed}

    def _threads(self, cpus):
        if self.host.setaffinity is None:
            return {'confined': 0, 'failed': 0,
                    'note': 'no affinity control on a fake root'}, True
        confined, failed = 0, {}
        for tid in self.host.listdir('proc/%d/task' % self.host.pid) or [
                str(self.host.pid)]:
            try:
                self.host.setaffinity(int(tid), cpus)
                confined += 1
            except OSError as exc:
                failed[tid] = exc.strerror or str(exc)
        state = {'confined': confined, 'failed': len(failed)}
        if failed:
            state['errors'] = failed
        ok = not failed
        if self.host.getaffinity is not None:
            now = set(self.host.getaffinity(self.host.pid))
            state['agent_cpus'] = schema.format_cpulist(now)
            ok = ok and now <= cpus
        return state, ok

    @staticmethod
    def _workload(parts, cpus, res):
        """The workload's cgroup: what crun will put the container in."""
        cgroup = parts.prepare_workload(cpus)
        res['actual'] = dict(cgroup, cpus=schema.format_cpulist(cpus))
        res['ok'] = cgroup['ok']
        if cgroup.get('error'):
            res['error'] = cgroup['error']
        elif not cgroup.get('supported', True):
            res['error'] = ('the workload CPUs cannot be given to a cgroup '
                            'and read back: %s' % cgroup['reason'])

    def run(self, housekeeping, workload):
        online, hk, wl, absent = self._sets(housekeeping, workload)
        out = {}
        hk_res = result(housekeeping)
        wl_res = result(workload)
        if self.host.getaffinity is not None:
            hk_res['previous'] = {'agent_cpus': schema.format_cpulist(
                set(self.host.getaffinity(self.host.pid)))}
        if not hk or not wl:
            error = ('no %s CPU online (online: %s)' % (
                'housekeeping' if not hk else 'workload',
                schema.format_cpulist(online)))
            hk_res['error'] = wl_res['error'] = error
        else:
            threads, threads_ok = self._threads(hk)
            parts = nodeos.Partitions(self.host)
            services = parts.confine_services(hk)
            default, default_err = self._mask_file(DEFAULT_AFFINITY, hk)
            workqueue, wq_err = self._mask_file(WORKQUEUE, hk)
            errors = [e for e in (default_err, wq_err) if e]
            hk_res['actual'] = {
                'cpus': schema.format_cpulist(hk),
                'agent_threads': threads,
                'services': services,
                'irqs': self._irqs(hk),
                'default_smp_affinity': default,
                'workqueue_cpumask': workqueue,
                'not_moved': 'per-CPU kernel threads, timer ticks and RCU '
                             'callbacks (boot-time nohz_full/rcu_nocbs)',
            }
            if not threads_ok:
                errors.append('agent threads not confined to %s'
                              % schema.format_cpulist(hk))
            if services.get('error'):
                errors.append(services['error'])
            hk_res['ok'] = not errors
            if errors:
                hk_res['error'] = '; '.join(errors)
            self._workload(parts, wl, wl_res)
        if absent:
            note = 'CPUs %s are not online and not used' % (
                schema.format_cpulist(absent))
            hk_res['note'] = wl_res['note'] = note
        if housekeeping is not None:
            out['housekeeping_cpus'] = hk_res
        if workload is not None:
            out['workload_cpus'] = wl_res
        return out, (sorted(hk), sorted(wl)) if hk and wl else None
