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

"""A conductor dies under a running container; another takes it over.

The scaled profile with two conductors (ironic-api and two
ironic-conductor processes on MariaDB and RabbitMQ, each conductor with
its own artifact cache and report directory).  A job runs on a QEMU
node; the conductor that deployed it is killed (SIGKILL).  The other one
must take the node over when the dead one leaves the hash ring: stage
the node's boot files again, sample its power, watch the workload,
record its exit and power the node off; the undeploy must leave nothing
behind, and the dead conductor, once back, must release what it held.
"""

import os
import time

import pytest

from bmc_common import protocol
from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import ironic_service
from bmc_lab.tests.e2e import fault_table
from bmc_lab.tests.e2e.test_faults import _big_image
from bmc_lab.tests.e2e.test_faults import _bystander

#: Long enough for the take-over (heartbeat_timeout 20 s, hash ring
#: refresh 10 s, sync_local_state_interval 15 s in the lab) to happen
#: while the job still runs, and for the survivor to sample power ten
#: times after it (every 2 s): in CI the take-over came 28 s after the
#: job started.
JOB = ['/bin/sh', '-c', 'echo started; sleep 90; '
       'echo finished after the take-over']




@pytest.fixture(scope='module')
def lab(lab_pool):
    settings = lab_pool.get('scaled')
    settings.demo_image = container_job.push_demo_image(settings)
    settings.bystander = _bystander(settings)
    return settings


def _conductor_index(lab, host):
    for i in range(lab.conductors):
        if lab.conductor_host(i) == host:
            return i
    raise AssertionError('unknown conductor %r' % host)


def _pinned(lab, index, node_uuid):
    pins = os.path.join(lab.conductor_dir(index, 'container_cache'),
                        'pins')
    if not os.path.isdir(pins):
        return []
    return [k for k in os.listdir(pins)
            if node_uuid in os.listdir(os.path.join(pins, k))]


def _work(lab, index):
    work = os.path.join(lab.conductor_dir(index, 'container_cache'),
                        'work')
    return os.listdir(work) if os.path.isdir(work) else []


def _published(lab, node_uuid):
    node_dir = os.path.join(lab.http_root, node_uuid)
    if not os.path.isdir(node_dir):
        return []
    return [n for n in os.listdir(node_dir) if n.startswith('rootfs-')]


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError('%s did not happen within %ds' % (what, timeout))


def _other(cli, lab):
    other = cli.node.get(lab.bystander)
    return other.provision_state, other.power_state, other.last_error


