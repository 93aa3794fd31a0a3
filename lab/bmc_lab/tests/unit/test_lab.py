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

import configparser
import os
import socket
import subprocess
import sys
import time
from unittest import mock

import pytest

from bmc_lab import ironic_conf
from bmc_lab import ironic_service
from bmc_lab import nodes
from bmc_lab import procs
from bmc_lab import settings as lab_settings
from bmc_lab import smoke


@pytest.fixture
def settings(tmp_path):
    return lab_settings.Settings(state_dir=str(tmp_path), nodes=2)


def _conf(settings):
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(ironic_conf.render(settings))
    return parser


def test_unknown_profile_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown lab profile 'big'"):
        lab_settings.Settings(state_dir=str(tmp_path), profile='big')


def test_settings_round_trip(settings):
    settings.ports.http = 9999
    settings.save()
    loaded = lab_settings.Settings.load(settings.state_dir)
    assert loaded == settings
    assert lab_settings.Settings.load(settings.path('nope')) is None


def test_embedded_profile_conf(settings):
    conf = _conf(settings)
    assert conf['DEFAULT']['rpc_transport'] == 'none'
    assert conf['database']['connection'].startswith('sqlite:///')
    assert conf['database']['connection'].endswith('ironic.sqlite')
    assert conf['deploy']['http_root'] == settings.http_root
    # Nodes reach services only through the guest-side host address.
    assert conf['deploy']['http_url'] == 'http://10.0.2.100:8080'
    assert conf['service_catalog']['endpoint_override'] == \
        'http://10.0.2.100:6385'
    assert conf['conductor']['file_url_allowed_paths'] == '%s,%s' % (
        settings.images_dir, settings.path('kernel-builds'))
    assert conf['container']['kernel_build_dir'] == settings.path(
        'kernel-builds')
    assert conf['api']['host_ip'] == '127.0.0.1'


def test_scaled_profile_conf(tmp_path):
    settings = lab_settings.Settings(state_dir=str(tmp_path),
                                     profile='scaled', name='x-y')
    conf = _conf(settings)
    assert conf['DEFAULT']['rpc_transport'] == 'oslo'
    assert conf['DEFAULT']['transport_url'].startswith('rabbit://')
    assert conf['database']['connection'] == \
        'mysql+pymysql://root@127.0.0.1:3306/x_y_ironic?charset=utf8'


def test_embedded_profile_has_no_keystone(settings):
    conf = _conf(settings)
    assert conf['DEFAULT']['auth_strategy'] == 'noauth'
    for section in ('keystone_authtoken', 'glance', 'nova'):
        assert not conf.has_section(section), section


def test_cloud_profile_conf(tmp_path):
    from bmc_lab.cloud import ports as cloud_ports
    settings = lab_settings.Settings(
        state_dir=str(tmp_path), profile='cloud', name='lab-c',
        cloud_ports=cloud_ports.CloudPorts.shifted(7))
    conf = _conf(settings)
    keystone = 'http://127.0.0.1:5007/v3'
    assert conf['DEFAULT']['auth_strategy'] == 'keystone'
    # Without it Nova's "ironic" user sees no node.
    assert conf['DEFAULT']['rbac_service_role_elevated_access'] == 'true'
    # The embedded Ironic still: sqlite, no RPC bus.
    assert conf['DEFAULT']['rpc_transport'] == 'none'
    assert conf['keystone_authtoken']['www_authenticate_uri'] == keystone
    for section in ('keystone_authtoken', 'glance', 'nova',
                    'service_catalog'):
        assert conf[section]['auth_url'] == keystone, section
        assert conf[section]['username'] == 'ironic', section
    # Agents still reach the API at the host's guest-side address.
    assert conf['service_catalog']['endpoint_override'] == \
        'http://10.0.2.100:6385'
    assert conf['nova']['send_power_notifications'] == 'true'
    assert settings.cloud_prefix == 'lab_c_cloud'
    settings.save()
    assert lab_settings.Settings.load(str(tmp_path)) == settings


def test_cloud_profile_runs_one_conductor(tmp_path):
    with pytest.raises(ValueError, match='conductors=2: the cloud profile'):
        lab_settings.Settings(state_dir=str(tmp_path), profile='cloud',
                              conductors=2)


