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

"""NodeOS partitions: the node's services and the workload, as cgroups.

As in Argo NodeOS, the node splits in two (cgroup v2, cpuset):

* the **ServiceOS** partition: systemd, journald, udevd, the agent and
  every other service, i.e. the systemd slices ``system.slice``,
  ``user.slice`` and ``init.scope``, get the housekeeping CPUs through
  systemd's own ``AllowedCPUs`` (set at run time only: nothing survives a
  reboot, and systemd keeps the setting when it re-creates the cgroups);
* the **workload** cgroup ``/bmc-workload`` (where crun puts the
  container) gets the workload CPUs and every memory node, and is made a
  cpuset *partition root* when the kernel allows it: its CPUs then leave
  every other cgroup, the root cgroup's tasks (unbound kernel threads)
  included.

Nothing is claimed that is not read back: each cgroup's
``cpuset.cpus.effective``, the partition state as the kernel reports it,
and, once the workload runs, its init's own affinity.

The services get no memory limit: the staged root filesystem lives in a
tmpfs whose pages are charged to the agent that wrote them, so a small
ServiceOS memory budget would bound the image instead of the services.
Their memory use (``memory.current``) is reported.
"""

import os

from bmc_common.tunables import schema
from ipa_hardware_manager.tunables_base import KnobError

CGROUP_FS = 'sys/fs/cgroup'
#: The workload's cgroup (crun's ``cgroupsPath``), relative to the root.
WORKLOAD_CGROUP = 'bmc-workload'
#: The systemd units that hold every service of the node.
SERVICE_UNITS = ('init.scope', 'system.slice', 'user.slice')
SYSTEMD_RUNNING = 'run/systemd/system'


def _cg(*parts):
    return '/'.join((CGROUP_FS,) + parts)


