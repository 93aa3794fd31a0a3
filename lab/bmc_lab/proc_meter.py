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

"""CPU and memory of lab processes, each with its descendants, from /proc.

oslo.service runs the conductor's and the API's work in forked workers:
a :class:`Meter` counts each named lab process's whole tree, CPU time
(its own and its waited-for children's) since the meter started, and
the largest resident set of the tree.
"""

import os

from bmc_lab import procs


class Meter:
    """CPU (own + waited-for children) and memory of lab processes."""

    def __init__(self, settings, names):
        self.settings = settings
        self.names = names
        self.start = self.cpu()

    def _pid(self, name):
        pid = procs.pid_of(self.settings, name)
        if pid is None:
            raise procs.LabError('%s is not running' % name)
        return pid

    def cpu(self):
        """CPU seconds of each process's tree: oslo.service runs the
        conductor's and the API's work in forked workers."""
        tick = os.sysconf('SC_CLK_TCK')
        stats = _proc_stats()
        total = {}
        for name in self.names:
            tree = _tree(stats, self._pid(name))
            # utime, stime, cutime, cstime (fields 14-17 of stat(5)).
            total[name] = sum(sum(int(v) for v in stats[p][11:15])
                              for p in tree) / tick
        return total

    def used(self):
        now = self.cpu()
        return {n: now[n] - self.start[n] for n in self.names}

    def memory_mb(self, key='VmHWM'):
        """The largest ``key`` of each process's tree, in MB."""
        stats = _proc_stats()
        out = {}
        for name in self.names:
            values = [0]
            for pid in _tree(stats, self._pid(name)):
                try:
                    with open('/proc/%d/status' % pid) as f:
                        values += [int(line.split()[1]) / 1024
                                   for line in f
                                   if line.startswith(key + ':')]
                except FileNotFoundError:
                    pass
            out[name] = max(values)
        return out


def _proc_stats():
    """{pid: stat(5) fields after the command name} of every process."""
    stats = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open('/proc/%s/stat' % entry) as f:
                    stats[int(entry)] = f.read().rsplit(')', 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                pass
    return stats


def _tree(stats, root):
    """``root`` and its descendants (field 4 of stat(5) is the ppid)."""
    found = [root]
    for pid in found:
        found += [p for p, f in stats.items() if int(f[1]) == pid]
    return [p for p in found if p in stats]
