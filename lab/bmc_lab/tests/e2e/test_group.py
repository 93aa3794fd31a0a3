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

"""Run groups on two QEMU nodes joined by the lab's run-group network
(a second NIC each, on a loopback multicast segment).

* The busybox group (launcher ``none``): each member prints what the
  group gave it (rank, size, hostfile, its group address) and pings
  every member by name; then rank 1's node is killed mid-run: the
  group fails, rank 0's run is stopped with a reason naming rank 1, and
  undeploying rank 0 alone undeploys both.
* A lessee that writes the operator's scope as its ``project_id`` and
  the operator's group name forms a group of its own, and its undeploy
  leaves the operator's member alone (issue 43).

The MPI group (launcher ``ssh``: Debian's MPICH, two ranks launched
from rank 0 over the SSH the group set up) runs through Nova, as a
tenant runs it (test_tenant_group.py): the same conductor code, so one
MPI run on real nodes shows it (two boots fewer).
"""

import json
import time

import pytest

from bmc_common import protocol
from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import group_job
from bmc_lab import nodes

MEMBERS = (0, 1)
#: Boots of two TCG nodes on two cores, and an image each.
DEPLOY_TIMEOUT = 900


@pytest.fixture(scope='module')
def lab(lab_pool):
    return lab_pool.get('group')


def _wait_all(lab, group, states, timeout=DEPLOY_TIMEOUT):
    """The members' reports of run group ``group`` once in ``states``
    (not the reports the members' previous runs left)."""
    return [container_job.wait_report(
        lab, index, timeout=timeout,
        until=lambda r: ((r.get('group') or {}).get('name') == group
                         and r.get('state') in states))
        for index in MEMBERS]


def _undeploy_one_undeploys_all(lab):
    cli = lab_client.get_client(lab)
    cli.node.set_provision_state(lab.node_name(0), 'deleted')
    for index in MEMBERS:
        lab_client.StateWatcher(cli, lab.node_name(index)).wait(
            'available', 300)


BUSYBOX_MEMBER = r"""
b=busybox
h=$($b hostname)
echo "member rank=$BMC_RANK size=$BMC_SIZE group=$BMC_GROUP host=$h"
echo "hosts=$BMC_GROUP_HOSTS iface=$BMC_GROUP_IFACE address=$BMC_GROUP_ADDRESS"
echo "hostfile=$($b tr '\n' ' ' < "$BMC_HOSTFILE")"
for h in $BMC_GROUP_HOSTS; do
  # (By the address /etc/hosts gives: a static busybox has no resolver.)
  a=$(awk -v h="$h" '$2 == h { print $1 }' /etc/hosts)
  $b ping -c 2 -W 10 "$a" >/dev/null && echo "reached $h at $a" \
    || echo "lost $h at $a"
done
sleep 900
"""


@pytest.fixture(scope='module')
def busybox_group(lab):
    """The busybox group, killed mid-run: what the tests check, once."""
    image = container_job.push_demo_image(lab)
    group_job.deploy(lab, image, 'bb', MEMBERS,
                     launcher=protocol.GROUP_LAUNCHER_NONE,
                     extra={protocol.II_COMMAND: json.dumps(
                         ['/bin/sh', '-c', BUSYBOX_MEMBER])})
    running = _wait_all(lab, 'bb', ('running',))
    # Both have pinged the other (a reachable member answers at once).
    # (A sleep: a run's output reaches its report only when it ends, and
    # rank 1's never does, it is killed; rank 0's tells both pings.)
    time.sleep(10)
    nodes.virsh('destroy', lab.node_name(1))
    ended = _wait_all(lab, 'bb', ('failed', 'finished'), timeout=400)
    group = group_job.report(lab, 0)
    print(group_job.format_report(group))
    _undeploy_one_undeploys_all(lab)
    return {'running': running, 'ended': ended, 'group': group}


