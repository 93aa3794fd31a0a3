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

"""The e2e tier's work groups and labs (no lab is brought up here)."""

import glob
import os

import pytest

from bmc_lab.tests.e2e import labpool
from bmc_lab.tests import labfixture

E2E_DIR = os.path.dirname(labpool.__file__)


def test_every_e2e_module_has_a_group_with_a_lab():
    modules = {os.path.basename(p)
               for p in glob.glob(os.path.join(E2E_DIR, 'test_*.py'))}
    assert modules == set(labpool.MODULE_GROUPS) | {labpool.SMOKE_MODULE}
    for group in set(labpool.MODULE_GROUPS.values()) | set(
            labpool.SMOKE_GROUPS.values()):
        assert labpool.GROUPS[group] in labpool.LABS


def test_group_of_a_node_id():
    assert labpool.group_of(
        'bmc_lab/tests/e2e/test_faults.py::test_registry_down') == 'faults'
    assert labpool.group_of(
        'lab/bmc_lab/tests/e2e/test_container.py::test_tunables_read_back_'
        'and_energy[thp-never-never]') == 'container'
    # Smoke goes with its profile's lab.
    for profile, group in (('embedded', 'rootfs'), ('scaled', 'scaled'),
                           ('cloud', 'cloud')):
        nodeid = ('bmc_lab/tests/e2e/test_smoke.py::test_ramdisk_deploy_'
                  'boots_node[%s]' % profile)
        assert labpool.group_of(nodeid) == group
        assert labpool.LABS[labpool.GROUPS[group]].get(
            'profile', 'embedded') == profile
    with pytest.raises(ValueError, match='MODULE_GROUPS'):
        labpool.group_of('bmc_lab/tests/e2e/test_new.py::test_x')


def test_the_cloud_runs_on_one_worker_only():
    # Nova refuses a second cloud on one RabbitMQ.
    clouds = [g for g, lab in labpool.GROUPS.items() if lab == 'cloud']
    assert clouds == ['cloud']


def test_two_workers_never_share_a_port_or_a_name():
    workers = tuple(range(labfixture.MAX_WORKERS)) + labfixture.SPARE_WORKERS
    assert len(set(workers)) == 4
    for tier in labfixture.PORT_SETS:
        labs = [labfixture.lab_settings_for(tier, worker=w) for w in workers]
        # The real workers' clouds (a spare worker runs none).
        clouds = [labfixture.lab_settings_for(tier, profile='cloud', worker=w)
                  for w in range(labfixture.MAX_WORKERS)]
        taken = [set(lab.ports.named(20).values()) for lab in labs] + [
            set(cloud.cloud_ports.named(True).values()) for cloud in clouds]
        for i, first in enumerate(labs):
            for second in labs[i + 1:]:
                assert first.name != second.name
                assert not second.node_name(0).startswith(
                    first.name + '-node-')
                assert first.state_dir != second.state_dir
        for i, ports in enumerate(taken):
            for other in taken[i + 1:]:
                assert not ports & other, (tier, sorted(ports & other))


def test_a_third_worker_is_refused(monkeypatch):
    monkeypatch.setenv('PYTEST_XDIST_WORKER', 'gw2')
    with pytest.raises(RuntimeError, match='at most 2 workers'):
        labfixture.worker_index()
