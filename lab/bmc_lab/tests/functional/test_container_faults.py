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

"""Bad input to the container deploy, against real Ironic processes.

Real Ironic (embedded profile), real nginx, real docker-registry; the
nodes use fake power, since every fault here is found before the agent
would be needed.  Each case must end in a clear refusal or a DEPLOYFAIL
whose last_error names the cause, with the node powered off, nothing
staged for it and the artifact cache untouched.
"""

import os
import time

import pytest
from ironicclient.common.apiclient import exceptions as client_exc

from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import control
from bmc_lab import ironic_conf
from bmc_lab import ociimage
from bmc_lab.tests.functional import registry_fixture
from bmc_lab.tests import labfixture
from ironic_bmc_client import sweep_apply


@pytest.fixture(scope='module')
def lab():
    settings = labfixture.lab_settings_for('functional', nodes=0)
    control.up(settings, out=None)
    # Boot files must exist for validation; these nodes never boot.
    for name in (ironic_conf.AGENT_KERNEL, ironic_conf.AGENT_RAMDISK,
                 'modules-default.cpio.gz'):
        with open(os.path.join(settings.images_dir, name), 'wb') as f:
            f.write(b'not booted in this test')
    settings.demo_image = container_job.push_demo_image(settings)
    yield settings
    control.down(settings, out=None)


_counter = [0]


@pytest.fixture
def node(lab):
    cli = lab_client.get_client(lab)
    _counter[0] += 1
    node = cli.node.create(
        name='fault-%d' % _counter[0], driver='fake-hardware',
        boot_interface='ipxe', deploy_interface='container',
        vendor_interface='container', network_interface='noop',
        power_interface='fake', management_interface='fake',
        properties={'memory_mb': 2048, 'cpu_arch': 'x86_64'})
    cli.port.create(address='52:54:00:fa:00:%02x' % _counter[0],
                    node_uuid=node.uuid)
    watcher = lab_client.StateWatcher(cli, node.uuid)
    cli.node.set_provision_state(node.uuid, 'manage')
    watcher.wait('manageable', 60)
    cli.node.set_provision_state(node.uuid, 'provide')
    watcher.wait('available', 60)
    return node


def _cache_entries(lab):
    path = lab.path('ironic', 'container_cache', 'entries')
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def _deploy_fails(lab, node, **instance_info):
    cli = lab_client.get_client(lab)
    cache_before = _cache_entries(lab)
    cli.node.update(node.uuid, [
        {'op': 'add', 'path': '/instance_info/%s' % k, 'value': v}
        for k, v in instance_info.items()])
    cli.node.set_provision_state(node.uuid, 'active')
    failed = lab_client.StateWatcher(cli, node.uuid).wait(
        'deploy failed', 120, fail_states=('active',))
    assert failed.power_state == 'power off'
    node_dir = os.path.join(lab.http_root, node.uuid)
    staged = [n for n in (os.listdir(node_dir)
                          if os.path.isdir(node_dir) else [])
              if n.startswith('rootfs-')]
    assert staged == []
    # A failed build leaves nothing behind; successful ones are kept.
    assert set(cache_before) <= set(_cache_entries(lab))
    return failed.last_error


def test_unknown_tag(lab, node):
    ref = '%s/bmc/demo:no-such-tag' % lab.registry_address
    error = _deploy_fails(lab, node, container_image=ref)
    assert 'no-such-tag' in error
    assert 'not found' in error.lower()


def test_unknown_repository(lab, node):
    ref = '%s/bmc/nothing:1' % lab.registry_address
    assert 'not found' in _deploy_fails(lab, node,
                                        container_image=ref).lower()


def test_registry_unreachable(lab, node):
    port = registry_fixture.free_port()
    error = _deploy_fails(lab, node,
                          container_image='127.0.0.1:%d/x/y:1' % port)
    assert 'unreachable' in error.lower() or 'connect' in error.lower()
    assert '127.0.0.1:%d' % port in error