def test_group_started_together(busybox_group):
    for rank, report in enumerate(busybox_group['running']):
        group = report['group']
        assert (group['rank'], group['size'], group['name']) == (
            rank, 2, 'bb'), group
        assert [m['hostname'] for m in group['members']] == ['bb-0', 'bb-1']
    started = [[s['end'] for s in r['stages']
                if s['name'] == protocol.STAGE_WORKLOAD_STARTED][0]
               for r in busybox_group['running']]
    released = [r['group']['barrier']['released_at']
                for r in busybox_group['running']]
    # Neither workload started before the other member had staged.
    staged = [r['group']['barrier']['staged_at']
              for r in busybox_group['running']]
    assert min(started) >= max(staged), (started, staged)
    # Nor was either released before both had staged: together means the
    # barrier's order, not a gap in seconds (a TCG boot's pace varies).
    assert min(released) >= max(staged), (released, staged)
    print('barrier released %.1f s apart; workloads started %.1f s apart'
          % (abs(released[0] - released[1]), abs(started[0] - started[1])))


def test_members_see_group_and_reach_each_other(busybox_group):
    rank0 = busybox_group['ended'][0]
    out = rank0['output_tail']
    assert 'member rank=0 size=2 group=bb host=bb-0' in out, out
    assert 'hosts=bb-0 bb-1' in out, out
    assert 'hostfile=bb-0 bb-1' in out, out
    assert 'reached bb-0 at 192.0.2.10' in out, out
    assert 'reached bb-1 at 192.0.2.11' in out, out


def test_killed_member_fails_group(busybox_group):
    rank0, rank1 = busybox_group['ended']
    assert rank1['state'] == 'failed', rank1
    assert 'is lost' in rank1['error'], rank1['error']
    assert rank0['state'] == 'failed', rank0
    assert 'run group bb ended: rank 1 (' in rank0['error'], rank0['error']
    assert rank0['group']['ended_by']['rank'] == 1, rank0['group']
    group = busybox_group['group']
    assert group['state'] == 'failed', group
    assert group['ended_by']['rank'] == 1
    assert [m['state'] for m in group['members']] == ['failed', 'failed']


def _group_key(cli, name, timeout=180):
    """The run group key the deploy step recorded on node ``name``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node = cli.node.get(name, fields=['driver_internal_info'])
        rec = ((node.driver_internal_info or {}).get('bmc_deploy')
               or {}).get('group') or {}
        if rec.get('key'):
            return rec
        time.sleep(2)
    raise AssertionError('node %s recorded no run group in %d s'
                         % (name, timeout))


def _undeploy(cli, name, timeout=180):
    """Undeploy ``name`` once Ironic takes the request (not while a
    deploy step holds it: "deploying")."""
    deadline = time.monotonic() + timeout
    while cli.node.get(name).provision_state == 'deploying':
        assert time.monotonic() < deadline, name
        time.sleep(2)
    if cli.node.get(name).provision_state != 'available':
        cli.node.set_provision_state(name, 'deleted')


def test_a_lessee_naming_the_operators_scope_stays_outside(lab):
    """Issue 43, finding 2, on real processes: node 1's lessee writes the
    operator's scope ("-") as instance_info/project_id and the operator's
    group name.  It is a group of its own, and its undeploy leaves the
    operator's member deploying.  (Neither node needs its agent: the
    group is decided at the deploy step, before the boot.)"""
    cli = lab_client.get_client(lab)
    image = container_job.push_demo_image(lab)
    operators, attackers = lab.node_name(0), lab.node_name(1)
    cli.node.update(attackers, [{'op': 'add', 'path': '/lessee',
                                 'value': 'e2e-attacker'}])
    try:
        group_job.deploy(lab, image, 'spoof', MEMBERS,
                         launcher=protocol.GROUP_LAUNCHER_NONE,
                         extra={'project_id': '-'})
        assert _group_key(cli, operators)['key'] == '-/spoof'
        assert _group_key(cli, attackers)['key'] == 'e2e-attacker/spoof'
        _undeploy(cli, attackers)
        lab_client.StateWatcher(cli, attackers).wait('available', 300)
        left = cli.node.get(operators, fields=['provision_state',
                                               'driver_internal_info'])
        assert left.provision_state in ('deploying', 'wait call-back'), (
            left.provision_state)
        assert 'plan' not in left.driver_internal_info['bmc_deploy'][
            'group']
    finally:
        for name in (operators, attackers):
            _undeploy(cli, name)
        for name in (operators, attackers):
            lab_client.StateWatcher(cli, name).wait('available', 300)
        cli.node.update(attackers, [{'op': 'remove', 'path': '/lessee'}])
