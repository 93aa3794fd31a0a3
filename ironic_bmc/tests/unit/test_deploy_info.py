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

import ipaddress
import json
import re
import socket
import types
from unittest import mock

import pytest
from ironic.common import exception

from ironic_bmc.conf import CONF
from ironic_bmc import deploy_info
from ironic_bmc import stream_cache
from ironic_bmc.image import egress
from ironic_bmc.image import pipeline
from ironic_bmc import image_properties


#: What the tests' registry names resolve to, unless a test says.
PUBLIC = '151.101.2.15'


@pytest.fixture(autouse=True)
def resolver():
    """Names resolve to a public address, without DNS."""
    answers = {}

    def getaddrinfo(host, port, *args, **kwargs):
        try:
            address = str(ipaddress.ip_address(host))   # a literal
        except ValueError:
            address = answers.get(host, PUBLIC)
        return [(socket.AF_INET6 if ':' in address else socket.AF_INET,
                 socket.SOCK_STREAM, 6, '', (address, port))]
    with mock.patch.object(egress.socket, 'getaddrinfo', autospec=True,
                           side_effect=getaddrinfo):
        yield answers
    CONF.clear_override('allowed_registries', 'container')
    CONF.clear_override('credential_registries', 'container')
    CONF.clear_override('tenant_credential_registries', 'container')


def _node(properties=None, **ii):
    return types.SimpleNamespace(instance_info=ii, driver_info={},
                                 driver_internal_info={},
                                 properties=properties or {},
                                 uuid='1be26c0b-03f2-4d2e-ae87-c02d7f33c123')


def test_image_required():
    with pytest.raises(exception.MissingParameterValue,
                       match='instance_info/container_image is required'):
        deploy_info.parse(_node())


def test_bad_reference_names_key():
    with pytest.raises(exception.InvalidParameterValue,
                       match='instance_info/container_image'):
        deploy_info.parse(_node(container_image='UPPER/Case::x'))


def test_defaults():
    info = deploy_info.parse(_node(container_image='reg:5000/a/b:1'))
    assert info.rootfs == 'ramfs'
    assert info.mode == 'service'
    assert info.command is None
    assert info.env == {}


def test_nfs_mode_is_accepted():
    info = deploy_info.parse(_node(container_image='r/a:1',
                                   container_rootfs='nfs'))
    assert info.rootfs == 'nfs'


def test_modes_not_built_yet_are_refused(monkeypatch):
    monkeypatch.setattr(deploy_info.protocol, 'ROOTFS_MODES_SUPPORTED',
                        ('ramfs',))
    with pytest.raises(exception.InvalidParameterValue,
                       match="container_rootfs: 'stream' is not supported "
                             "yet"):
        deploy_info.parse(_node(container_image='r/a:1',
                                container_rootfs='stream'))


MiB = 1024 * 1024


@pytest.mark.parametrize('value,expected', [
    (str(64 * MiB), 64 * MiB), (64 * MiB, 64 * MiB), ('512M', 512 * MiB),
    ('1.5GiB', 1536 * MiB), ('2g', 2048 * MiB), ('25%', 1024 * MiB),
    (' 100% ', 4096 * MiB)])
def test_stream_cache_sizes(value, expected):
    node = _node(properties={'memory_mb': 4096}, container_image='r/a:1',
                 container_rootfs='stream', container_stream_cache=value)
    info = deploy_info.parse(node)
    assert info.stream_cache == str(value).strip()
    assert stream_cache.bytes_of(node, info.stream_cache,
                                          'x') == expected