def test_tenant_demo_needs_the_cloud_profile(tmp_path, capsys):
    from bmc_lab import cli
    rc = cli.main(['--state-dir', str(tmp_path), 'demo', '--tenant',
                   '--profile', 'scaled'])
    assert rc != 0
    assert '--tenant runs through Nova: it needs --profile cloud, not ' \
        'scaled' in capsys.readouterr().err



def test_an_interrupted_demo_says_what_to_run(tmp_path, capsys,
                                             monkeypatch):
    from bmc_lab import cli

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, '_demo', interrupted)
    rc = cli.main(['--state-dir', str(tmp_path), 'demo'])
    assert rc == 130
    err = capsys.readouterr().err
    assert 'bmc-lab demo: interrupted' in err
    assert 'the next "bmc-lab demo" undoes it' in err


def test_reclaim_says_what_it_cannot_undo(monkeypatch):
    from bmc_lab import container_job
    node = mock.Mock(provision_state='clean failed')
    cli = mock.Mock()
    cli.node.get.return_value = node
    monkeypatch.setattr(container_job.lab_client, 'get_client',
                        lambda settings: cli)
    settings = lab_settings.Settings(state_dir='/nonexistent')
    with pytest.raises(procs.LabError, match='is clean failed, not '
                                             'available: run .*baremetal '
                                             'node show'):
        container_job.reclaim(settings, out=lambda msg: None)
    cli.node.set_provision_state.assert_not_called()


def test_reclaim_waits_then_undeploys(monkeypatch):
    from bmc_lab import container_job
    states = iter(['deploying', 'wait call-back', 'active'])
    cli = mock.Mock()
    cli.node.get.side_effect = lambda name: mock.Mock(
        provision_state=next(states, 'active'))
    monkeypatch.setattr(container_job.lab_client, 'get_client',
                        lambda settings: cli)
    monkeypatch.setattr(container_job.time, 'sleep', lambda s: None)
    undeployed = []
    monkeypatch.setattr(container_job, 'undeploy',
                        lambda settings, index, timeout: undeployed.append(
                            index))
    said = []
    container_job.reclaim(lab_settings.Settings(state_dir='/nonexistent'),
                          out=said.append)
    assert undeployed == [0]
    assert 'is deploying (an earlier run); waiting' in said[0]
    assert 'was left active by an earlier run; undeploying' in said[1]


def test_several_conductors_need_the_scaled_profile(tmp_path):
    with pytest.raises(ValueError, match='conductors=2: the embedded '
                                         'profile runs one conductor'):
        lab_settings.Settings(state_dir=str(tmp_path), conductors=2)
    with pytest.raises(ValueError, match='conductors=0'):
        lab_settings.Settings(state_dir=str(tmp_path), profile='scaled',
                              conductors=0)


def test_second_conductor_has_its_own_host_cache_and_reports(tmp_path):
    settings = lab_settings.Settings(state_dir=str(tmp_path), name='lab',
                                     profile='scaled', conductors=2)
    assert ironic_service.ironic_processes(settings) == (
        'ironic-api', 'ironic-conductor', 'ironic-conductor-2',
        'ironic-bmc-api')
    base = _conf(settings)
    # Take-over within a minute, not Ironic's 4 (heartbeat_timeout 60 +
    # sync_local_state_interval 180).
    assert int(base['conductor']['heartbeat_timeout']) <= 20
    assert int(base['conductor']['sync_local_state_interval']) <= 15
    overlay = configparser.ConfigParser(interpolation=None)
    overlay.read_string(ironic_conf.render_conductor(settings, 1))
    assert overlay['DEFAULT']['host'] == 'lab-2'
    assert overlay['container']['image_cache_dir'] == settings.path(
        'ironic', 'container_cache-2')
    assert overlay['container']['report_dir'] == settings.path(
        'ironic', 'reports-2')
    assert base['container']['image_cache_dir'] != overlay['container'][
        'image_cache_dir']
    argv = ironic_service._ironic_argv(settings, 'ironic-conductor-2')
    assert argv[0].endswith('ironic-conductor')
    assert argv[1:] == ['--config-file', settings.path('etc', 'ironic.conf'),
                        '--config-file',
                        settings.path('etc', 'ironic-conductor-2.conf')]
    assert ironic_service._ironic_argv(settings, 'ironic-conductor')[1:] == [
        '--config-file', settings.path('etc', 'ironic.conf')]