class Partitions:
    """The ServiceOS and workload partitions of the node under ``host``."""

    def __init__(self, host):
        self.host = host

    # --- what the machine can do ------------------------------------------

    def unsupported(self):
        """Why cpuset partitions cannot be made here, or None."""
        if not self.host.exists(_cg('cgroup.controllers')):
            return ('/sys/fs/cgroup is not a cgroup v2 (unified) hierarchy')
        if 'cpuset' not in self.host.read(_cg('cgroup.controllers')).split():
            return 'the kernel offers no cpuset controller'
        return None

    def _read_cpus(self, rel):
        text = self.host.read(rel)
        return schema.expand_cpulist(text, 0) if text else set()

    def _units(self):
        return [u for u in SERVICE_UNITS if self.host.exists(_cg(u))]

    # --- the ServiceOS partition -----------------------------------------

    def confine_services(self, cpus):
        """Give the node's services the CPUs ``cpus``; the result of the
        ``housekeeping_cpus`` knob's ``services`` part."""
        reason = self.unsupported()
        if reason is None and not self.host.exists(SYSTEMD_RUNNING):
            reason = ('systemd does not run here: the services cannot be '
                      'confined (only the agent is)')
        if reason:
            return {'supported': False, 'reason': reason, 'ok': False}
        text = schema.format_cpulist(cpus)
        failed = []
        units = self._units()
        for unit in units:
            # One unit per call: systemctl takes one unit, then properties.
            code, output = self.host.run(
                ['systemctl', 'set-property', '--runtime', '--', unit,
                 'AllowedCPUs=%s' % text])
            if code != 0:
                failed.append('systemctl set-property %s AllowedCPUs=%s: '
                              '%s' % (unit, text, output or 'exit %d' % code))
        out = self.read_services(cpus, units)
        if failed:
            out['ok'] = False
            out['error'] = '; '.join(failed)
        return out

    def read_services(self, cpus, units=None):
        """The services' effective CPUs as the kernel has them (of
        ``units``, default: the service units that exist)."""
        effective, wrong = {}, []
        for unit in self._units() if units is None else units:
            try:
                got = self._read_cpus(_cg(unit, 'cpuset.cpus.effective'))
            except (OSError, schema.TunableError) as exc:
                effective[unit] = 'unreadable: %s' % exc
                wrong.append(unit)
                continue
            effective[unit] = schema.format_cpulist(got)
            if got != set(cpus):
                wrong.append(unit)
        out = {'cpus_effective': effective, 'ok': bool(effective)
               and not wrong, 'memory_current': self._memory(
                   'system.slice')}
        if wrong:
            out['error'] = '%s not confined to CPUs %s' % (
                ', '.join(wrong), schema.format_cpulist(cpus))
        elif not effective:
            out['error'] = 'none of %s exists' % ', '.join(SERVICE_UNITS)
        return out

    def _memory(self, unit):
        try:
            return int(self.host.read(_cg(unit, 'memory.current')))
        except (OSError, ValueError):
            return None

    # --- the workload partition ------------------------------------------

    def prepare_workload(self, cpus):
        """Create the workload's cgroup owning ``cpus`` (a partition root
        where the kernel allows it); the ``workload_cpus`` result."""
        reason = self.unsupported()
        if reason:
            return {'supported': False, 'reason': reason, 'ok': False}
        errors = []
        try:
            subtree = self.host.read(_cg('cgroup.subtree_control')).split()
            if 'cpuset' not in subtree:
                self.host.write(_cg('cgroup.subtree_control'), '+cpuset')
            path = self.host.path(_cg(WORKLOAD_CGROUP))
            if not os.path.isdir(path):
                self.host.mkdir(_cg(WORKLOAD_CGROUP))
            self.host.write(_cg(WORKLOAD_CGROUP, 'cpuset.cpus'),
                            schema.format_cpulist(cpus))
            self.host.write(_cg(WORKLOAD_CGROUP, 'cpuset.mems'),
                            self.host.read(_cg('cpuset.mems.effective')))
        except (OSError, KnobError) as exc:
            return {'ok': False, 'error': 'the workload cgroup /%s: %s' % (
                WORKLOAD_CGROUP, exc)}
        partition = self._make_partition_root(errors)
        out = self.read_workload(cpus)
        out['exclusive'] = partition == 'root'
        if errors:
            out['partition_error'] = '; '.join(errors)
        return out

    def _make_partition_root(self, errors):
        rel = _cg(WORKLOAD_CGROUP, 'cpuset.cpus.partition')
        if not self.host.exists(rel):
            errors.append('no cpuset.cpus.partition in this kernel')
            return None
        try:
            self.host.write(rel, 'root')
            state = self.host.read(rel)
        except (OSError, KnobError) as exc:
            errors.append(str(exc))
            return None
        if state != 'root':
            # An invalid partition root is a member in all but name: say
            # why, and leave it a plain member.
            errors.append('the kernel made it %r' % state)
            try:
                self.host.write(rel, 'member')
            except KnobError:
                pass
        return state

    def read_workload(self, cpus, pid=None):
        """The workload cgroup's effective CPUs and memory nodes, its
        partition state and (with ``pid``) that process's affinity."""
        base = _cg(WORKLOAD_CGROUP)
        out = {'cgroup': '/' + WORKLOAD_CGROUP}
        problems = []
        try:
            got = self._read_cpus(base + '/cpuset.cpus.effective')
            out['cpus_effective'] = schema.format_cpulist(got)
            out['mems_effective'] = self.host.read(
                base + '/cpuset.mems.effective')
            if self.host.exists(base + '/cpuset.cpus.partition'):
                out['partition'] = self.host.read(
                    base + '/cpuset.cpus.partition')
        except (OSError, schema.TunableError) as exc:
            out['error'] = 'cannot read the workload cgroup: %s' % exc
            out['ok'] = False
            return out
        if got != set(cpus):
            problems.append('its cgroup has CPUs %s' % out['cpus_effective'])
        if pid is not None and self.host.getaffinity is not None:
            try:
                affinity = set(self.host.getaffinity(pid))
            except OSError as exc:
                problems.append('affinity of pid %d: %s' % (
                    pid, exc.strerror or exc))
            else:
                out['affinity'] = schema.format_cpulist(affinity)
                if affinity != set(cpus):
                    problems.append('its init runs on CPUs %s'
                                    % out['affinity'])
        out['ok'] = not problems
        if problems:
            out['error'] = 'the workload should own CPUs %s: %s' % (
                schema.format_cpulist(cpus), '; '.join(problems))
        return out


def read_back(host, housekeeping, workload, pid):
    """Both partitions as the kernel has them while the workload runs."""
    parts = Partitions(host)
    if parts.unsupported():
        return None
    return {'housekeeping_cpus': parts.read_services(housekeeping),
            'workload_cpus': parts.read_workload(workload, pid=pid)}
