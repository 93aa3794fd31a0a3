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

"""A tenant's run group through Nova: ``openstack server create --min 2
--max 2 --config-drive true --property container_group=mpi --property
container_group_size=2`` on the cloud lab's two nodes runs the MPI
ping-pong image (built here from Debian's MPICH) as one job, and
deleting the servers frees both nodes.  It is the project's one MPI run
on real nodes (the ``ssh`` launcher, ranks, the group report): the
conductor-side group tests (test_group.py) run busybox members."""

import json
import time

import pytest

from bmc_lab.cloud import profile as cloud_profile
from bmc_lab.cloud import register
from bmc_lab import container_job
from bmc_lab import group_job
from bmc_lab import procs
from bmc_lab import recipes
from bmc_lab.recipes import build as recipe_build
from bmc_lab import tenant_job

#: Two TCG nodes boot side by side with the cloud's services.
TIMEOUT = 1200


@pytest.fixture(scope='module')
def lab(lab_pool):
    settings = lab_pool.get('cloud')
    tenant_job.wait_for_nodes(settings, count=2)
    return settings


def _servers(conn, name, count, timeout=TIMEOUT):
    """The servers of the request named ``name`` once all are built."""
    deadline = time.monotonic() + timeout
    while True:
        found = [s for s in conn.compute.servers(name='^%s-' % name)]
        states = sorted(s.status for s in found)
        if any(s == 'ERROR' for s in states):
            raise procs.LabError('a server of %s failed: %s' % (
                name, [(s.name, s.fault) for s in found]))
        if len(found) == count and all(s in ('ACTIVE', 'SHUTOFF')
                                       for s in states):
            return sorted(found, key=lambda s: s.name)
        if time.monotonic() > deadline:
            raise procs.LabError('the servers of %s are %s after %ds'
                                 % (name, states, timeout))
        time.sleep(5)


def test_tenant_runs_an_mpi_group_through_nova(lab):
    build = recipe_build.Builder().build(recipes.get('mpi'))
    reference = recipe_build.push(build, lab.registry_address)
    image = tenant_job.create_image(
        lab, 'e2e-mpi', reference, container_mode='job',
        container_env={recipes.SIZE_ENV: '200'})
    conn = cloud_profile.tenant(lab, register.DEMO)
    flavor = conn.compute.find_flavor(register.FLAVOR, ignore_missing=False)
    network = conn.network.find_network(register.NETWORK,
                                        ignore_missing=False)
    conn.compute.create_server(
        name='e2e-mpi', image_id=image.id, flavor_id=flavor.id,
        networks=[{'uuid': network.id}], min_count=2, max_count=2,
        config_drive=True,
        metadata={'container_group': 'mpi', 'container_group_size': '2'})
    servers = _servers(conn, 'e2e-mpi', 2)
    nodes = [tenant_job.node_of(lab, s.id) for s in servers]
    reports = [container_job.wait_report(
        lab, name=n.name, timeout=TIMEOUT,
        # (Not the report an earlier tenant run left on the node.)
        until=lambda r: ((r.get('group') or {}).get('name') == 'mpi'
                         and r.get('state') in ('finished', 'failed')))
        for n in nodes]
    group = group_job.report(lab, name=nodes[0].name)
    print(group_job.format_report(group))
    by_rank = {r['group']['rank']: r for r in reports}
    rank0 = by_rank[0]
    print(rank0['output_tail'])
    assert rank0['workload_exit_code'] == 0, rank0['output_tail']
    result = json.loads(rank0['output_tail'].strip().splitlines()[-1])
    assert result['size'] == 2, result
    assert sorted(result['ranks']) == ['mpi-0', 'mpi-1'], result
    assert result['latency_us'] > 0
    for report in reports:
        assert report['state'] == 'finished', report
        assert report['project_id'] == rank0['project_id']
        assert report['group']['id'] == rank0['group']['id']
    assert group['state'] == 'finished', group
    assert group['ended_by']['rank'] == 0 and group['ended_by']['ok']
    assert [m['rank'] for m in group['members']] == [0, 1], group
    assert group['slowest_t_ready_s'] is not None, group
    for server in servers:
        conn.compute.delete_server(server)
    for server in servers:
        conn.compute.wait_for_delete(server, wait=600)
    tenant_job.wait_available(lab, [n.id for n in nodes])
