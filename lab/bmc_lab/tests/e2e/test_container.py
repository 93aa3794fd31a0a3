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

"""Container deploys on a real QEMU node (IPMI, iPXE, the agent ramdisk).

One lab, one node: the demo image runs in job mode from a RAM root and
the run report comes back through the vendor passthru (one run per
tunables profile, each checked by the tests that read its report); then
a kernel that never calls back is deployed and must time out into
DEPLOYFAIL with the node powered off; the benchmark's baseline, Ironic's
``direct`` deploy of a whole-disk image, must boot the node from its
disk; a service step must change the tunables of a running container
without a reboot; and the configdrive of ``node deploy --config-drive``
must reach the container (keypair, user data, a ``config-2`` device).
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import direct_job
from bmc_lab import diskimage
from bmc_lab import ironic_service
from bmc_lab import logcursor
from bmc_lab import nodes
from bmc_lab import smoke
from bmc_common import protocol
from ironic_bmc.drivers import boot_report



def _ram_job(lab, profile):
    """The demo image in job mode from a RAM root, with a tunables
    profile and a message; what the tests below check, observed once."""
    image = container_job.push_demo_image(lab)
    conductor_log = logcursor.Cursor(lab.log('ironic.log'))
    container_job.deploy(lab, image, mode=protocol.MODE_JOB, extra={
        protocol.II_TUNABLES: profile,
        # The job outlives the agent's first check of it (6 s).
        protocol.II_ENV: json.dumps({'DEMO_MESSAGE': 'hello-from-e2e',
                                     'DEMO_SLEEP': '6'})})
    report = container_job.wait_report(lab)
    print(container_job.format_report(report))
    cli = lab_client.get_client(lab)
    run = {'report': report,
           'power_before_undeploy': nodes.bmc_power_state(lab, 0),
           'state_before_undeploy': cli.node.get(
               lab.node_name(0)).provision_state}
    container_job.undeploy(lab)
    run['power_after_undeploy'] = nodes.bmc_power_state(lab, 0)
    run['conductor_log'] = conductor_log.text()
    return run


@pytest.fixture(scope='module')
def ram_job(lab):
    """``ram_job(profile)``: the RAM job of that tunables profile, deployed
    once for every test that checks it (one boot each, not one per
    test)."""
    runs = {}

    def get(profile):
        if profile not in runs:
            runs[profile] = _ram_job(lab, profile)
        return runs[profile]
    return get


def test_job_runs_from_ram_and_reports(ram_job):
    run = ram_job('thp-always')
    report = run['report']
    assert report['workload_exit_code'] == 0
    assert 'hello-from-e2e' in report['output_tail']
    # The root the workload saw is the overlay over the RAM image.
    assert 'root fs:  overlay' in report['output_tail']
    assert report['image_digest'].startswith('sha256:')
    assert report['artifact']['format'] == 'erofs'
    # Checked block by block when read, not hashed whole before mounting.
    assert report['staging']['verify'] == 'dm-verity'
    assert report['staging']['hash_s'] == 0
    names = [s['name'] for s in report['stages']]
    for stage in (protocol.STAGE_ARTIFACT_READY, protocol.STAGE_POWER_ON,
                  protocol.STAGE_AGENT_UP, protocol.STAGE_ROOTFS_STAGED,
                  protocol.STAGE_WORKLOAD_STARTED,
                  protocol.STAGE_WORKLOAD_EXITED,
                  protocol.STAGE_POWERED_OFF):
        assert stage in names
    for s in report['stages']:
        assert s['end'] >= s['start'], s
    # Where agent-up went: every phase measured, in boot order, adding up
    # to agent-up (they are consecutive marks on the conductor's clock).
    boot = report['boot']
    assert 'not_measured' not in boot, boot
    phases = boot['phases']
    assert list(phases) == [p[0] for p in boot_report.PHASES]
    assert all(v >= 0 for v in phases.values()), boot
    assert abs(sum(phases.values()) - boot['agent_up_s']) < 0.1, boot
    assert boot['initramfs_bytes'] > 10e6
    # Job mode: the node is powered off, still ACTIVE until undeployed.
    assert run['power_before_undeploy'] == 'off'
    assert run['state_before_undeploy'] == 'active'
    assert run['power_after_undeploy'] == 'off'


# (One profile: "never" is applied and read back, by the workload too,
# in test_tenant's flavor-trait job, through the same agent code; a
# second RAM job here showed nothing more, for a boot.)
@pytest.mark.parametrize('profile,expected', [('thp-always', 'always')])
def test_tunables_read_back_and_energy(ram_job, profile, expected):
    run = ram_job(profile)
    report = run['report']
    # The job outlived the first check: its exit reached the conductor by
    # the agent's one heartbeat, not by a poll.
    assert ('The agent of node %s heartbeats: its workload ended'
            % report['node']) in run['conductor_log']
    assert 'Invalid or missing agent_token' not in run['conductor_log']
    assert report['workload_exit_code'] == 0
    thp = report['tunables']['thp']
    assert thp['requested'] == expected
    assert thp['actual'] == expected and thp['ok'] is True, thp
    # The workload itself sees the setting: "[never]" or "[always]".
    assert '[%s]' % expected in report['output_tail']
    assert protocol.STAGE_TUNABLES_APPLIED in [s['name']
                                               for s in report['stages']]
    energy = report['energy']
    assert energy.get('available', True), energy
    assert energy['method'] == 'ipmi-dcmi'
    assert energy['bmc_samples_workload'] >= 1
    assert 0 < energy['bmc_joules_workload'] < energy['bmc_joules_run']
    # QEMU nodes have no RAPL; the report says why.
    assert energy['rapl'].get('available') is False
    assert energy['rapl']['reason']


#: The callback timeout of the test below: no agent is ever expected, so
#: the lab's (long enough for any boot) need not be waited out.
NEVER_CALLS_BACK_TIMEOUT = 60


def test_kernel_that_never_calls_back_times_out(lab):
    # The smoke initrd boots but runs no agent: nothing ever calls back.
    kernel, initrd = smoke.prepare_images(lab)
    image = container_job.push_demo_image(lab)
    with ironic_service.ironic_overridden(lab, {'conductor': {
            'deploy_callback_timeout': NEVER_CALLS_BACK_TIMEOUT}}):
        _never_calls_back(lab, image, kernel, initrd)


def _never_calls_back(lab, image, kernel, initrd):
    cli = lab_client.get_client(lab)
    name = lab.node_name(0)
    cli.node.update(name, [
        {'op': 'add', 'path': '/deploy_interface', 'value': 'container'},
        {'op': 'add', 'path': '/instance_info/container_image',
         'value': image},
        {'op': 'add', 'path': '/instance_info/kernel',
         'value': 'file://' + kernel},
        {'op': 'add', 'path': '/instance_info/ramdisk',
         'value': 'file://' + initrd},
    ])
    cli.node.set_provision_state(name, 'active')
    node = lab_client.StateWatcher(cli, name).wait(
        'deploy failed', 600, fail_states=('active',))
    assert 'timeout' in node.last_error.lower() or \
        'timed out' in node.last_error.lower(), node.last_error
    # Ironic moves the node to DEPLOYFAIL, then cleans up (powers off).
    deadline = time.monotonic() + 120
    while (cli.node.get(name).power_state != 'power off'
           and time.monotonic() < deadline):
        time.sleep(2)
    assert nodes.bmc_power_state(lab, 0) == 'off'
    staged = [p for p in _listdir(lab.http_root + '/' + node.uuid)
              if p.startswith('rootfs-')]
    assert staged == []
    # Back to the pool (this also clears the kernel that never boots from
    # instance_info, so the next deploy is unaffected).
    container_job.undeploy(lab)
    assert not cli.node.get(name).instance_info


def _listdir(path):
    return os.listdir(path) if os.path.isdir(path) else []


def test_direct_deploy_baseline_boots_from_disk(lab, tmp_path):
    """The benchmark's baseline: Ironic's own direct deploy, booted."""
    tree = str(tmp_path / 'root')
    container_job.build_demo_tree(tree)
    image = direct_job.build_image(lab, tree, '/bin/true')
    cli = lab_client.get_client(lab)
    before = cli.node.get(lab.node_name(0)).deploy_interface
    console = nodes.console_cursor(lab, 0)
    try:
        result = direct_job.run(lab, image, timeout=600)
    finally:
        os.unlink(image['path'])
    print(result)
    states = [t[1] for t in result['transitions']]
    assert 'active' in states
    assert result['workload_started_s'] > result['active_s'] > 0
    booted = console.text()
    # The second boot came from the written disk, not the network.
    assert 'SYSLINUX' in booted
    assert '%s nonce=%s' % (diskimage.MARKER, image['nonce']) in booted
    node = cli.node.get(lab.node_name(0))
    assert node.provision_state == 'available'
    assert node.deploy_interface == before
    assert 'deploy_ramdisk' not in node.driver_info
    assert nodes.bmc_power_state(lab, 0) == 'off'


def test_service_steps_change_a_running_container_in_place(lab):
    """Servicing an ACTIVE node: new run-time tunables, no reboot."""
    image = container_job.push_demo_image(lab)
    command = ['/bin/sh', '-c', 'while true; do sleep 5; done']
    container_job.deploy(lab, image, mode=protocol.MODE_SERVICE,
                         extra={protocol.II_COMMAND: json.dumps(command),
                                protocol.II_TUNABLES: 'thp-always'})
    report = container_job.wait_report(lab, states=('running',))
    assert report['tunables']['thp']['actual'] == 'always'
    console = nodes.console_cursor(lab, 0)
    cli = lab_client.get_client(lab)
    name = lab.node_name(0)
    cli.node.set_provision_state(
        name, 'service', os_ironic_api_version='1.87', servicesteps=[
            {'interface': 'deploy', 'step': 'bmc_set_tunables',
             'args': {'tunables': {'thp': 'never'}}}])
    watcher = lab_client.StateWatcher(cli, name)
    watcher.wait('active', timeout=300, fail_states=('service failed',
                                                     'error'))
    report = container_job.wait_report(lab, states=('running',))
    thp = report['tunables']['thp']
    assert (thp['previous'], thp['actual'], thp['ok']) == ('always',
                                                          'never', True)
    # In place: the node never went through a boot again.
    assert 'Linux version' not in console.text()
    assert nodes.bmc_power_state(lab, 0) == 'on'
    container_job.undeploy(lab)
    assert nodes.bmc_power_state(lab, 0) == 'off'


def test_demo_stopped_mid_deploy_runs_again(lab):
    """``bmc-lab demo`` stopped part-way (Ctrl-C) leaves its deploy under
    way; the next demo waits for it, undeploys it and runs its job."""
    demo = [sys.executable, '-m', 'bmc_lab.cli', '--state-dir',
            lab.state_dir, 'demo']
    cli = lab_client.get_client(lab)
    name = lab.node_name(0)
    # Ctrl-C as at a terminal: a process started in the background
    # inherits SIGINT ignored (and Python then ignores it too).
    first = subprocess.Popen(
        demo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while cli.node.get(name).provision_state not in (
                'deploying', 'wait call-back'):
            assert first.poll() is None, first.stdout.read()
            assert time.monotonic() < deadline, 'the demo never deployed'
            time.sleep(1)
    finally:
        first.send_signal(signal.SIGINT)
        out, _ = first.communicate(timeout=60)
    print(out)
    # One line that says what goes on and what to run, no traceback.
    assert first.returncode == 130
    assert 'interrupted; what it started in the lab goes on' in out
    assert 'Traceback' not in out
    assert cli.node.get(name).provision_state != 'available'

    second = subprocess.run(demo, capture_output=True, text=True,
                            timeout=1500)
    print(second.stdout, second.stderr)
    assert second.returncode == 0, second.stderr[-2000:]
    assert 'by an earlier run; undeploying it first' in second.stdout
    assert 'Traceback' not in second.stderr
    report = json.loads(second.stdout.strip().splitlines()[-1])
    assert report['workload_exit_code'] == 0
    assert cli.node.get(name).provision_state == 'available'
    assert nodes.bmc_power_state(lab, 0) == 'off'


#: The tenant's Nova keypair, as meta_data.json carries it.
KEYPAIR = ('ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEJtY2NvbmZpZ2RyaXZlZTJl'
           'dGVzdGtleQ tenant@e2e')

CONFIGDRIVE_PROBE = r"""
echo "== keys"; cat /root/.ssh/authorized_keys
stat -c 'mode %a %U' /root/.ssh /root/.ssh/authorized_keys
echo "== user_data"; cat {path}/openstack/latest/user_data; echo
echo "== files"; cd {path} && find . -type f | sort
touch {path}/x 2>/dev/null && echo "drive writable" || echo "drive read-only"
for f in /sys/block/loop*/loop/backing_file; do
    case $(cat $f) in *config-2.iso*)
        dev=${{f#/sys/block/}}; dev=${{dev%%/*}}
        echo "label $(dd if=/dev/$dev bs=1 skip=32808 count=8 2>/dev/null)";;
    esac
done
"""


def test_configdrive_keypair_and_user_data_reach_the_container(lab):
    """Issue 28 item 4: the configdrive of ``node deploy --config-drive``
    (a JSON object Ironic builds the ISO from, as the CLI sends it) reaches
    the container: the keypair in root's authorized_keys, the files
    read-only under /run/bmc/config-drive, a config-2 block device."""
    image = container_job.push_demo_image(lab)
    command = ['/bin/sh', '-c', CONFIGDRIVE_PROBE.format(
        path=protocol.CONFIGDRIVE_PATH)]
    start = time.monotonic()
    container_job.deploy(lab, image, extra={
        protocol.II_COMMAND: json.dumps(command)}, configdrive={
            'meta_data': {'public_keys': {'tenant-key': KEYPAIR},
                          'uuid': 'e2e-configdrive'},
            'user_data': '#!/bin/sh\necho hi'})
    report = container_job.wait_report(lab)
    stages = {s['name']: s for s in report['stages']}
    print('configdrive run: %.1f s from the deploy request to the report; '
          'power-on to agent-up %.1f s; boot %s' % (
              time.monotonic() - start,
              stages[protocol.STAGE_AGENT_UP]['end']
              - stages[protocol.STAGE_POWER_ON]['start'],
              json.dumps(report.get('boot', {}).get('phases'))))
    assert report['workload_exit_code'] == 0, report['output_tail']
    lines = report['output_tail'].splitlines()
    keys = lines[lines.index('== keys') + 1:lines.index('== user_data') - 2]
    assert keys == [KEYPAIR], lines
    assert 'mode 700 root' in lines and 'mode 600 root' in lines, lines
    assert lines[lines.index('== user_data') + 1:][:2] == [
        '#!/bin/sh', 'echo hi'], lines
    assert {'./openstack/latest/meta_data.json',
            './openstack/latest/user_data'} <= set(lines), lines
    assert 'drive read-only' in lines, lines
    assert 'label config-2' in lines, lines
    drive = report['configdrive']
    assert drive['used'] is True and drive['public_keys'] == 1, drive
    assert 'openstack/latest/user_data' in drive['files'], drive
    node = drive['node']
    assert node['authorized_keys'] == 1, drive
    assert node['device'].startswith('/dev/loop'), drive
    print('configdrive on the node: %s s' % node.get('seconds'))
    container_job.undeploy(lab)
