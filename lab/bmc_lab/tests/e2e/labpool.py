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

A test module names the lab configuration it needs (``LABS``) and the
work group it belongs to (``GROUPS``, an ``xdist_group`` mark).  A worker
runs whole groups, and the groups of one configuration one after the
other (``order_items``), so the :class:`Pool` of a worker keeps one lab up
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
LABS = {
    'embedded': dict(deploy_callback_timeout=150),
    # Two vCPUs: the low-noise job partitions them.
    'runtime': dict(deploy_callback_timeout=150, node_cpus=2),
    # Slow artifact downloads (to act mid-download), runs lost sooner.
    'faults': dict(deploy_callback_timeout=150, workload_lost_timeout=45,
                   artifact_rate_limit='4m'),
    'scaled': dict(profile=lab_settings.PROFILE_SCALED, conductors=2,
                   deploy_callback_timeout=300),
    # (Nova refuses a second cloud on one RabbitMQ: one worker at most
    # runs the cloud group.)
    'cloud': dict(profile=lab_settings.PROFILE_CLOUD),
}

#: Work groups, longest first, and the lab each one runs on.  pytest-xdist
#: (``--dist loadgroup --no-loadscope-reorder``) gives the two workers the
#: first two and each worker the next one as it runs out: longest first
#: keeps the two workers' ends close.  Two groups share the embedded
#: configuration so that its tests split over both workers.
GROUPS = {
    'faults': 'faults',
    'rootfs': 'embedded',
    'cloud': 'cloud',
    'container': 'embedded',
    'runtime': 'runtime',
    'scaled': 'scaled',
}


def group_of(item):
    mark = item.get_closest_marker('xdist_group')
    if mark is None:
        raise ValueError('%s: e2e tests need an xdist_group mark naming '
                         'one of the groups in labpool.GROUPS'
                         % item.nodeid)
    name = mark.args[0] if mark.args else mark.kwargs.get('name')
    if name not in GROUPS:
        raise ValueError('%s: unknown e2e group %r; groups: %s'
                         % (item.nodeid, name, ', '.join(GROUPS)))
    return name


def order_items(items):
    """Sort tests by group (``GROUPS`` order), stable inside a group.

    Without workers too, each lab configuration then comes up once.
    """
    rank = {name: i for i, name in enumerate(GROUPS)}
    items.sort(key=lambda item: rank[group_of(item)])


def is_clean(settings):
    """Ironic runs and every lab node is available and powered off."""
    if not control.is_up(settings):
        return False
    cli = lab_client.get_client(settings)
    for i in range(settings.nodes):
        node = cli.node.get(settings.node_name(i))
        if node.provision_state != 'available':
            try:
                container_job.undeploy(settings, i)
            except Exception as exc:
                LOG.warning('Node %s stays %s (%s): the lab comes up again',
                            node.name, node.provision_state, exc)
                return False
            node = cli.node.get(settings.node_name(i))
        if node.power_state != 'power off':
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
