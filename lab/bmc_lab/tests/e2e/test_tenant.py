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

"""The tenant path on a real QEMU node: Glance image -> Nova -> Ironic.

The lab's cloud profile (Keystone, Glance, Placement, Nova with the
ironic driver, the Neutron API) in front of the lab's Ironic, on the e2e
ports (cloud ports + 20000).  The tenant "demo", with its own
credentials, uploads a Glance image whose properties name the container
and boots a server; nothing is set on the node by hand.
"""

import base64
import json
import os
import shutil
import subprocess
import time

import pytest

from bmc_lab.cloud import horizon
from bmc_lab.cloud import profile as cloud_profile
from bmc_lab.cloud import register
from bmc_lab import container_job
from bmc_lab import horizon_browser
from bmc_lab import procs
from bmc_lab import programs
from bmc_lab import tempest_job
from bmc_lab import tenant_job
from ironic_bmc import image_properties




@pytest.fixture(scope='module')
def lab(lab_pool):
    settings = lab_pool.get('cloud')
    reference = container_job.push_demo_image(settings)
    tenant_job.wait_for_nodes(settings)
    return settings, reference


#: Screenshots of the Horizon test: kept after the run (test artifacts).
SHOTS_DIR = 'horizon-screenshots'


def _node_clean(settings, node_id):
    node = cloud_profile.admin(settings).baremetal.get_node(node_id)
    assert node.provision_state == 'available'
    assert node.power_state == 'power off'
    assert node.instance_id is None
    assert image_properties.SNAPSHOT_KEY not in node.driver_internal_info
    return node


#: The tenant's user data (a script the container could run).
USER_DATA = b'#!/bin/sh\necho user data of e2e-tenant-job\n'
#: The job: the demo script, then what the config drive brought.
SHOW_CONFIG_DRIVE = (
    '/demo.sh && echo "keys: $(cat /root/.ssh/authorized_keys)" && '
    'echo "user data: $(tail -n 1 '
    '/run/bmc/config-drive/openstack/latest/user_data)"')


@pytest.fixture(scope='module')
def nova_job(lab):
    """One server of the tenant, observed once for the two tests below
    (one node boot, not two): a job from a Glance image with an
    environment property, on the flavor whose trait selects the
    ``thp-never`` tunables profile, run to its end and deleted."""
    settings, reference = lab
    # The job prints what the config drive brought into the container.
    image = tenant_job.create_image(
        settings, 'e2e-tenant-job', reference, container_mode='job',
        container_env={'DEMO_MESSAGE': 'from a Glance property'},
        container_results=['/etc/passwd'],
        container_command=['/bin/sh', '-c', SHOW_CONFIG_DRIVE])
    public_key = tenant_job.keypair(settings, 'e2e-tenant-key')
    t0 = time.monotonic()
    server = tenant_job.boot(
        settings, 'e2e-tenant-job', image.id,
        flavor='bm.container.thp-never', key_name='e2e-tenant-key',
        user_data=base64.b64encode(USER_DATA).decode(), config_drive=True)
    print('server create -> %s: %.1fs' % (server.status,
                                          time.monotonic() - t0))
    node = tenant_job.node_of(settings, server.id)
    report = container_job.wait_report(settings, name=node.name)
    print(container_job.format_report(report))
    # The job ended, Ironic powered the node off and told Nova.
    final = tenant_job.wait_server(settings, server.id, 'SHUTOFF', 300)
    # The tenant reads its run with its own token, while the server
    # lives and after it is deleted.
    own = _read_run(settings, server.id)
    cli = _cli_reads(settings, server.id)
    tenant_job.delete(settings, server.id)
    return {'image': image, 'node': node, 'report': report,
            'server': server, 'own': own, 'cli': cli,
            'public_key': public_key,
            'own_after_delete': _read_run(settings, server.id),
            'final_status': final.status,
            'status_after_delete': tenant_job.server_status(settings,
                                                            server.id),
            'node_after_delete': _node_clean(settings, node.id)}