def test_ironic_overridden_lays_options_over_and_takes_them_back(
        settings, monkeypatch):
    os.makedirs(settings.path('etc'))
    override = settings.path('etc', ironic_service.OVERRIDE_CONF)
    seen = []

    def restart(s, crash=False, names=None):
        # What each restart starts the processes with.
        seen.append(ironic_service._ironic_argv(s, 'ironic')[1:])
    monkeypatch.setattr(ironic_service, 'restart_ironic', restart)
    base = ['--config-file', settings.path('etc', 'ironic.conf')]
    with pytest.raises(RuntimeError):
        with ironic_service.ironic_overridden(settings, {'conductor': {
                'deploy_callback_timeout': 60}}):
            parser = configparser.ConfigParser(interpolation=None)
            parser.read(override)
            assert parser['conductor']['deploy_callback_timeout'] == '60'
            raise RuntimeError('the test failed')
    # Restarted with the options laid over (last wins), then without them,
    # also when the code inside failed.
    assert seen == [base + ['--config-file', override], base]
    assert not os.path.exists(override)
    assert ironic_service._ironic_argv(settings, 'ironic')[1:] == base


def test_node_network_is_restricted_to_loopback_forwards(settings):
    spec = nodes.netdev_spec(settings, 1)
    parts = spec.split(',')
    assert 'restrict=on' in parts
    fwds = [p for p in parts if p.startswith('guestfwd=')]
    # HTTP, Ironic API, registry, NFS: nothing else.
    assert sorted(int(f.split(':')[2].split('-')[0]) for f in fwds) == [
        5050, 6385, 8080, 12049]
    for f in fwds:
        assert f.startswith('guestfwd=tcp:10.0.2.100:')
        port = f.split(':')[2].split('-')[0]
        assert f.endswith('-cmd:/usr/bin/socat STDIO TCP:127.0.0.1:' + port)
    assert 'bootfile=http://10.0.2.100:8080/boot.ipxe' in parts
    # The host reaches node 1's agent through loopback only.
    assert 'hostfwd=tcp:127.0.0.1:9901-:9999' in parts


def test_domain_xml(settings):
    xml = nodes.domain_xml(settings, 1)
    assert "<domain type='qemu'" in xml
    assert "<name>bmc-lab-node-1</name>" in xml
    assert "<qemu:arg value='tcg'/>" in xml
    assert settings.node_mac(1) in xml
    assert nodes.console_log(settings, 1) in xml
    assert "<memballoon model='none'/>" in xml
    # The BMC's "boot from disk" gives the disk boot index 1: the NIC
    # (defined on the QEMU command line) must not hold it too.
    assert 'bootindex=2' in xml and 'bootindex=1' not in xml
    assert "<boot dev='network'/>" in xml


def test_ports_named_for_conflicts(settings):
    named = settings.ports.named(2)
    assert named['virtual BMC of node 1 (IPMI)'] == 6231
    assert named['nginx (Ironic http_root)'] == 8080


def test_check_ports_free_names_port_and_user():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(procs.LabError) as exc:
            procs.check_ports_free({'the thing': port})
    assert 'port %d (wanted by the thing) is already in use' % port in \
        str(exc.value)


def test_wait_for_port_reports_exit_and_log(tmp_path):
    proc = subprocess.Popen([sys.executable, '-c', 'raise SystemExit(3)'])
    proc.wait()
    with pytest.raises(procs.LabError) as exc:
        procs.wait_for_port(1, 'thing', '/some/log', proc=proc, timeout=5)
    assert 'thing exited with code 3' in str(exc.value)
    assert '/some/log' in str(exc.value)


