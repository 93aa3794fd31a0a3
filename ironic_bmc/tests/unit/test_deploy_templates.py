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

"""ironic-bmc-deploy-templates: names, templates, apply, the command, and
the whole path through Ironic's own API and conductor step code."""

import io
import json
import os
import re
import types
from unittest import mock
from urllib import parse

import fixtures
import pecan
import pytest
import requests
from ironicclient import exc as ironic_exc
from ironicclient.v1 import deploy_template as client_dt

from ironic.api.controllers.v1 import deploy_template as api_dt
from ironic.conductor import steps as conductor_steps
from ironic.conductor import task_manager
from ironic import objects
from ironic.tests.unit.db import base as db_base
from ironic.tests.unit.objects import utils as obj_utils

from bmc_common.tunables import profiles
from ironic_bmc import deploy_templates as dt
# Imported before the DB tests: it loads ironic.conductor.periodics, whose
# zeroconf import runs ldconfig, which Ironic's test base forbids later.
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import tuning

SHIPPED = ['hpc-compute', 'low-noise', 'low-noise-boot', 'rfs',
           'thp-always', 'thp-never']
OS_VARS = [k for k in os.environ if k.startswith('OS_')]


def _step(profile, priority=85):
    return {'interface': 'deploy', 'step': 'bmc_apply_tunables',
            'args': {'tunables': profile}, 'priority': priority}


@pytest.fixture(autouse=True)
def _no_os_env(monkeypatch):
    for key in OS_VARS:
        monkeypatch.delenv(key)


# --- names -------------------------------------------------------------

@pytest.mark.parametrize('profile,name', [
    ('thp-never', 'CUSTOM_BMC_TUNABLES_THP_NEVER'),
    ('low-noise-boot', 'CUSTOM_BMC_TUNABLES_LOW_NOISE_BOOT'),
    ('Site_HPC2', 'CUSTOM_BMC_TUNABLES_SITE_HPC2'),
    ('9', 'CUSTOM_BMC_TUNABLES_9'),
])
def test_template_name(profile, name):
    assert dt.template_name(profile) == name


@pytest.mark.parametrize('profile', ['site.v2', '', 'a b', '-x', 'caf\xe9',
                                     None, 'x' * 236])
def test_template_name_refuses_unmappable(profile):
    with pytest.raises(dt.Error, match='profile %s cannot be a deploy '
                       'template' % re.escape(repr(profile))):
        dt.template_name(profile)


def test_longest_name_fits_a_trait():
    assert len(dt.template_name('x' * 235)) == 255


# --- templates() -------------------------------------------------------

def test_step_matches_the_driver():
    step = container_deploy.ContainerDeploy.bmc_apply_tunables
    assert step._is_deploy_step
    assert (dt.STEP, dt.PRIORITY) == (step.__name__,
                                      step._deploy_step_priority)
    assert set(step._deploy_step_argsinfo) == {'tunables'}


def test_templates_of_shipped_profiles():
    result = dt.templates()
    assert [t['extra']['bmc_profile'] for t in result] == SHIPPED
    for template in result:
        profile = template['extra']['bmc_profile']
        assert template == {
            'name': dt.template_name(profile),
            'steps': [_step(profile)],
            'extra': {'bmc_profile': profile,
                      'summary': profiles.describe(profile)['summary']}}
    assert result[-1]['extra']['summary'].startswith('Transparent huge')


def test_templates_pass_ironic_api_schema():
    validator = api_dt.TEMPLATE_VALIDATOR
    for template in dt.templates():
        validator('template', dict(template))


def test_templates_selected_and_operator_dir_first(tmp_path):
    (tmp_path / 'thp-never.conf').write_text(
        '[main]\nsummary = site THP off\n[knobs]\nthp = never\n')
    (tmp_path / 'site-db.conf').write_text(
        '[main]\nsummary = db\ninclude = thp-never\n[knobs]\n'
        'sysctl.vm.swappiness = 1\n')
    result = dt.templates(['thp-never', 'site-db', 'thp-never'],
                          [str(tmp_path)])
    assert [t['name'] for t in result] == [
        'CUSTOM_BMC_TUNABLES_THP_NEVER', 'CUSTOM_BMC_TUNABLES_SITE_DB']
    assert result[0]['extra']['summary'] == 'site THP off'
    assert 'CUSTOM_BMC_TUNABLES_SITE_DB' in {
        t['name'] for t in dt.templates(search_dirs=[str(tmp_path)])}