@pytest.mark.parametrize('value,memory_mb,message', [
    ('lots', 4096, "must be a size .* got 'lots'"),
    ('-1G', 4096, 'must be a size'),
    ('12K', 4096, 'less than 1 MiB'),
    ('8G', 4096, r'8G \(8192 MiB\) is more than the RAM of node .*'
                 r'memory_mb: 4096 MiB'),
    ('0%', 4096, 'more than 0% and at most 100%'),
    ('150%', 4096, 'more than 0% and at most 100%'),
    ('25%', None, 'a share of RAM, but node .* has no properties/memory_mb'),
])
def test_stream_cache_refused(value, memory_mb, message):
    node = _node(properties={'memory_mb': memory_mb} if memory_mb else {},
                 container_image='r/a:1', container_rootfs='stream',
                 container_stream_cache=value)
    with pytest.raises(exception.InvalidParameterValue,
                       match='instance_info/container_stream_cache.*'
                       + message):
        deploy_info.parse(node)


def test_stream_cache_without_memory_is_not_bounded_by_it():
    node = _node(container_image='r/a:1', container_rootfs='stream',
                 container_stream_cache='64G')
    assert stream_cache.bytes_of(
        node, deploy_info.parse(node).stream_cache, 'x') == 65536 * MiB


def test_unknown_rootfs_and_mode():
    with pytest.raises(exception.InvalidParameterValue,
                       match="container_rootfs: unknown value 'disk'"):
        deploy_info.parse(_node(container_image='r/a:1',
                                container_rootfs='disk'))
    with pytest.raises(exception.InvalidParameterValue,
                       match="container_mode: unknown value 'batch'"):
        deploy_info.parse(_node(container_image='r/a:1',
                                container_mode='batch'))


def test_command_and_env_from_cli_strings():
    info = deploy_info.parse(_node(
        container_image='r/a:1', container_command='["/bin/sh", "-c", "x"]',
        container_env='{"A": "1", "B": 2}', container_mode='job'))
    assert info.command == ['/bin/sh', '-c', 'x']
    assert info.env == {'A': '1', 'B': '2'}
    assert info.mode == 'job'


@pytest.mark.parametrize('value', ['not json', '[]', '[1]', '{"a": 1}',
                                   '"ls"'])
def test_bad_command(value):
    with pytest.raises(exception.InvalidParameterValue,
                       match='instance_info/container_command'):
        deploy_info.parse(_node(container_image='r/a:1',
                                container_command=value))


@pytest.mark.parametrize('value', ['[1]', '{"A=B": "1"}', '{"A": null}',
                                   '{"A": true}'])
def test_bad_env(value):
    with pytest.raises(exception.InvalidParameterValue,
                       match='instance_info/container_env'):
        deploy_info.parse(_node(container_image='r/a:1',
                                container_env=value))


def test_pull_secret_from_instance_then_driver_info():
    CONF.set_override('credential_registries', ['docker.io'], 'container')
    node = _node(container_image='r/a:1')
    node.driver_info = {'image_pull_secret': 'admin'}
    assert deploy_info.parse(node).pull_secret == 'admin'
    node.instance_info['image_pull_secret'] = 'user'
    assert deploy_info.parse(node).pull_secret == 'user'


@pytest.mark.parametrize('listed', [[], ['docker.io'], ['reg.example:5000']])
def test_pull_secret_goes_only_to_its_registries(listed):
    """A tenant who names its own registry does not get the operator's
    credentials sent there."""
    CONF.set_override('credential_registries', listed, 'container')
    node = _node(container_image='attacker.example/x:1')
    node.driver_info = {'image_pull_secret': 'operator:s3cret'}
    info = deploy_info.parse(node)
    assert info.pull_secret is None
    assert info.pull_secret_withheld is True
    node.instance_info['container_image'] = 'reg.example:5000/app:1'
    info = deploy_info.parse(node)
    expected = 'operator:s3cret' if 'reg.example:5000' in listed else None
    assert info.pull_secret == expected
    assert info.pull_secret_withheld is (expected is None)