def test_conductor_crash_other_conductor_takes_over(lab):
    cli = lab_client.get_client(lab)
    other_before = _other(cli, lab)
    assert other_before[0] == 'active'
    name = lab.node_name(0)
    container_job.deploy(lab, lab.demo_image, mode=protocol.MODE_JOB,
                         extra={protocol.II_COMMAND: JOB})
    node = cli.node.get(name, fields=['uuid', 'conductor'])
    uuid = node.uuid
    first = _conductor_index(lab, node.conductor)
    second = 1 - first
    report = container_job.wait_report(lab, states=('running',),
                                       timeout=60)
    assert not report.get('takeovers')
    ipxe_config = os.path.join(lab.http_root, uuid, 'config')
    assert os.path.exists(ipxe_config)
    # The node holds its rootfs: the artifact URL is gone already; the
    # first conductor's cache keeps the entry pinned for the run.
    assert _published(lab, uuid) == []
    assert _pinned(lab, first, uuid)

    crashed_at = time.time()
    ironic_service.stop_ironic(lab, crash=True,
                               names=[lab.conductor_process(first)])

    # The API maps the node to the survivor once the dead conductor's
    # heartbeat is older than heartbeat_timeout.
    _wait(lambda: cli.node.get(name, fields=['conductor']).conductor
          == lab.conductor_host(second), 120, 'the hash ring change')
    report = container_job.wait_report(lab, states=('finished', 'failed'),
                                       timeout=400)
    node = cli.node.get(name)
    row = dict(fault='conductor crash, workload running (scaled: the '
                     'other conductor takes over)',
               provision_state=node.provision_state,
               power=node.power_state, report_state=report.get('state'),
               last_error=node.last_error or report.get('error'))
    assert report['state'] == 'finished', report
    assert report['workload_exit_code'] == 0
    assert 'finished after the take-over' in report['output_tail']
    # The exit heartbeat can reach the survivor while the dead
    # conductor's lock still holds the node: not an error of the run.
    assert node.last_error is None, node.last_error
    takeovers = report['takeovers']
    assert [t['conductor'] for t in takeovers] == [
        lab.conductor_host(second)]
    assert takeovers[0]['time'] > crashed_at
    # The survivor staged the boot files again (a reboot would boot)...
    assert os.path.getmtime(ipxe_config) > crashed_at
    # ... and sampled power from the take-over on.
    energy = report['energy']
    assert energy['available'] is True, energy
    assert energy['complete'] is False, energy
    assert energy['bmc_samples_workload'] >= 10, energy
    assert lab.conductor_host(second) in energy['note']
    # The survivor saw the job end and powered the node off.
    power = _wait(lambda: cli.node.get(name).power_state == 'power off',
                  60, 'power off after the job')
    assert power
    assert node.provision_state == 'active'

    container_job.undeploy(lab)
    assert _published(lab, uuid) == []
    assert not os.path.exists(ipxe_config)
    assert _pinned(lab, second, uuid) == []
    # The dead conductor's pin stays until it comes back; then its sweep
    # releases it (the node is no longer its own).
    assert _pinned(lab, first, uuid)
    ironic_service.start_ironic_processes(lab, [lab.conductor_process(first)])
    _wait(lambda: not _pinned(lab, first, uuid), 90,
          'the restarted conductor releasing its cache pin')
    node = cli.node.get(name)
    row.update(left_over=_published(lab, uuid) + _pinned(lab, 0, uuid)
               + _pinned(lab, 1, uuid),
               others_untouched=_other(cli, lab) == other_before,
               takeovers=len(takeovers))
    fault_table.record(**row)
    assert node.provision_state == 'available'
    assert node.power_state == 'power off'
    assert not node.last_error
    assert row['left_over'] == []
    assert row['others_untouched']


def test_conductor_crash_mid_build_other_conductor_builds(lab):
    cli = lab_client.get_client(lab)
    other_before = _other(cli, lab)
    name = lab.node_name(0)
    image = _big_image(lab, 'takeover', 120)
    container_job.deploy(lab, image, wait=False)
    node = _wait(lambda: (lambda n: n if n.provision_state ==
                          'wait call-back' else None)(
        cli.node.get(name, fields=['uuid', 'conductor',
                                   'provision_state'])),
        120, 'the deploy step returning (build running)')
    uuid = node.uuid
    first = _conductor_index(lab, node.conductor)
    second = 1 - first
    ironic_service.stop_ironic(lab, crash=True,
                               names=[lab.conductor_process(first)])
    report = container_job.wait_report(lab, states=('finished', 'failed'),
                                       timeout=600)
    node = cli.node.get(name)
    row = dict(fault='conductor crash while the image builds (scaled: the '
                     'other conductor builds it)',
               provision_state=node.provision_state,
               power=node.power_state, report_state=report.get('state'),
               last_error=node.last_error or report.get('error'))
    assert report['state'] == 'finished', report
    assert report['workload_exit_code'] == 0
    assert report.get('build_restarts') == 1, report
    # The survivor built it in its own cache.
    assert report['artifact']['path'].startswith(
        lab.conductor_dir(second, 'container_cache')), report['artifact']
    container_job.undeploy(lab)
    # The dead conductor's half-built work files stay until it is back;
    # its start-up sweep removes them.
    ironic_service.start_ironic_processes(lab, [lab.conductor_process(first)])
    _wait(lambda: not _work(lab, first) and not _pinned(lab, first, uuid),
          90, 'the restarted conductor cleaning its cache')
    node = cli.node.get(name)
    row.update(left_over=_published(lab, uuid) + _pinned(lab, 0, uuid)
               + _pinned(lab, 1, uuid) + _work(lab, 0) + _work(lab, 1),
               others_untouched=_other(cli, lab) == other_before,
               build_restarts=report.get('build_restarts'))
    fault_table.record(**row)
    assert node.provision_state == 'available'
    assert row['left_over'] == []
    assert row['others_untouched']