def test_spawn_and_stop(settings):
    proc = procs.spawn(settings, 'sleeper', ['sleep', '60'])
    # Until the child has exec'd, its command line is still Python's.
    deadline = time.monotonic() + 5
    while (procs.pid_of(settings, 'sleeper') is None
           and time.monotonic() < deadline):
        time.sleep(0.05)
    assert procs.pid_of(settings, 'sleeper') == proc.pid
    assert procs.stop(settings, 'sleeper') is True
    proc.wait(timeout=5)
    assert procs.pid_of(settings, 'sleeper') is None
    assert procs.stop(settings, 'sleeper') is False


def test_stale_pidfile_is_not_trusted(settings):
    proc = procs.spawn(settings, 'sleeper', ['sleep', '60'])
    with open(settings.path('run', 'sleeper.pid'), 'w') as f:
        f.write('%d not-sleep\n' % proc.pid)
    try:
        assert procs.pid_of(settings, 'sleeper') is None
    finally:
        proc.kill()
        proc.wait()


def test_cpio_is_readable(tmp_path):
    data = smoke._cpio_newc([('bin', 0o40755, b''),
                             ('bin/hello', 0o100755, b'#!/bin/sh\necho\n')])
    res = subprocess.run(['cpio', '-t'], input=data, capture_output=True)
    assert res.returncode == 0
    assert res.stdout.split() == [b'bin', b'bin/hello']


def test_horizon_settings_stay_in_the_state_dir(tmp_path):
    import ast
    from bmc_lab.cloud import horizon
    from bmc_lab.cloud import layout
    from bmc_lab.cloud import ports as cloud_ports
    from bmc_lab.cloud import venv
    cloud = layout.Cloud(state_dir=str(tmp_path), prefix='t',
                         ironic_api_url='http://127.0.0.1:1',
                         ports=cloud_ports.CloudPorts.shifted(3))
    path = horizon.write_settings(cloud)
    assert path == str(tmp_path / 'etc' / 'horizon' / 'local' /
                       'local_settings.py')
    assert (tmp_path / 'etc' / 'horizon' / 'local' / '__init__.py').exists()
    values = {}
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.Assign):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    assert values['OPENSTACK_KEYSTONE_URL'] == 'http://127.0.0.1:5003/v3'
    # Horizon writes a secret key file into its package unless one is set.
    assert len(values['SECRET_KEY']) >= 32
    assert values['STATIC_ROOT'].startswith(str(tmp_path))
    assert values['LAUNCH_INSTANCE_DEFAULTS'] == {'create_volume': False}
    assert horizon.url(cloud) == 'http://127.0.0.1:8003'
    # Its virtualenv is keyed apart from the services' one.
    assert venv.key('horizon').startswith('horizon-py')
    assert not venv.key('cloud').startswith('horizon')


def test_horizon_enables_the_plugin_from_the_state_dir(tmp_path):
    """The Horizon plugin: installed editable into Horizon's virtualenv,
    its enabled file copied into the state directory and that directory
    added to the path of openstack_dashboard.local.enabled."""
    from bmc_lab.cloud import horizon
    from bmc_lab.cloud import layout
    from bmc_lab.cloud import ports as cloud_ports
    from bmc_lab.cloud import venv
    cloud = layout.Cloud(state_dir=str(tmp_path), prefix='t',
                         ironic_api_url='http://127.0.0.1:1',
                         ports=cloud_ports.CloudPorts.shifted(3))
    enabled = tmp_path / 'etc' / 'horizon' / 'enabled'
    enabled.mkdir(parents=True)
    (enabled / '_9999_gone.py').write_text('PANEL = "gone"\n')
    text = open(horizon.write_settings(cloud)).read()
    assert sorted(p.name for p in enabled.iterdir()) == [
        '_1920_project_container_runs_panel.py']
    assert ('_local_enabled.__path__.append(%r)' % str(enabled)) in text
    # Nothing of it goes into the virtualenv's package.
    assert 'site-packages' not in text
    argv = venv.pip_argv('/v/bin/python', 'horizon')
    assert argv[-6:] == ['-e', os.path.join(venv.REPO_DIR, 'common'),
                         '-e', os.path.join(venv.REPO_DIR, 'client'),
                         '-e', os.path.join(venv.REPO_DIR, 'dashboard')]
    assert '-e' not in venv.pip_argv('/v/bin/python', 'cloud')
    # The key covers the distributions' requirements (a new dependency
    # builds a new virtualenv) and the checkout they are installed from.
    repo = tmp_path / 'repo'
    for name in venv.EDITABLE['horizon']:
        (repo / name).mkdir(parents=True)
        for f in ('setup.cfg', 'requirements.txt'):
            (repo / name / f).write_text('pbr\n')
    with mock.patch.object(venv, 'REPO_DIR', str(repo)):
        before = venv.key('horizon')
        (repo / 'dashboard' / 'requirements.txt').write_text('pbr\nnew\n')
        assert venv.key('horizon') != before
    assert venv.key('horizon') not in (before, venv.key('cloud'))


