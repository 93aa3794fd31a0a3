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

"""In-band energy from RAPL (powercap ``intel-rapl`` zones).

``/sys/class/powercap/intel-rapl:<pkg>`` is a package (socket) domain,
``intel-rapl:<pkg>:<n>`` its subzones (core, uncore, dram); AMD CPUs
register the same zone names.  ``energy_uj`` counts micro-joules and
wraps at ``max_energy_range_uj`` (typically 262 kJ on Intel, ~65 kJ on
AMD: minutes at full power), so:

* ``delta(a, b)`` of two snapshots handles one wrap per zone;
* ``Meter`` samples every ``interval`` seconds (default 60) in a thread
  and adds the deltas up, which stays right over hours.

The total (``joules``) is the sum of the package zones; subzones and a
``psys`` zone overlap with them and are only listed under ``domains``.
RAPL is the CPU package (+ DRAM), not the wall: the BMC reading covers
the whole machine.  Where there is no RAPL (the QEMU lab nodes, most
VMs, CPUs without it) or no permission, results are
``{"state": "absent", "reason": ...}``.  Standard library only.
"""

import os
import re
import threading
import time

POWERCAP = 'sys/class/powercap'
_ZONE = re.compile(r'^intel-rapl:(\d+)(?::(\d+))?$')
DEFAULT_INTERVAL = 60.0


def absent(reason):
    return {'state': 'absent', 'reason': reason}


def _read(path):
    with open(path) as f:
        return f.read().strip()


def snapshot(root='/'):
    """The energy counters of every RAPL zone now (or absent + reason)."""
    base = os.path.join(root, POWERCAP)
    if not os.path.isdir(base):
        return absent('/%s missing: kernel without powercap, or a machine '
                      'without RAPL (virtual machines such as the QEMU lab '
                      'nodes have none)' % POWERCAP)
    zones = sorted((z for z in os.listdir(base) if _ZONE.match(z)),
                   key=lambda z: [int(n) for n in re.findall(r'\d+', z)])
    if not zones:
        return absent('no intel-rapl zones in /%s: no RAPL on this CPU or '
                      'the intel_rapl_msr driver is not loaded (virtual '
                      'machines such as the QEMU lab nodes have none)'
                      % POWERCAP)
    found, errors = {}, []
    for zone in zones:
        zdir = os.path.join(base, zone)
        try:
            found[zone] = {
                'name': _read(os.path.join(zdir, 'name')),
                'energy_uj': int(_read(os.path.join(zdir, 'energy_uj'))),
                'max_energy_range_uj': int(_read(
                    os.path.join(zdir, 'max_energy_range_uj'))),
            }
        except PermissionError:
            return absent('/%s/%s/energy_uj not readable: permission denied '
                          '(root only since CVE-2020-8694)'
                          % (POWERCAP, zone))
        except (OSError, ValueError) as exc:
            errors.append('%s: %s' % (zone, exc))
    if not found:
        return absent('RAPL zones unreadable: %s' % '; '.join(errors))
    snap = {'state': 'present', 'time': time.time(),
            'monotonic': time.monotonic(), 'zones': found}
    if errors:
        snap['errors'] = errors
    return snap


def counter_delta(before, after, max_range):
    """Micro-joules between two readings of a counter wrapping at max."""
    if after >= before:
        return after - before
    return (max_range - before) + after


def _is_package(zone, info):
    return _ZONE.match(zone).group(2) is None and info['name'] != 'psys'


def delta(a, b):
    """Energy between snapshots ``a`` and ``b`` (``b`` taken later).

    ``{"state": "measured", "joules", "seconds", "watts", "domains":
    {"intel-rapl:0/package-0": J, ...}}`` or absent + reason.
    """
    for snap in (a, b):
        if not snap or snap.get('state') != 'present':
            return absent((snap or {}).get('reason', 'no RAPL snapshot'))
    domains, joules = {}, 0.0
    for zone, info in b['zones'].items():
        first = a['zones'].get(zone)
        if first is None:
            continue
        uj = counter_delta(first['energy_uj'], info['energy_uj'],
                           info['max_energy_range_uj'])
        domains['%s/%s' % (zone, info['name'])] = round(uj / 1e6, 6)
        if _is_package(zone, info):
            joules += uj / 1e6
    if not domains:
        return absent('the two snapshots share no RAPL zone')
    seconds = max(0.0, b['monotonic'] - a['monotonic'])
    return {'state': 'measured', 'joules': round(joules, 6),
            'seconds': round(seconds, 3),
            'watts': round(joules / seconds, 3) if seconds else None,
            'domains': domains}


class Meter:
    """Energy over a window, sampled often enough to survive wraps."""

    def __init__(self, root='/', interval=DEFAULT_INTERVAL):
        self.root = root
        self.interval = interval
        self.lock = threading.Lock()
        self.first = self.last = None
        self.joules = 0.0
        self.domains = {}
        self.samples = 0
        self.stopped = threading.Event()
        self.thread = None

    def start(self):
        self.first = self.last = snapshot(self.root)
        if self.first['state'] == 'present' and self.interval:
            self.thread = threading.Thread(target=self._loop,
                                           name='bmc-rapl-meter',
                                           daemon=True)
            self.thread.start()
        return self

    def _loop(self):
        while not self.stopped.wait(self.interval):
            self.sample()

    def sample(self):
        with self.lock:
            if not self.last or self.last['state'] != 'present':
                return
            snap = snapshot(self.root)
            step = delta(self.last, snap)
            if step['state'] != 'measured':
                return
            self.joules += step['joules']
            for key, value in step['domains'].items():
                self.domains[key] = self.domains.get(key, 0.0) + value
            self.samples += 1
            self.last = snap

    def stop(self):
        """Take the last sample, stop the thread, return ``result()``."""
        if not self.stopped.is_set():
            self.stopped.set()
            self.sample()
            if self.thread is not None:
                self.thread.join(5)
        return self.result()

    def current(self):
        """A fresh sample, then ``result()`` (for a status call)."""
        if not self.stopped.is_set():
            self.sample()
        return self.result()

    def result(self):
        """What was measured so far (a running window while not stopped)."""
        with self.lock:
            if not self.first or self.first['state'] != 'present':
                return absent((self.first or {}).get(
                    'reason', 'the meter was not started'))
            seconds = self.last['monotonic'] - self.first['monotonic']
            return {'state': 'measured', 'joules': round(self.joules, 6),
                    'seconds': round(seconds, 3),
                    'watts': round(self.joules / seconds, 3)
                    if seconds else None,
                    'domains': {k: round(v, 6)
                                for k, v in self.domains.items()},
                    'samples': self.samples,
                    'started': round(self.first['time'], 3),
                    'ended': round(self.last['time'], 3),
                    'running': not self.stopped.is_set()}