def _read_run(settings, server_id):
    """What tenant "demo" reads of its server's run through the
    container runs API."""
    api = tenant_job.runs_api(settings)
    runs = api.get('/v1/runs?instance_uuid=%s' % server_id,
                   raise_exc=False).json()['runs']
    seen = {'runs': runs}
    if runs:
        base = '/v1/runs/%s' % runs[0]['deploy_id']
        seen['report'] = api.get(base, raise_exc=False).json()
        output = api.get(base + '/output', raise_exc=False)
        seen['output'] = (output.headers.get('X-Run-Output'), output.text)
        seen['results'] = api.get(base + '/results', raise_exc=False).json()
        result = api.get(base + '/results/etc/passwd', raise_exc=False)
        seen['result'] = (result.status_code, result.content,
                          result.headers.get('X-Result-Sha256'))
    return seen


def _openstack(settings, *args, cloud='bmc-lab-demo'):
    """``openstack --os-cloud CLOUD ARGS`` with the lab's clouds.yaml:
    (exit status, stdout, stderr)."""
    env = dict(os.environ,
               OS_CLIENT_CONFIG_FILE=cloud_profile.write_clouds_yaml(
                   settings))
    proc = subprocess.run(
        [programs.venv_bin('openstack'), '--os-cloud', cloud] + list(args),
        capture_output=True, text=True, env=env, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def _cli_reads(settings, server_id):
    """What the tenant's CLI plugin gives for its server: the report,
    the output, the result files and both charts (files written under
    the lab's state directory)."""
    out_dir = os.path.join(settings.state_dir, 'tenant-cli')
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    seen = {'dir': out_dir}
    seen['show'] = _openstack(settings, 'baremetal', 'container', 'show',
                              server_id, '-f', 'json')
    seen['logs'] = _openstack(settings, 'baremetal', 'container', 'logs',
                              server_id)
    seen['results'] = _openstack(settings, 'baremetal', 'container',
                                 'results', server_id, '--output-dir',
                                 os.path.join(out_dir, 'results'))
    for kind in ('timeline', 'power'):
        seen[kind] = _openstack(
            settings, 'baremetal', 'container', 'chart', server_id,
            '--kind', kind, '--format', 'png',
            '-o', os.path.join(out_dir, kind + '.png'))
    # The other tenant, with its own token, for the same server.
    seen['other_show'] = _openstack(settings, 'baremetal', 'container',
                                    'show', server_id,
                                    cloud='bmc-lab-demo-b')
    return seen


def test_tenant_reads_its_run_through_the_cli_plugin(nova_job):
    """``openstack baremetal container show/logs/results/chart`` as the
    tenant, with its own credentials; the other tenant is told nothing
    of it."""
    cli = nova_job['cli']
    status, out, err = cli['show']
    assert status == 0, err
    shown = json.loads(out)
    assert shown['state'] == 'finished'
    assert shown['workload_exit_code'] == 0
    assert shown['deploy_id'] == nova_job['report']['deploy_id']
    status, out, err = cli['logs']
    assert status == 0, err
    assert 'message:  from a Glance property' in out
    status, out, err = cli['results']
    assert status == 0, err
    with open(os.path.join(cli['dir'], 'results', 'etc', 'passwd'),
              'rb') as f:
        assert f.read() == b'root:x:0:0:root:/root:/bin/sh\n'
    for kind in ('timeline', 'power'):
        status, out, err = cli[kind]
        assert status == 0, (kind, err)
        with open(os.path.join(cli['dir'], kind + '.png'), 'rb') as f:
            assert f.read(8) == b'\x89PNG\r\n\x1a\n', kind
    status, out, err = cli['other_show']
    assert status == 1
    assert 'no run' in err.lower() or 'not found' in err.lower(), err


def test_tenant_reads_its_run_with_its_own_token(nova_job):
    """Report, full output and result file through the container runs
    API, as the project that launched the server; the operator's side of
    the report is not shown."""
    own = nova_job['own']
    operator_report = nova_job['report']
    assert [r['deploy_id'] for r in own['runs']] == [
        operator_report['deploy_id']]
    summary = own['runs'][0]
    assert summary['state'] == 'finished'
    assert summary['workload_exit_code'] == 0
    assert summary['instance_uuid'] == nova_job['server'].id
    assert summary['t_ready_s'] > 0
    report = own['report']
    assert report['project_id'] == summary['project_id']
    names = [s['name'] for s in report['stages']]
    assert {s['name'] for s in operator_report['stages']} <= set(names)
    assert 'workload-started' in names
    assert report['tunables']['thp']['actual'] == 'never'
    for hidden in ('kernel', 'ramdisk', 'artifact', 'takeovers'):
        assert hidden not in report, hidden
    assert report['energy']['available'] is True, report['energy']
    curve = report['power_series']
    assert curve['points'] and curve['workload'][0] is not None
    kind, text = own['output']
    assert kind == 'full'
    assert 'message:  from a Glance property' in text
    assert own['results']['results'][0]['path'] == '/etc/passwd'
    status, content, digest = own['result']
    assert (status, content) == (200, b'root:x:0:0:root:/root:/bin/sh\n')
    assert digest == own['results']['results'][0]['sha256']
    # The run stays the project's once the server is deleted.
    after = nova_job['own_after_delete']
    assert [r['deploy_id'] for r in after['runs']] == [
        operator_report['deploy_id']]
    assert after['result'][0] == 200


def test_tenant_runs_a_job_through_nova(lab, nova_job):
    settings, reference = lab
    node = nova_job['node']
    # Nova set only the image's UUID; the deploy read the rest from
    # Glance and kept it while the node is deployed.
    assert node.instance_info['image_source'] == nova_job['image'].id
    assert 'container_image' not in node.instance_info
    assert node.deploy_interface == 'container'
    snap = node.driver_internal_info[image_properties.SNAPSHOT_KEY]
    assert snap['container_image'] == reference
    assert snap['container_mode'] == 'job'

    report = nova_job['report']
    assert report['image'] == reference
    assert report['workload_exit_code'] == 0
    assert 'message:  from a Glance property' in report['output_tail']
    assert nova_job['final_status'] == 'SHUTOFF'
    # Deleted: the server is gone, the node available, powered off and
    # holding nothing of the run.
    assert nova_job['status_after_delete'] is None
    assert nova_job['node_after_delete'].instance_id is None


def test_keypair_and_user_data_reach_the_container(nova_job):
    """The server's keypair and user data, through the config drive Nova
    built, inside the container."""
    report = nova_job['report']
    assert 'keys: %s' % nova_job['public_key'] in report['output_tail']
    assert 'user data: echo user data of e2e-tenant-job' in (
        report['output_tail'])
    assert report['configdrive']['used'] is True, report['configdrive']
    assert report['configdrive']['public_keys'] == 1


def test_flavor_trait_selects_tunables(nova_job):
    """A flavor requiring CUSTOM_BMC_TUNABLES_THP_NEVER: Nova passes the
    trait, Ironic's deploy template of that name runs bmc_apply_tunables
    with the profile, and the node reads the knob back."""
    node = nova_job['node']
    assert node.instance_info['traits'] == ['CUSTOM_BMC_TUNABLES_THP_NEVER']
    thp = nova_job['report']['tunables']['thp']
    assert (thp['requested'], thp['actual'], thp['ok']) == (
        'never', 'never', True), thp
    # The job's output shows the knob as the workload saw it.
    assert 'thp:      always madvise [never]' in (
        nova_job['report']['output_tail'])


def test_tenant_launches_from_horizon(lab):
    """Horizon in headless Chromium: the tenant logs in, launches an
    instance from the container image with the bare-metal flavor through
    Project -> Instances -> Launch Instance, and sees it Active."""
    settings, reference = lab
    cloud = cloud_profile.loaded(settings)
    # A service that keeps running, so the instance stays Active.
    image = tenant_job.create_image(
        settings, 'e2e-horizon-app', reference, container_mode='service',
        container_command=['/bin/sleep', '3600'])
    shots = settings.path(SHOTS_DIR)
    browser = horizon_browser.Browser(horizon.url(cloud), shots)
    try:
        browser.login(register.DEMO, cloud.password)
        t0 = time.monotonic()
        browser.launch('e2e-horizon', image.name, register.FLAVOR)
        browser.wait_status('e2e-horizon', 'Active', timeout=900)
        print('Horizon launch -> Active: %.1fs' % (time.monotonic() - t0))
        browser.shot('instance-active')
    finally:
        browser.close()
    print('screenshots: %s' % ', '.join(browser.shots))
    # Every page of the launch, then the instance Active, each a real
    # PNG (what a person would have seen at each step).
    names = [os.path.basename(p)[len('00-'):-len('.png')]
             for p in browser.shots]
    assert names == ['launch-details', 'launch-source', 'launch-flavor',
                     'launch-networks', 'instance-active'], names
    for path in browser.shots:
        with open(path, 'rb') as f:
            assert f.read(8) == b'\x89PNG\r\n\x1a\n', path
        assert os.path.getsize(path) > 1000, path
    conn = cloud_profile.tenant(settings)
    server = conn.compute.find_server('e2e-horizon', ignore_missing=False)
    node = tenant_job.node_of(settings, server.id)
    assert node.instance_info['image_source'] == image.id
    report = container_job.wait_report(settings, name=node.name,
                                       states=('running',))
    assert report['mode'] == 'service'
    tenant_job.delete(settings, server.id)
    _node_clean(settings, node.id)


#: The Horizon plugin's screenshots, in SHOTS_DIR (the user guide's
#: doc/source/images/ takes them from there).
RUN_DETAIL_SHOT = 'horizon-run-detail.png'
RUNS_INDEX_SHOT = 'horizon-runs-index.png'


def test_tenant_sees_its_run_in_horizon(lab, nova_job):
    """Horizon's Project -> Compute -> Container runs (the project's
    plugin) as tenant "demo": the job's run is listed, and its page shows
    the state, exit code and T_ready the runs API gives the tenant, the
    stage timeline and the power curve as inline SVG, the whole output
    and the result file to download."""
    settings, _reference = lab
    cloud = cloud_profile.loaded(settings)
    report = nova_job['own']['report']
    deploy_id = report['deploy_id']
    shots = settings.path(SHOTS_DIR)
    browser = horizon_browser.Browser(horizon.url(cloud), shots)
    try:
        browser.login(register.DEMO, cloud.password)
        seen = browser.container_run(deploy_id, index_shot=RUNS_INDEX_SHOT,
                                     detail_shot=RUN_DETAIL_SHOT)
    finally:
        browser.close()
    print('screenshots: %s' % ', '.join(browser.shots))
    summary = seen['summary']
    print(summary)
    assert seen['state'] == 'finished'
    assert summary['State'] == 'finished'
    assert summary['Exit code'] == '0'
    assert summary['T_ready'] == '%.1f s' % report['t_ready_s']
    assert summary['Image'] == report['image']
    # Both charts drawn (inline SVG), none replaced by a message.
    assert seen['charts'] == ['timeline', 'power'], seen['unavailable']
    assert seen['html'].count('<svg class="bmc-chart') == 2
    # The run has ended: its whole output, and its result file.
    assert 'message:  from a Glance property' in seen['output']
    assert seen['results'] == ['/etc/passwd']
    for name in (RUNS_INDEX_SHOT, RUN_DETAIL_SHOT):
        path = os.path.join(shots, name)
        with open(path, 'rb') as f:
            assert f.read(8) == b'\x89PNG\r\n\x1a\n', path
        assert os.path.getsize(path) > 10000, path


#: Stands for a ramdisk image of the tenant's, made by the test.
TENANT_RAMDISK = 'a ramdisk image of the tenant'


@pytest.mark.parametrize('props,expected', [
    ({'container_command': 'not a list'},
     'property container_command of Glance image {image} must be a JSON '
     'list of strings'),
    # Operator-only: a file:// URL would read the conductor's disk.
    ({'kernel': 'file:///etc/shadow'},
     'Glance image {image}: property kernel may only be set by the '
     'operator'),
    ({'container_image': None},
     'Glance image {image} has no container_image property'),
    # The conductor connects to no host the operator did not allow (the
    # cloud's metadata service, here).
    ({'container_image': '169.254.169.254/x:1'},
     'property container_image of Glance image {image}: registry '
     '169.254.169.254 is not in [container]allowed_registries'),
    # A tenant's initrd never becomes the agent (it would get the node's
    # agent token).  (An image of the tenant's: Nova refuses a ramdisk_id
    # that names no image at the server's creation.)
    ({'ramdisk_id': TENANT_RAMDISK},
     'Glance image {image}: property ramdisk_id names the modules initrd '
     'of the kernel the image boots (kernel_id), and kernel_id is not '
     'set'),
], ids=['bad-command', 'operator-only-key', 'no-container-image',
        'internal-registry', 'tenant-ramdisk'])
def test_bad_image_fails_the_server_and_loses_nothing(lab, props,
                                                      expected):
    """What a tenant cannot use: the server goes to ERROR with a fault
    that says why; the node is powered off and available, nothing of the
    run stays."""
    settings, reference = lab
    props = dict(props)
    if props.get('ramdisk_id') == TENANT_RAMDISK:
        props['ramdisk_id'] = tenant_job.create_image(
            settings, 'e2e-tenant-ramdisk', None, disk_format='ari').id
    image = tenant_job.create_image(
        settings, 'e2e-tenant-bad', props.pop('container_image', reference),
        container_mode='job', **props)
    with pytest.raises(procs.LabError) as err:
        tenant_job.boot(settings, 'e2e-tenant-bad', image.id, timeout=600)
    # The server was created from this very image (names repeat).
    assert image.id in str(err.value)
    message = str(err.value)
    print(message)
    assert 'went to ERROR' in message
    assert expected.format(image=image.id) in message, message
    assert 'file:///etc/shadow' not in message
    conn = cloud_profile.tenant(settings)
    server = conn.compute.find_server('e2e-tenant-bad', ignore_missing=False)
    conn.compute.delete_server(server)
    conn.compute.wait_for_delete(server, wait=300)
    for n in tenant_job.wait_available(settings, timeout=300):
        _node_clean(settings, n.id)


#: The plugin's tests (tempest_plugin/): validation (5), Glance properties (6),
#: deploy templates (3), the runs API's personas (5) and the scenario (1).
TEMPEST_TESTS = 20


def test_tempest_plugin_against_the_cloud(lab):
    """``tempest run`` of the project's plugin with dynamic credentials:
    API tests through the real Ironic API and a scenario where a tenant
    boots a container image through Nova; none may be skipped."""
    settings, reference = lab
    t0 = time.monotonic()
    code, counts, log = tempest_job.run_on_lab(settings)
    with open(log) as f:
        output = f.read()
    print(output[-6000:])
    print('tempest: %.0fs' % (time.monotonic() - t0))
    assert code == 0, 'tempest failed; see %s' % log
    assert counts == {'Passed': TEMPEST_TESTS, 'Skipped': 0, 'Failed': 0,
                      'Expected Fail': 0, 'Unexpected Success': 0}, counts
    for n in tenant_job.wait_available(settings, timeout=300):
        _node_clean(settings, n.id)