def test_broken_operator_profile_names_profile_and_file(tmp_path):
    path = tmp_path / 'site-bad.conf'
    path.write_text('[knobs]\nthp = sometimes\n')
    with pytest.raises(dt.Error) as err:
        dt.templates(search_dirs=[str(tmp_path)])
    assert str(err.value) == (
        "profile 'site-bad' (%s) is broken: thp: 'sometimes' is not one of "
        'always, madvise, never' % path)
    path.write_text('[main]\ninclude = gone\n')
    with pytest.raises(dt.Error, match=re.escape(
            "profile 'site-bad' (%s) is broken: unknown profile 'gone'"
            % path)):
        dt.templates(['site-bad'], [str(tmp_path)])


def test_unknown_and_colliding_profiles(tmp_path):
    with pytest.raises(dt.Error, match="unknown profile 'turbo'"):
        dt.templates(['turbo'])
    (tmp_path / 'thp_never.conf').write_text('[knobs]\nthp = never\n')
    with pytest.raises(dt.Error, match="'thp-never' and 'thp_never' both "
                       'map to CUSTOM_BMC_TUNABLES_THP_NEVER'):
        dt.templates(search_dirs=[str(tmp_path)])


# --- apply() with a mock client ----------------------------------------

def _client(*existing):
    api = mock.create_autospec(client_dt.DeployTemplateManager,
                               instance=True)
    api.list.return_value = [
        client_dt.DeployTemplate(api, dict(info, uuid='uuid-' + info['name']),
                                 loaded=True) for info in existing]
    return types.SimpleNamespace(deploy_template=api)


def _existing(profile, steps=None, **extra):
    return {'name': dt.template_name(profile),
            'steps': steps if steps is not None else [_step(profile)],
            'extra': dict({'bmc_profile': profile,
                           'summary': 'S ' + profile}, **extra)}


def _wanted(*names):
    return [{'name': dt.template_name(n), 'steps': [_step(n)],
             'extra': {'bmc_profile': n, 'summary': 'S ' + n}}
            for n in names]


def test_apply_creates_updates_and_leaves_alone():
    bios = {'interface': 'bios', 'step': 'apply_configuration',
            'args': {'settings': []}, 'priority': 150}
    client = _client(
        # priority as the API may give it, a string: still equal.
        _existing('thp-never', steps=[_step('thp-never', '85')]),
        _existing('rfs', steps=[_step('rfs-old'), bios]),
        _existing('low-noise', owner='ops', summary='old'))
    out = io.StringIO()
    done = dt.apply(client, _wanted('thp-never', 'rfs', 'low-noise',
                                    'hpc-compute'), out)
    api = client.deploy_template
    api.list.assert_called_once_with(detail=True, limit=0)
    api.create.assert_called_once_with(
        name='CUSTOM_BMC_TUNABLES_HPC_COMPUTE', steps=[_step('hpc-compute')],
        extra={'bmc_profile': 'hpc-compute', 'summary': 'S hpc-compute'})
    assert api.update.call_args_list == [
        # our step replaced in place, the operator's bios step kept
        mock.call('uuid-CUSTOM_BMC_TUNABLES_RFS', [
            {'op': 'replace', 'path': '/steps',
             'value': [_step('rfs'), bios]}]),
        # extra only; the operator's own key kept
        mock.call('uuid-CUSTOM_BMC_TUNABLES_LOW_NOISE', [
            {'op': 'replace', 'path': '/extra',
             'value': {'bmc_profile': 'low-noise', 'owner': 'ops',
                       'summary': 'S low-noise'}}]),
    ]
    api.delete.assert_not_called()
    assert done == {'created': ['CUSTOM_BMC_TUNABLES_HPC_COMPUTE'],
                    'updated': ['CUSTOM_BMC_TUNABLES_RFS',
                                'CUSTOM_BMC_TUNABLES_LOW_NOISE'],
                    'unchanged': ['CUSTOM_BMC_TUNABLES_THP_NEVER'],
                    'deleted': []}
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ['CUSTOM_BMC_TUNABLES_THP_NEVER',
                                'unchanged', 'thp-never']
    assert lines[-1] == '1 created, 2 updated, 1 unchanged, 0 deleted'


