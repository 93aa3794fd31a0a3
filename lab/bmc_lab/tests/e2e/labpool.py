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

"""The e2e tier's labs: each configuration comes up once per worker.

A test module names the lab configuration it needs (``LABS``) and
belongs to a work group (``MODULE_GROUPS``; ``GROUPS`` gives each group's
lab).  A worker runs whole groups, and the groups of one configuration
one after the other (``order_items``), so the :class:`Pool` of a worker
keeps one lab up
and hands it from module to module until a module needs another one.  A
lab is handed on only when it is clean (Ironic up, every node available
and powered off); otherwise it is brought up again, so one failed test
does not cascade into the next module.
"""

import logging

from bmc_lab import agent
from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import control
from bmc_lab import settings as lab_settings
from bmc_lab.tests import labfixture

LOG = logging.getLogger(__name__)

#: Lab configurations of the e2e tier: labfixture.lab_settings_for
#: arguments.  One lab per configuration and worker comes up.
#: How long a deploy waits for the agent: a TCG node boot takes 40-100 s
#: and, with the other worker's node and a browser on the same two cores,
#: was seen to pass 150 s.  (Two tests wait it out on purpose.)
CALLBACK_TIMEOUT = 300
FAULTS_CALLBACK_TIMEOUT = 180
LABS = {
    'embedded': dict(deploy_callback_timeout=CALLBACK_TIMEOUT),
    # Two vCPUs: the low-noise job partitions them.
    'runtime': dict(deploy_callback_timeout=CALLBACK_TIMEOUT, node_cpus=2),
    # Slow artifact downloads (to act mid-download), runs lost sooner, and
    # a deploy whose agent is gone failed sooner (test_agent_gone_mid_deploy
    # waits it out): the slowest agent boot of a full run was 101 s.
    'faults': dict(deploy_callback_timeout=FAULTS_CALLBACK_TIMEOUT,
                   workload_lost_timeout=45, artifact_rate_limit='4m'),
    'scaled': dict(profile=lab_settings.PROFILE_SCALED, conductors=2,
                   deploy_callback_timeout=CALLBACK_TIMEOUT),
    # Two nodes on a run-group network; runs lost sooner (a member is
    # killed on purpose).
    'group': dict(deploy_callback_timeout=CALLBACK_TIMEOUT, nodes=2,
                  group_network=True, workload_lost_timeout=45),
    # (Nova refuses a second cloud on one RabbitMQ: one worker at most
    # runs the cloud group.)
    # Two nodes on a run-group network: a tenant's group of servers.
    'cloud': dict(profile=lab_settings.PROFILE_CLOUD, nodes=2,
                  group_network=True),
}

#: Work groups, longest first, and the lab each one runs on.  A worker
#: runs whole groups (:class:`GroupScheduling`): the two workers take the
#: first two, and each the next one as it runs out; longest first keeps
#: their ends close.  Two groups share the embedded configuration so that
#: its tests split over both workers.
GROUPS = {
    'faults': 'faults',
    'group': 'group',
    'rootfs': 'embedded',
    'cloud': 'cloud',
    'container': 'embedded',
    'runtime': 'runtime',
    'scaled': 'scaled',
}
#: The group of each test module's tests ...
MODULE_GROUPS = {
    'test_faults.py': 'faults',
    'test_group.py': 'group',
    'test_rootfs_nfs.py': 'rootfs',
    'test_rootfs_stream.py': 'rootfs',
    'test_rootfs_verity.py': 'rootfs',
    'test_tenant.py': 'cloud',
    'test_tenant_isolation.py': 'cloud',
    'test_tenant_group.py': 'cloud',
    'test_container.py': 'container',
    'test_hostile_node.py': 'container',
    'test_warm.py': 'container',
    'test_wol.py': 'container',
    'test_container_runtime.py': 'runtime',
    'test_kexec.py': 'runtime',
    'test_takeover.py': 'scaled',
}
#: ... but test_smoke's, which go with the lab profile they smoke (their
#: parameter), onto that profile's other tests' lab.
SMOKE_MODULE = 'test_smoke.py'
SMOKE_GROUPS = {'embedded': 'rootfs', 'scaled': 'scaled', 'cloud': 'cloud'}


def group_of(nodeid):
    """The work group of a test, from its node id alone (what the xdist
    controller, which collects nothing, knows of it)."""
    path, _, name = nodeid.partition('::')
    module = path.rsplit('/', 1)[-1]
    if module == SMOKE_MODULE:
        param = name[name.find('[') + 1:-1] if name.endswith(']') else ''
        group = SMOKE_GROUPS.get(param)
    else:
        group = MODULE_GROUPS.get(module)
    if group is None:
        raise ValueError('%s: no e2e work group; add its module to '
                         'bmc_lab.tests.e2e.labpool.MODULE_GROUPS' % nodeid)
    return group


def order_items(items):
    """Sort tests by group (``GROUPS`` order), stable inside a group.

    Without workers too, each lab configuration then comes up once.
    """
    rank = {name: i for i, name in enumerate(GROUPS)}
    items.sort(key=lambda item: rank[group_of(item.nodeid)])


def make_scheduler(config, log):
    """pytest-xdist's scheduler of the e2e tier: whole groups per worker.

    (xdist's own ``loadgroup`` marks a group in the node id, which pytest
    9 no longer lets a plugin change: it sends a group's tests to both
    workers.  This keys xdist's scope scheduling on :func:`group_of`.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return group_of(nodeid)

    return GroupScheduling(config, log)


def is_clean(settings):
    """Ironic runs and every lab node is available (an earlier test's
    deploy undone, as ``bmc-lab demo`` does) and powered off."""
    if not control.is_up(settings):
        return False
    cli = lab_client.get_client(settings)
    for i in range(settings.nodes):
        try:
            container_job.reclaim(settings, i, out=LOG.info)
        except Exception as exc:
            LOG.warning('Node %s cannot be reclaimed (%s): the lab comes '
                        'up again', settings.node_name(i), exc)
            return False
        if cli.node.get(settings.node_name(i)).power_state != 'power off':
            return False
    return True


class Pool:
    """The one lab of this worker; ``get`` brings up what a module needs."""

    def __init__(self, out=print):
        self.config = None
        self.settings = None
        self.out = out

    def get(self, config):
        if config not in LABS:
            raise ValueError('unknown e2e lab %r; labs: %s'
                             % (config, ', '.join(LABS)))
        if self.config == config and is_clean(self.settings):
            return self.settings
        self.close()
        settings = labfixture.lab_settings_for('e2e', **LABS[config])
        control.up(settings, out=self.out)
        # (The cloud profile saves what it learnt while coming up.)
        settings = lab_settings.Settings.load(settings.state_dir)
        self.config, self.settings = config, settings
        agent.ensure(settings, out=self.out)
        return settings

    def close(self):
        if self.settings is not None:
            control.down(self.settings, out=self.out)
        self.config = self.settings = None