@pytest.mark.parametrize('tenant_listed', [[], ['reg.example:5000']])
def test_operator_secret_not_sent_for_a_tenants_image(tenant_listed):
    """A tenant names, through its Glance image, an image of the
    operator's own registry: it is pulled anonymously unless the operator
    offers that registry to tenants."""
    CONF.set_override('credential_registries', ['reg.example:5000'],
                      'container')
    CONF.set_override('tenant_credential_registries', tenant_listed,
                      'container')
    node = _node(image_source='7c2a3b1e-5d4f-4e6a-8b9c-0d1e2f3a4b5c')
    node.driver_internal_info[image_properties.SNAPSHOT_KEY] = {
        'container_image': 'reg.example:5000/private/app:1'}
    node.driver_info = {'image_pull_secret': 'operator:s3cret'}
    info = deploy_info.parse(node)
    if tenant_listed:
        assert (info.pull_secret, info.pull_secret_withheld) == (
            'operator:s3cret', False)
    else:
        assert (info.pull_secret, info.pull_secret_withheld) == (None, True)
        assert 'tenant_credential_registries' in info.pull_secret_rule
    # The same image named by the operator (instance_info) gets it.
    node.instance_info['container_image'] = 'reg.example:5000/private/app:1'
    info = deploy_info.parse(node)
    assert (info.pull_secret, info.pull_secret_withheld) == (
        'operator:s3cret', False)


@pytest.mark.parametrize('image,address,why', [
    ('127.0.0.1:5000/x:1', None, '127.0.0.1, a loopback address'),
    ('[::1]:5000/x:1', None, '::1, a loopback address'),
    ('metadata.internal/x:1', '169.254.169.254',
     '169.254.169.254, a link-local address'),
    ('db.internal:3306/x:1', '10.1.2.3', '10.1.2.3, a private address'),
    ('mapped.example/x:1', '::ffff:192.168.1.1',
     '192.168.1.1, a private address'),
    ('self.example/x:1', '0.0.0.0', '0.0.0.0, a unspecified address'),
])
def test_registry_on_an_internal_address_refused_at_validate(
        resolver, image, address, why):
    """The conductor is no scanner of the control plane: an unlisted
    registry must resolve to global addresses only."""
    if address:
        resolver[image.split('/')[0].split(':')[0]] = address
    with pytest.raises(exception.InvalidParameterValue) as ctx:
        deploy_info.parse(_node(container_image=image))
    message = str(ctx.value)
    assert message.startswith('instance_info/container_image: ')
    assert 'resolves to %s' % why in message
    assert '[container]allowed_registries' in message


def test_conductors_own_address_refused(resolver):
    CONF.set_override('my_ip', '151.101.2.15')
    try:
        with pytest.raises(exception.InvalidParameterValue,
                           match="the conductor's own address"):
            deploy_info.parse(_node(container_image='me.example/x:1'))
    finally:
        CONF.clear_override('my_ip')


def test_listed_registry_may_be_internal(resolver):
    resolver['registry.internal'] = '10.1.2.3'
    CONF.set_override('allowed_registries', ['registry.internal'],
                      'container')
    info = deploy_info.parse(_node(container_image='registry.internal/x:1'))
    assert info.image == 'registry.internal/x:1'


def test_workload_args_honour_image_config_and_overrides():
    config = pipeline.ImageConfig(entrypoint=['/entry'], cmd=['a'],
                                  env=['PATH=/bin', 'X=image'],
                                  working_dir='/srv', user='1000:1000')
    info = deploy_info.parse(_node(container_image='r/a:1',
                                   container_env={'X': 'user'},
                                   container_mode='job'))
    args = deploy_info.workload_args(info, config)
    assert args == {'command': ['/entry', 'a'],
                    'env': {'PATH': '/bin', 'X': 'user'},
                    'workdir': '/srv', 'user': '1000:1000', 'mode': 'job',
                    'privileged': True, 'output_max': 16 * 1024 * 1024}
    info.command = ['/other']
    assert deploy_info.workload_args(info, config)['command'] == ['/other']


