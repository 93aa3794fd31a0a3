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

"""The lab's supervisor: a long-running part that dies is started again.

One ``supervisor`` process per lab (``python -m bmc_lab.supervisor
STATE_DIR``, started last by ``up``, stopped first by ``down``) watches
the parts nodes and Ironic depend on for the lab's whole life: each
node's virtual BMC, nginx, the registry, nfs-ganesha and the Wake-on-LAN
listener.  A part whose
process is gone while its pid file is still in place crashed (``procs.stop``
removes the pid file before it signals, so a part stopped on purpose, by
``down`` or a test, stays stopped): the supervisor starts it again with
the lab's saved settings and says so, in ``logs/supervisor.log`` and in
the part's own log.  Ironic's processes are not supervised: their tests
crash and restart them on purpose.
"""

import argparse
import functools
import logging
import os
import signal
import sys
import time

from bmc_lab import content_servers
from bmc_lab import procs
from bmc_lab import settings as lab_settings
from bmc_lab import virtual_bmcs
from bmc_lab import wol_listener

LOG = logging.getLogger('bmc_lab.supervisor')

NAME = 'supervisor'
#: Seconds between two looks.
INTERVAL = 2.0
#: A part restarted this many times within WINDOW seconds is left down.
MAX_RESTARTS = 5
WINDOW = 600.0


def parts(settings):
    """(process name, start function) of each supervised part."""
    out = [('nginx', functools.partial(content_servers.start_nginx,
                                       settings)),
           ('registry', functools.partial(content_servers.start_registry,
                                          settings)),
           ('nfs-ganesha', functools.partial(content_servers.start_nfs,
                                             settings)),
           (wol_listener.NAME, functools.partial(wol_listener.start,
                                                 settings))]
    for i in range(settings.nodes):
        out.append((virtual_bmcs.bmc_name(i),
                    functools.partial(virtual_bmcs.start_bmc, settings, i)))
    return out


def crashed(settings, name):
    """The pid a part's pid file names, when that process is gone."""
    found = procs.recorded(settings, name)
    if found is None or procs.running(settings, name):
        return None
    return found[0]


def _reap_children():
    """Parts this process restarted are its children: reap the dead."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Supervisor:

    def __init__(self, settings, clock=time.monotonic):
        self.settings = settings
        self.clock = clock
        self.restarts = {}
        self.given_up = set()

    def _note(self, name, message):
        LOG.warning('%s', message)
        try:
            with open(self.settings.log(name + '.log'), 'a') as f:
                f.write('\n==== %s bmc-lab supervisor: %s\n'
                        % (time.strftime('%Y-%m-%d %H:%M:%S'), message))
        except OSError:
            pass

    def check(self):
        """One look at every part; returns the names restarted."""
        _reap_children()
        restarted = []
        for name, start in parts(self.settings):
            pid = crashed(self.settings, name)
            if pid is None or name in self.given_up:
                continue
            now = self.clock()
            recent = [t for t in self.restarts.get(name, ())
                      if now - t < WINDOW]
            if len(recent) >= MAX_RESTARTS:
                self.given_up.add(name)
                self._note(name, '%s (pid %d) died again after %d restarts '
                           'in %d s; leaving it down' % (
                               name, pid, len(recent), WINDOW))
                continue
            self.restarts[name] = recent + [now]
            self._note(name, '%s (pid %d) died; starting it again'
                       % (name, pid))
            try:
                start()
            except procs.LabError as exc:
                self._note(name, 'starting %s again failed: %s'
                           % (name, exc))
                continue
            restarted.append(name)
        return restarted

    def run(self):
        while True:
            self.check()
            time.sleep(INTERVAL)


def start(settings):
    """Start the lab's supervisor (``up`` does, last)."""
    if procs.running(settings, NAME):
        return
    procs.spawn(settings, NAME, [sys.executable, '-m', 'bmc_lab.supervisor',
                                 settings.state_dir])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('state_dir')
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format='%(asctime)s %(levelname)s %(message)s')
    settings = lab_settings.Settings.load(args.state_dir)
    if settings is None:
        LOG.error('no lab settings in %s', args.state_dir)
        return 1
    signal.signal(signal.SIGTERM, lambda *_a: sys.exit(0))
    LOG.info('supervising %s of the lab in %s', ', '.join(
        n for n, _s in parts(settings)), settings.state_dir)
    Supervisor(settings).run()
    return 0


if __name__ == '__main__':
    sys.exit(main())