def test_apply_adds_missing_step_and_updates_both():
    bios = {'interface': 'bios', 'step': 'x', 'args': {}, 'priority': 1}
    client = _client(dict(_existing('rfs', steps=[bios]), extra={}))
    dt.apply(client, _wanted('rfs'), io.StringIO())
    client.deploy_template.update.assert_called_once_with(
        'uuid-CUSTOM_BMC_TUNABLES_RFS', [
            {'op': 'replace', 'path': '/steps', 'value': [bios, _step('rfs')]},
            {'op': 'replace', 'path': '/extra',
             'value': {'bmc_profile': 'rfs', 'summary': 'S rfs'}}])


def test_prune_deletes_only_our_templates_of_gone_profiles():
    client = _client(
        _existing('gone'),                                  # ours, gone
        _existing('rfs'),                                   # ours, exists
        {'name': 'CUSTOM_BMC_TUNABLES_X', 'steps': [_step('x')],
         'extra': {}},                                      # not ours
        {'name': 'CUSTOM_RAID', 'steps': [_step('y')],
         'extra': {'bmc_profile': 'y'}})                    # not our name
    out = io.StringIO()
    done = dt.apply(client, _wanted('thp-never'), out,
                    keep_profiles=['rfs', 'thp-never'])
    client.deploy_template.delete.assert_called_once_with(
        'uuid-CUSTOM_BMC_TUNABLES_GONE')
    assert done['deleted'] == ['CUSTOM_BMC_TUNABLES_GONE']
    assert 'CUSTOM_BMC_TUNABLES_GONE' in out.getvalue()
    # Without --prune nothing is deleted.
    client = _client(_existing('gone'))
    dt.apply(client, _wanted('thp-never'), io.StringIO())
    client.deploy_template.delete.assert_not_called()


# --- main() ------------------------------------------------------------

def test_dry_run_prints_json_and_calls_nothing(capsys):
    with mock.patch.object(dt, '_client', autospec=True) as client:
        assert dt.main(['--dry-run', '--profile', 'thp-never',
                        '--profile', 'rfs']) == 0
    client.assert_not_called()
    printed = json.loads(capsys.readouterr().out)
    assert printed == dt.templates(['thp-never', 'rfs'])


def test_main_applies_and_prints_advice(capsys, tmp_path):
    (tmp_path / 'site.conf').write_text('[knobs]\nthp = never\n')
    fake = _client(_existing('old-site'))
    with mock.patch.object(dt, '_client', autospec=True,
                           return_value=fake):
        assert dt.main(['--profile', 'thp-never', '--prune',
                        '--profile-dir', str(tmp_path)]) == 0
    fake.deploy_template.create.assert_called_once_with(
        name='CUSTOM_BMC_TUNABLES_THP_NEVER', steps=[_step('thp-never')],
        extra=dt.templates(['thp-never'])[0]['extra'])
    fake.deploy_template.delete.assert_called_once_with(
        'uuid-CUSTOM_BMC_TUNABLES_OLD_SITE')
    out = capsys.readouterr().out
    assert ('openstack flavor set <flavor> --property '
            'trait:CUSTOM_BMC_TUNABLES_THP_NEVER=required') in out
    assert ('openstack baremetal node add trait <node> '
            'CUSTOM_BMC_TUNABLES_THP_NEVER') in out


@pytest.mark.parametrize('argv', [['--bogus'], ['--dry-run', '--prune'],
                                  ['--profile']])
def test_usage_errors_exit_2(argv, capsys):
    assert dt.main(argv) == 2
    assert 'usage: ironic-bmc-deploy-templates' in capsys.readouterr().err


def test_unknown_auth_type_exits_2(monkeypatch, capsys):
    monkeypatch.setenv('OS_AUTH_TYPE', 'bogus')
    assert dt.main(['--dry-run']) == 2
    assert 'bogus' in capsys.readouterr().err


def _one_line_error(capsys, *words):
    err = capsys.readouterr().err
    assert err.startswith('ironic-bmc-deploy-templates: ')
    assert err.count('\n') == 1, err
    for word in words:
        assert word in err