def test_workload_args_carry_the_run_limits_and_stop_signal():
    config = pipeline.ImageConfig(cmd=['/serve'], stop_signal='SIGQUIT')
    info = deploy_info.parse(_node(
        container_image='r/a:1', container_walltime='90m',
        container_privileged='false',
        container_rlimits='{"nofile": 4096}'))
    args = deploy_info.workload_args(info, config)
    assert args['stop_signal'] == 'SIGQUIT'
    assert args['walltime'] == 5400
    assert args['stop_grace'] == 10
    assert args['privileged'] is False
    assert args['rlimits'] == {'nofile': 4096}


def test_stop_signal_the_kernel_does_not_know_is_refused():
    config = pipeline.ImageConfig(cmd=['/serve'], stop_signal='SIGBOGUS')
    info = deploy_info.parse(_node(container_image='r/a:1'))
    with pytest.raises(exception.InvalidParameterValue,
                       match="StopSignal in its config.*'SIGBOGUS' is not a "
                             "signal name"):
        deploy_info.workload_args(info, config)


@pytest.mark.parametrize('key,value,message', [
    ('container_walltime', 0, 'container_walltime: 0: a walltime must be '
     'more than 0'),
    ('container_walltime', '-10', 'container_walltime: .*more than 0'),
    ('container_walltime', 'tomorrow', 'container_walltime: .*not a '
     'duration'),
    ('container_privileged', 'maybe', 'container_privileged must be true '
     'or false'),
    ('container_rlimits', '{"files": 1}', "container_rlimits: unknown "
     "rlimit 'files'"),
    ('container_rlimits', '[1]', 'container_rlimits: must be an object'),
    ('container_rlimits', '{nope', 'container_rlimits must be a JSON'),
])
def test_bad_run_limits_are_refused(key, value, message):
    with pytest.raises(exception.InvalidParameterValue, match=message):
        deploy_info.parse(_node(container_image='r/a:1', **{key: value}))


def test_results_normalized():
    info = deploy_info.parse(_node(
        container_image='r/a:1',
        container_results='["/results/out.csv", "/results//./out.csv", '
                          '"/work/log.txt", "/tmp/t.csv", "/run/app/r"]'))
    # /tmp and /run are the image's own directories: what the workload
    # leaves there is still there once it exits.
    assert info.results == ['/results/out.csv', '/work/log.txt',
                            '/tmp/t.csv', '/run/app/r']


@pytest.mark.parametrize('value,message', [
    ('["results/out.csv"]', 'not an absolute path'),
    ('["/results/../etc/shadow"]', 'without ".."'),
    ('["/proc/self/status"]', 'under /proc, a mount of the container'),
    ('["/dev/shm/x"]', 'under /dev'),
    ('["/"]', 'not an absolute path'),
    ('[]', 'list of 1 to 64'),
    ('"/results/out.csv"', 'list of 1 to 64'),
    ('[1]', 'list of 1 to 64'),
])
def test_bad_results_refused(value, message):
    with pytest.raises(exception.InvalidParameterValue,
                       match='container_results.*' + re.escape(message)):
        deploy_info.parse(_node(container_image='r/a:1',
                                container_results=value))


def test_privileged_refused_where_the_operator_forbids_it():
    CONF.set_override('allow_privileged', False, group='container')
    try:
        info = deploy_info.parse(_node(container_image='r/a:1'))
        assert info.privileged is False     # the default follows
        with pytest.raises(exception.InvalidParameterValue,
                           match=r'container_privileged: privileged '
                                 r'workloads are not allowed.*'
                                 r'allow_privileged = false'):
            deploy_info.parse(_node(container_image='r/a:1',
                                    container_privileged=True))
    finally:
        CONF.clear_override('allow_privileged', group='container')