def test_tempest_conf_and_totals(tmp_path):
    import configparser as cp
    from bmc_lab.cloud import layout
    from bmc_lab.cloud import ports as cloud_ports
    from bmc_lab.cloud import tempest_run
    from bmc_lab.cloud import venv
    from bmc_lab import inifile
    cloud = layout.Cloud(state_dir=str(tmp_path), prefix='t',
                         ironic_api_url='http://127.0.0.1:1',
                         ports=cloud_ports.CloudPorts.shifted(3))
    parser = cp.ConfigParser(interpolation=None)
    parser.read_string(inifile.ini_text(
        tempest_run.conf(cloud, '127.0.0.1:5000/demo:1'), '# t\n'))
    assert parser['identity']['uri_v3'] == 'http://127.0.0.1:5003/v3'
    assert parser['auth']['admin_password'] == cloud.password
    assert parser['baremetal_container']['container_image'] == \
        '127.0.0.1:5000/demo:1'
    assert parser['baremetal_container']['network'] == 'baremetal-net'
    # ironic-tempest-plugin's base class skips unless a fake driver is
    # configured; the nodes are enrolled with our hardware type.
    assert parser['baremetal']['driver'] == 'fake-hardware'
    assert parser['baremetal_container']['driver'] == 'container-ipmi'
    assert venv.key('tempest').startswith('tempest-py')
    summary = ('======\nTotals\n======\nRan: 11 tests in 300.0 sec.\n'
               ' - Passed: 10\n - Skipped: 0\n - Expected Fail: 0\n'
               ' - Unexpected Success: 0\n - Failed: 1\n'
               'Sum of execute time for each test: 280.1 sec.\n')
    assert tempest_run.totals(summary) == {
        'Passed': 10, 'Skipped': 0, 'Expected Fail': 0,
        'Unexpected Success': 0, 'Failed': 1}
    assert tempest_run.totals('no summary') == {}


def test_one_api_worker_and_debug_as_asked(tmp_path):
    settings = lab_settings.Settings(state_dir=str(tmp_path),
                                     profile=lab_settings.PROFILE_SCALED)
    conf = _conf(settings)
    # A second worker could not bind the port and would be forked again
    # and again.
    assert conf['api']['api_workers'] == '1'
    assert conf['DEFAULT']['debug'] == 'true'
    settings.ironic_debug = False
    assert _conf(settings)['DEFAULT']['debug'] == 'false'


def test_deploy_reclaims_what_a_failed_test_left(monkeypatch):
    """A test that failed before its undeploy leaves the node ACTIVE: the
    next test's deploy undeploys it first instead of failing too."""
    from bmc_lab import container_job
    cli = mock.Mock()
    cli.node.get.return_value = mock.Mock(provision_state='active')
    monkeypatch.setattr(container_job.lab_client, 'get_client',
                        lambda settings: cli)
    reclaimed = []
    monkeypatch.setattr(container_job, 'reclaim',
                        lambda settings, index, out: reclaimed.append(index))
    container_job.deploy(lab_settings.Settings(state_dir='/nonexistent'),
                         'reg/x:1', out=lambda msg: None, wait=False)
    assert reclaimed == [0]
    cli.node.set_provision_state.assert_called_once_with(mock.ANY, 'active')
    cli.node.get.return_value = mock.Mock(provision_state='available')
    container_job.deploy(lab_settings.Settings(state_dir='/nonexistent'),
                         'reg/x:1', out=lambda msg: None, wait=False)
    assert reclaimed == [0]