def test_errors_exit_1_with_one_line(capsys, tmp_path):
    assert dt.main(['--dry-run', '--profile', 'turbo']) == 1
    _one_line_error(capsys, "'turbo'")
    (tmp_path / 'bad.conf').write_text('[knobs]\nthp = x\n')
    assert dt.main(['--profile-dir', str(tmp_path), '--dry-run']) == 1
    _one_line_error(capsys, str(tmp_path / 'bad.conf'))
    # No credentials: keystoneauth's password plugin names what is missing.
    assert dt.main(['--profile', 'rfs']) == 1
    _one_line_error(capsys, 'auth_url')
    fake = _client()
    fake.deploy_template.create.side_effect = ironic_exc.Conflict(
        'Deploy template with name\nCUSTOM_BMC_TUNABLES_RFS already exists.')
    with mock.patch.object(dt, '_client', autospec=True,
                           return_value=fake):
        assert dt.main(['--profile', 'rfs']) == 1
    _one_line_error(capsys, 'already exists')


def test_noauth_client_from_environment(monkeypatch):
    monkeypatch.setenv('OS_AUTH_TYPE', 'none')
    monkeypatch.setenv('OS_ENDPOINT', 'http://127.0.0.1:6385')
    args = dt._parser([]).parse_args([])
    client = dt._client(args)
    assert client.http_client.endpoint_override == 'http://127.0.0.1:6385'
    assert client.http_client.os_ironic_api_version == '1.55'


# --- the whole path: Ironic's API, DB and conductor step code ------------

ENDPOINT = 'http://ironic.test'


class _WSGIAdapter(requests.adapters.BaseAdapter):
    """requests transport that calls a WSGI application in process."""

    def __init__(self, app):
        super().__init__()
        self.app = app

    def send(self, request, **kwargs):
        url = parse.urlsplit(request.url)
        body = request.body or b''
        body = body.encode() if isinstance(body, str) else body
        environ = {
            'REQUEST_METHOD': request.method, 'PATH_INFO': url.path,
            'QUERY_STRING': url.query, 'SERVER_NAME': url.hostname,
            'SERVER_PORT': '80', 'SERVER_PROTOCOL': 'HTTP/1.1',
            'CONTENT_LENGTH': str(len(body)), 'wsgi.input': io.BytesIO(body),
            'wsgi.url_scheme': 'http', 'wsgi.errors': io.StringIO(),
            'wsgi.version': (1, 0), 'wsgi.multithread': False,
            'wsgi.multiprocess': False, 'wsgi.run_once': False}
        for key, value in request.headers.items():
            key = key.upper().replace('-', '_')
            if key == 'CONTENT_TYPE':
                environ[key] = value
            elif key != 'CONTENT_LENGTH':
                environ['HTTP_' + key] = value
        started = {}

        def start_response(status, headers, exc_info=None):
            started.update(status=status, headers=headers)

        chunks = self.app(environ, start_response)
        response = requests.Response()
        response._content = b''.join(chunks)
        code, _, reason = started['status'].partition(' ')
        response.status_code, response.reason = int(code), reason
        response.headers = requests.structures.CaseInsensitiveDict(
            started['headers'])
        response.url, response.request = request.url, request
        return response

    def close(self):
        pass