def test_args_replace_cmd_and_keep_entrypoint():
    """container_args as ``docker run IMAGE ARGS``: the image's
    entrypoint script still runs."""
    config = pipeline.ImageConfig(entrypoint=['docker-entrypoint.sh'],
                                  cmd=['postgres'])
    info = deploy_info.parse(_node(container_image='r/a:1',
                                   container_args='["postgres", "-c", "x=1"]'))
    assert info.args == ['postgres', '-c', 'x=1']
    assert deploy_info.workload_args(info, config)['command'] == [
        'docker-entrypoint.sh', 'postgres', '-c', 'x=1']
    # [] runs the entrypoint alone; without an entrypoint, the args are
    # the command (as Docker).
    info = deploy_info.parse(_node(container_image='r/a:1',
                                   container_args=[]))
    assert deploy_info.workload_args(info, config)['command'] == [
        'docker-entrypoint.sh']
    info = deploy_info.parse(_node(container_image='r/a:1',
                                   container_args=['/bin/true']))
    assert deploy_info.workload_args(
        info, pipeline.ImageConfig(cmd=['x']))['command'] == ['/bin/true']
    info = deploy_info.parse(_node(container_image='r/a:1',
                                   container_args=[]))
    with pytest.raises(exception.InvalidParameterValue,
                       match='neither ENTRYPOINT nor CMD'):
        deploy_info.workload_args(info, pipeline.ImageConfig(cmd=['x']))


@pytest.mark.parametrize('value,message', [
    ('not json', 'must be a JSON list of strings'),
    ('"postgres"', 'must be a JSON list of strings'),
    ('[1]', 'must be a JSON list of strings'),
    ('{"a": "b"}', 'must be a JSON list of strings'),
    ('["a\\u0000b"]', 'NUL byte'),
])
def test_bad_args(value, message):
    with pytest.raises(exception.InvalidParameterValue,
                       match='instance_info/container_args.*' + message):
        deploy_info.parse(_node(container_image='r/a:1',
                                container_args=value))


def test_args_with_command_refused():
    with pytest.raises(exception.InvalidParameterValue,
                       match='container_args and .*container_command are '
                             'both set'):
        deploy_info.parse(_node(container_image='r/a:1',
                                container_command=['/bin/sh'],
                                container_args=['-c', 'x']))


@pytest.mark.parametrize('key,value', [
    ('container_command', ['/bin/sh', '-c', 'a\0b']),
    ('container_command', '["/bin/sh\\u0000"]'),
    ('container_env', {'A': 'a\0b'}),
    ('container_env', {'A\0': 'b'}),
])
def test_nul_bytes_refused_at_validate(key, value):
    with pytest.raises(exception.InvalidParameterValue,
                       match='instance_info/%s.*NUL|not a valid' % key):
        deploy_info.parse(_node(container_image='r/a:1', **{key: value}))


def test_nul_bytes_of_the_image_refused():
    info = deploy_info.parse(_node(container_image='r/a:1'))
    with pytest.raises(exception.InvalidParameterValue,
                       match='ENTRYPOINT or CMD of image r/a:1 contains a '
                             'NUL byte'):
        deploy_info.workload_args(info, pipeline.ImageConfig(
            cmd=['/bin/echo', 'a\0b']))
    with pytest.raises(exception.InvalidParameterValue,
                       match='Env of image r/a:1 contains a NUL byte'):
        deploy_info.workload_args(info, pipeline.ImageConfig(
            cmd=['/x'], env=['A=a\0b']))


def test_workload_args_need_a_command():
    info = deploy_info.parse(_node(container_image='r/a:1'))
    with pytest.raises(exception.InvalidParameterValue,
                       match='neither ENTRYPOINT nor CMD'):
        deploy_info.workload_args(info, pipeline.ImageConfig())


@pytest.mark.parametrize('key,value', [
    ('container_env', '{"BIG": "%s"}' % ('x' * 120000)),
    ('container_command', json.dumps(['/bin/sh', '-c', 'x' * 20000])),
])
def test_command_and_env_are_bounded(key, value):
    with pytest.raises(exception.InvalidParameterValue) as ctx:
        deploy_info.parse(_node(container_image='r/a:1', **{key: value}))
    assert str(ctx.value).startswith('instance_info/%s: ' % key)
    assert 'at most 16384 together' in str(ctx.value)