def test_pull_secret_not_sent_to_an_unlisted_registry(lab, node):
    """The operator's pull secret goes only to the registries of
    [container]credential_registries (the lab's own); another registry,
    one a tenant could name, never receives it."""
    with registry_fixture.DockerRegistry(user='u', password='p') as reg:
        image = ociimage.build_image([[ociimage.Entry('f', data=b'x')]],
                                     cmd=['/f'])
        ociimage.Pusher(reg.address, auth=('u', 'p')).push_image(
            'private/app', '1', image)
        error = _deploy_fails(lab, node,
                              container_image=reg.address + '/private/app:1',
                              image_pull_secret='u:p')
    assert 'requires credentials' in error, error
    assert ('image_pull_secret, which is sent only to the registries of '
            '[container]credential_registries') in error, error


def test_layer_digest_mismatch(lab, node):
    with registry_fixture.DockerRegistry() as reg:
        image = ociimage.build_image([[ociimage.Entry('f', data=b'x' * 99)]],
                                     cmd=['/f'])
        ociimage.Pusher(reg.address).push_image('c/app', '1', image)
        reg.corrupt_blob(image.layer_digests[0], b'tampered' * 10)
        error = _deploy_fails(lab, node,
                              container_image=reg.address + '/c/app:1')
    assert 'digest' in error.lower()


def test_path_traversal_layer(lab, node):
    image = ociimage.build_image(
        [[ociimage.Entry('../../escaped', data=b'owned')]], cmd=['/x'])
    ociimage.Pusher(lab.registry_address).push_image('bad/traversal', '1',
                                                     image)
    error = _deploy_fails(
        lab, node,
        container_image=lab.registry_address + '/bad/traversal:1')
    assert '../../escaped' in error


def test_symlink_escape_layer(lab, node):
    image = ociimage.build_image(
        [[ociimage.Entry('etc', 'symlink', linkname='/etc')],
         [ociimage.Entry('etc/owned', data=b'x')]], cmd=['/x'])
    ociimage.Pusher(lab.registry_address).push_image('bad/symlink', '1',
                                                     image)
    error = _deploy_fails(
        lab, node, container_image=lab.registry_address + '/bad/symlink:1')
    assert 'etc/owned' in error
    assert not os.path.exists('/etc/owned')


def test_image_larger_than_ram(lab, node):
    cli = lab_client.get_client(lab)
    cli.node.update(node.uuid, [{'op': 'replace',
                                 'path': '/properties/memory_mb',
                                 'value': 1}])
    error = _deploy_fails(lab, node, container_image=lab.demo_image)
    assert 'MiB' in error and 'RAM' in error


@pytest.mark.parametrize('key,value,expected', [
    ('container_stream_cache', 'lots', 'must be a size'),
    ('container_walltime', '0', 'more than 0'),
    ('container_walltime', 'forever', 'not a duration'),
    ('container_rlimits', '{"memlock": -7}', 'rlimit memlock'),
    ('container_privileged', 'sometimes', 'true or false'),
    ('container_results', '["/proc/self/status"]', 'a mount of the container'),
    ('container_rootfs', 'floppy', 'unknown value'),
    ('container_mode', 'batch', 'unknown value'),
    ('container_command', 'not-json', 'JSON'),
    ('kernel', 'http://10.0.2.100:8080/no-such-kernel', 'kernel'),
])
def test_refused_at_validate(lab, node, key, value, expected):
    cli = lab_client.get_client(lab)
    ii = {'container_image': lab.demo_image, key: value}
    if key == 'kernel':
        # Reachable from the conductor: the lab's own HTTP server.
        ii[key] = 'http://127.0.0.1:%d/no-such-kernel' % lab.ports.http
        ii['ramdisk'] = 'file://' + os.path.join(lab.images_dir,
                                                 ironic_conf.AGENT_RAMDISK)
    cli.node.update(node.uuid, [
        {'op': 'add', 'path': '/instance_info/%s' % k, 'value': v}
        for k, v in ii.items()])
    with pytest.raises(client_exc.BadRequest) as exc:
        cli.node.set_provision_state(node.uuid, 'active')
    assert key in str(exc.value)
    assert expected in str(exc.value)
    assert cli.node.get(node.uuid).provision_state == 'available'


