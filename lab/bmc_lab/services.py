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

"""The lab's services as a whole: their start order, and stopping them all.

Each family has its module: the host's libvirtd and virtlogd
(:mod:`bmc_lab.host_libvirt`), the nodes' virtual BMCs
(:mod:`bmc_lab.virtual_bmcs`), nginx, the registry and nfs-ganesha
(:mod:`bmc_lab.content_servers`), the Wake-on-LAN listener
(:mod:`bmc_lab.wol_listener`) and Ironic
(:mod:`bmc_lab.ironic_service`), run from :mod:`bmc_lab.programs`.
Each ``start_*`` is idempotent (a running service is left alone) and
fails with a message that names the log to read.  Every process is
started in its own session and recorded under ``run/`` so ``stop_all``
leaves nothing behind.
"""

import os

from bmc_lab import host_libvirt
from bmc_lab import procs

#: Lab processes in start order; stopped in reverse.
ORDER = ('virtlogd', 'libvirtd', 'nginx', 'registry', 'nfs-ganesha',
         'wol-listener', 'ironic', 'ironic-api', 'ironic-conductor',
         'ironic-bmc-api')


def stop_all(settings):
    """Stop every lab process; returns the names that were running.

    The host's libvirtd and virtlogd stop too once no lab has a node.
    """
    stopped = []
    run_dir = settings.path('run')
    pids = [n[:-len('.pid')] for n in (
        os.listdir(run_dir) if os.path.isdir(run_dir) else ())
        if n.endswith('.pid')]
    bmcs = sorted(n for n in pids if n.startswith('bmc-'))
    # Conductors beyond the first (scaled profile).
    conductors = sorted(n for n in pids
                        if n.startswith('ironic-conductor-'))
    # The supervisor first: nothing is started again while the lab stops.
    # (libvirtd and virtlogd are in the lab's own directory only when an
    # older version started them there.)
    for name in ['supervisor'] + bmcs + conductors + list(reversed(ORDER)):
        if procs.stop(settings, name):
            stopped.append(name)
    return stopped + host_libvirt.stop_libvirt_if_unused()