class IronicPathTestCase(db_base.DbTestCase):
    """The command against Ironic's real API (in process, on the test DB),
    then Ironic's conductor code picking the template's step."""

    def _clear_attrs(self):
        # Ironic's base deletes the test's attributes at cleanup, which
        # pytest's unittest runner then trips over.
        pass

    def setUp(self):
        super().setUp()
        self.config(auth_strategy='noauth')
        self.config(enabled_deploy_interfaces=['container', 'fake'])
        self.config(enabled_vendor_interfaces=['container', 'fake'])
        app = pecan.load_app({'app': {
            'root': 'ironic.api.controllers.root.RootController',
            'modules': ['ironic.api'], 'acl_public_routes': ['/', '/v1']}})
        self.addCleanup(pecan.set_config, {}, overwrite=True)
        self.useFixture(fixtures.MockPatchObject(
            requests.Session, 'get_adapter', return_value=_WSGIAdapter(app)))
        self.useFixture(fixtures.EnvironmentVariable('OS_AUTH_TYPE', 'none'))
        self.useFixture(fixtures.EnvironmentVariable('OS_ENDPOINT', ENDPOINT))
        self.dir = self.useFixture(fixtures.TempDir()).path

    def _main(self, *argv):
        with mock.patch('sys.stdout', new_callable=io.StringIO) as out, \
                mock.patch('sys.stderr', new_callable=io.StringIO) as err:
            code = dt.main(['--profile-dir', self.dir] + list(argv))
        self.assertEqual(0, code, err.getvalue())
        return out.getvalue()

    def _write(self, name, summary):
        with open(os.path.join(self.dir, name + '.conf'), 'w') as f:
            f.write('[main]\nsummary = %s\ninclude = low-noise-boot\n'
                    '[knobs]\nthp = never\n' % summary)

    def _by_name(self):
        return {t.name: t for t in
                objects.DeployTemplate.list(self.context)}

    def test_create_rerun_update_prune(self):
        self._write('site-isol', 'one')
        out = self._main()
        self.assertIn('7 created, 0 updated, 0 unchanged, 0 deleted', out)
        templates = self._by_name()
        site = templates['CUSTOM_BMC_TUNABLES_SITE_ISOL']
        self.assertEqual([_step('site-isol')], [
            {k: s[k] for k in ('interface', 'step', 'args', 'priority')}
            for s in site.steps])
        self.assertEqual({'bmc_profile': 'site-isol', 'summary': 'one'},
                         site.extra)
        # What the API gives back compares equal: a re-run changes nothing.
        out = self._main()
        self.assertIn('0 created, 0 updated, 7 unchanged, 0 deleted', out)
        self._write('site-isol', 'two')
        out = self._main('--profile', 'site-isol')
        self.assertIn('0 created, 1 updated, 0 unchanged, 0 deleted', out)
        self.assertEqual('two', self._by_name()[
            'CUSTOM_BMC_TUNABLES_SITE_ISOL'].extra['summary'])
        os.unlink(os.path.join(self.dir, 'site-isol.conf'))
        out = self._main('--prune', '--profile', 'rfs')
        self.assertIn('0 created, 0 updated, 1 unchanged, 1 deleted', out)
        self.assertEqual(sorted(dt.template_name(p) for p in SHIPPED),
                         sorted(self._by_name()))

    def test_conductor_merges_template_step(self):
        self._write('site-isol', 'one')
        self._main('--profile', 'site-isol')
        trait = 'CUSTOM_BMC_TUNABLES_SITE_ISOL'
        node = obj_utils.create_test_node(
            self.context, driver='fake-hardware',
            deploy_interface='container', vendor_interface='container',
            instance_info={'container_image': 'r/a:1', 'traits': [trait]})
        objects.TraitList.create(self.context, node.id, [trait])
        self.config(tunables_profile_dirs=[self.dir], group='container')
        with task_manager.acquire(self.context, node.uuid) as task:
            conductor_steps.validate_user_deploy_steps_and_templates(task)
            conductor_steps.set_node_deployment_steps(task)
            steps = task.node.driver_internal_info['deploy_steps']
            ours = [s for s in steps if s['step'] == 'bmc_apply_tunables']
            self.assertEqual([_step('site-isol')], ours)
            knobs = tuning.requested(task.node)
        self.assertEqual('never', knobs['thp'])
        self.assertIn('nohz_full', knobs)  # boot-time, from the include

    def test_conductor_ignores_template_without_instance_trait(self):
        self._main('--profile', 'thp-never')
        node = obj_utils.create_test_node(
            self.context, driver='fake-hardware',
            deploy_interface='container', vendor_interface='container',
            instance_info={'container_image': 'r/a:1'})
        objects.TraitList.create(self.context, node.id,
                                 ['CUSTOM_BMC_TUNABLES_THP_NEVER'])
        with task_manager.acquire(self.context, node.uuid) as task:
            conductor_steps.set_node_deployment_steps(task)
            ours = [s for s in task.node.driver_internal_info['deploy_steps']
                    if s['step'] == 'bmc_apply_tunables']
        # The driver's own step: no arguments, instance_info decides.
        self.assertEqual(1, len(ours))
        self.assertEqual(85, ours[0]['priority'])
        self.assertNotIn('args', ours[0])
