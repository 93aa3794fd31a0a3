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

"""Lab settings for the test tiers.

Each tier gets its own state directory and its own ports, so a demo lab
(default ports) and the tests never collide.  Under pytest-xdist each
worker of a tier gets its own too (``worker_index``): its labs have their
own name (libvirt domains, databases, conductor hosts), state directory
and ports, so two workers run two labs side by side.  State directories
stay after a run: their ``logs/`` is what to read when a test fails.
"""

import dataclasses
import os

from bmc_lab.cloud import ports as cloud_ports
from bmc_lab import settings as lab_settings

BASE_DIR = os.environ.get('BMC_LAB_TEST_DIR', '/tmp/bmc-lab-tests')

#: The ports of worker 0 of each tier (and of a run without workers).
PORT_SETS = {
    'functional': lab_settings.Ports(ironic_api=16385, http=18080,
                                     registry=15050, nfs=12149,
                                     ipmi_base=16230, agent_base=19900,
                                     wol=16229, runs_api=16388,
                                     group_net=16250),
    'e2e': lab_settings.Ports(ironic_api=26385, http=28080,
                              registry=25050, nfs=12249,
                              ipmi_base=26230, agent_base=29900,
                              wol=26229, runs_api=26388,
                              group_net=26250),
}
#: The cloud profile's API ports of worker 0 of each tier: the usual
#: OpenStack ports shifted by this much.
CLOUD_SHIFT = {'functional': 10000, 'e2e': 20000}
#: How far worker N's TCP and UDP ports are from worker 0's: N times this
#: (nfs-ganesha's port, kept in the 12xxx range: N).  Labs have at most a
#: few dozen nodes, so the IPMI and agent ranges of two workers never meet.
WORKER_PORT_STEP = 1000
#: Workers a tier may run; .ci/run checks their ports are free.
MAX_WORKERS = 2
#: Two more workers' ports and names that no pytest worker takes: labs a
#: test brings up beside its own worker's (the functional tier's
#: side-by-side test), so it runs while the other worker runs its labs.
#: .ci/run checks their ports are free too.
SPARE_WORKERS = (MAX_WORKERS, MAX_WORKERS + 1)


def worker_index():
    """This process's pytest-xdist worker number (``gw1`` -> 1), else 0."""
    worker = os.environ.get('PYTEST_XDIST_WORKER', 'gw0')
    try:
        index = int(worker.lstrip('gw'))
    except ValueError:
        raise RuntimeError('unexpected PYTEST_XDIST_WORKER %r' % worker)
    if index >= MAX_WORKERS:
        raise RuntimeError(
            'worker %s: the lab tiers run at most %d workers (their ports '
            'are reserved in .ci/run); use -n %d or fewer'
            % (worker, MAX_WORKERS, MAX_WORKERS))
    return index


def ports_for(tier, worker=0):
    base = PORT_SETS[tier]
    step = WORKER_PORT_STEP * worker
    return dataclasses.replace(
        base, ironic_api=base.ironic_api + step, http=base.http + step,
        registry=base.registry + step, nfs=base.nfs + worker,
        ipmi_base=base.ipmi_base + step, agent_base=base.agent_base + step,
        wol=base.wol + step, runs_api=base.runs_api + step,
        group_net=base.group_net + step)


def lab_name(tier, worker=0):
    """``bmc-e2e`` for worker 0, ``bmc-e2e-w1`` for worker 1 ...

    The name prefixes the lab's libvirt domains (``<name>-node-0``), so
    no worker's name may be a prefix of another's followed by ``-node-``.
    """
    return 'bmc-%s' % tier if worker == 0 else 'bmc-%s-w%d' % (tier, worker)


def lab_settings_for(tier, profile=lab_settings.PROFILE_EMBEDDED, nodes=1,
                     worker=None, **kwargs):
    if worker is None:
        worker = worker_index()
    name = lab_name(tier, worker)
    if profile == lab_settings.PROFILE_CLOUD:
        kwargs.setdefault('cloud_ports', cloud_ports.CloudPorts.shifted(
            CLOUD_SHIFT[tier] + WORKER_PORT_STEP * worker))
    return lab_settings.Settings(
        state_dir=os.path.join(BASE_DIR, '%s-%s' % (name[len('bmc-'):],
                                                    profile)),
        profile=profile, nodes=nodes, ports=ports_for(tier, worker),
        name=name, **kwargs)