def _tunables_step_args(cli, node):
    """Deploy ``node``; the arguments of the tunables step in the step
    list Ironic computed (read while the node waits for its agent, which
    never comes); the node undeployed after."""
    cli.node.set_provision_state(node.uuid, 'active')
    try:
        deadline = time.monotonic() + 120
        while (cli.node.get(node.uuid).provision_state != 'wait call-back'
               and time.monotonic() < deadline):
            time.sleep(1)
        steps = cli.node.get(node.uuid).driver_internal_info['deploy_steps']
        ours = [s for s in steps if s['step'] == 'bmc_apply_tunables']
        return ours[0]['args'] if ours else None
    finally:
        cli.node.set_provision_state(node.uuid, 'deleted')
        lab_client.StateWatcher(cli, node.uuid).wait('available', 120)


def test_deploy_template_selects_tunables(lab, node):
    """A flavor trait selects a tunables profile through a deploy template.

    The deploy cannot finish here (no agent), but the step list Ironic
    computed for it must carry the template's arguments, which the
    bmc_apply_tunables step reads.
    """
    cli = lab_client.get_client(lab)
    try:
        cli.deploy_template.delete('CUSTOM_THP_NEVER')
    except client_exc.NotFound:
        pass
    cli.deploy_template.create(name='CUSTOM_THP_NEVER', steps=[{
        'interface': 'deploy', 'step': 'bmc_apply_tunables',
        'args': {'tunables': 'thp-never'}, 'priority': 85}])
    cli.node.add_trait(node.uuid, 'CUSTOM_THP_NEVER')
    cli.node.update(node.uuid, [
        {'op': 'add', 'path': '/instance_info/container_image',
         'value': lab.demo_image},
        {'op': 'add', 'path': '/instance_info/traits',
         'value': ['CUSTOM_THP_NEVER']}])
    try:
        assert _tunables_step_args(cli, node) == {'tunables': 'thp-never'}
    finally:
        cli.deploy_template.delete('CUSTOM_THP_NEVER')


def test_sweep_winner_recorded_as_a_template_selects_it(lab, node):
    """``sweep --apply-template``: the winner becomes the template a
    flavor's trait names (created, then moved by a later sweep), and the
    next deploy with that trait carries the winner to the tunables step;
    an operator's own template of that name is never overwritten."""
    cli = lab_client.get_client(lab)
    trait = 'CUSTOM_BMC_BEST_DEMO'
    for name in (trait, 'CUSTOM_OPERATORS_OWN'):
        try:
            cli.deploy_template.delete(name)
        except client_exc.NotFound:
            pass
    done = sweep_apply.apply_to_template(
        cli, trait, {'kernel': 'default', 'profile': 'thp-always',
                     'size': ''}, lab.demo_image)
    assert done['created']
    done = sweep_apply.apply_to_template(
        cli, trait, {'kernel': 'default', 'profile': 'thp-never',
                     'size': ''}, lab.demo_image)
    assert not done['created']
    cli.deploy_template.create(name='CUSTOM_OPERATORS_OWN', steps=[{
        'interface': 'deploy', 'step': 'bmc_apply_tunables',
        'args': {'tunables': 'low-noise'}, 'priority': 85}])
    with pytest.raises(sweep_apply.ApplyError, match='not written by a '
                                                     'sweep'):
        sweep_apply.check_template(cli, 'CUSTOM_OPERATORS_OWN', {})
    cli.node.add_trait(node.uuid, trait)
    cli.node.update(node.uuid, [
        {'op': 'add', 'path': '/instance_info/container_image',
         'value': lab.demo_image},
        {'op': 'add', 'path': '/instance_info/traits', 'value': [trait]}])
    try:
        assert _tunables_step_args(cli, node) == {'tunables': 'thp-never'}
    finally:
        for name in (trait, 'CUSTOM_OPERATORS_OWN'):
            cli.deploy_template.delete(name)
