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

"""The deploy's configdrive on the conductor: read, bounded, checked,
published; refused (or left out) with a message naming it."""

import base64
import gzip
import hashlib
import os
from unittest import mock

from ironic.common import exception
from ironic.common import keystone
from ironic.common import states
from ironic.common import swift
from ironic.conductor import task_manager
from ironic.conf import CONF
from ironic import objects
from ironic.drivers.modules import agent_base
from ironic.tests.unit.objects import utils as obj_utils
from openstack.object_store.v1 import _proxy as object_store
from oslo_utils import strutils
from oslo_utils import uuidutils

from bmc_common.tests import isos
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import configdrive
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import rootfs
from ironic_bmc import report as run_report
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

ISO = isos.config_drive()
MALFORMED = ('instance_info/configdrive is not a gzipped base64 ISO 9660 '
             'image labelled config-2: ')


class ReadTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.config_temp_dir('tempdir')

    def _read(self, value):
        self.node.instance_info = dict(self.node.instance_info,
                                       configdrive=value)
        return configdrive.read(self.node)

    def _refused(self, value):
        return str(self.assertRaises(configdrive.Refused, self._read, value))

    def test_none(self):
        self.assertIsNone(self._read(None))
        self.assertIsNone(self._read(''))

    def test_gzipped_base64_iso(self):
        drive = self._read(isos.encode(ISO))
        self.addCleanup(drive.discard)
        self.assertEqual(len(ISO), drive.size)
        self.assertEqual(hashlib.sha256(ISO).hexdigest(), drive.sha256)
        with open(drive.path, 'rb') as f:
            self.assertEqual(ISO, f.read())
        report = drive.report()
        self.assertEqual({'used': True, 'bytes': len(ISO),
                          'sha256': drive.sha256, 'file_count': 3,
                          'files': ['ec2/latest/meta-data.json',
                                    'openstack/latest/meta_data.json',
                                    'openstack/latest/user_data'],
                          'public_keys': 1}, report)

    @mock.patch.object(configdrive.configdrive_utils,
                       'get_configdrive_image', autospec=True)
    def test_json_built_by_ironic(self, mock_build):
        mock_build.return_value = isos.encode(ISO)
        drive = self._read({'meta_data': {'public_keys': {'k': 'x'}}})
        drive.discard()
        mock_build.assert_called_once_with(self.node)
        mock_build.side_effect = RuntimeError('no genisoimage')
        self.assertIn('it needs genisoimage',
                      self._refused({'user_data': 'x'}))

    def test_too_large_text(self):
        self.config(configdrive_max_kb=64, group='container')
        text = 'A' * (200 * 1024)
        self.assertEqual(
            'instance_info/configdrive is 0.2 MiB of base64 text, more than '
            '[container]configdrive_max_kb (64 KiB)', self._refused(text))

    def test_gzip_bomb_stops_at_the_bound(self):
        self.config(configdrive_max_kb=64, group='container')
        bomb = base64.b64encode(gzip.compress(b'\0' * (10 * 1024 * 1024)))
        self.assertLess(len(bomb), 64 * 1024)
        self.assertEqual(
            'instance_info/configdrive is more than 0.1 MiB unpacked, more '
            'than [container]configdrive_max_kb (64 KiB)',
            self._refused(bomb.decode()))
        self.assertEqual([], os.listdir(CONF.tempdir))

    def test_malformed(self):
        for value, reason in (
                ('***', 'not base64'),
                (base64.b64encode(ISO).decode(), 'not gzip'),
                (isos.encode(b'x' * 50000), 'not an ISO 9660 image'),
                (isos.encode(isos.config_drive(label='cidata')),
                 "its volume label is 'cidata', not 'config-2'"),
                (isos.encode(isos.build({
                    'openstack/latest/meta_data.json': b'{'})),
                 'openstack/latest/meta_data.json is not JSON'),
                (42, 'a int, not a string')):
            message = self._refused(value)
            self.assertTrue(message.startswith(MALFORMED + reason),
                            message)
        self.assertEqual([], os.listdir(CONF.tempdir))

    def test_url_only_from_ironics_object_store(self):
        url = 'http://169.254.169.254/latest'
        self.assertIn('only the Swift URL Ironic makes', self._refused(url))

    def _swift(self):
        """Swift's endpoint, as Ironic finds it, and the temporary URL
        Ironic stores for this node's configdrive (made by Ironic's
        SwiftAPI.get_temp_url and openstacksdk, as
        deployments._store_configdrive calls it)."""
        self.config(configdrive_use_object_store=True, group='deploy')
        mocks = []
        for patch in (mock.patch.object(swift, 'get_swift_session',
                                        autospec=True),
                      mock.patch.object(keystone, 'get_endpoint',
                                        autospec=True)):
            mocks.append(patch.start())
            self.addCleanup(patch.stop)
        session, endpoint = mocks
        endpoint.return_value = 'https://swift.example:8080/v1/AUTH_p'
        sdk = mock.Mock(spec=object_store.Proxy)
        sdk._check_temp_url_key.side_effect = (
            lambda temp_url_key: temp_url_key)
        api = mock.Mock(spec=swift.SwiftAPI)
        api.get_temp_url_key.return_value = b'secret'
        api.generate_temp_url.side_effect = (
            lambda path, timeout, method, temp_url_key:
            object_store.Proxy.generate_temp_url(
                sdk, path, timeout, method, temp_url_key=temp_url_key))
        url = swift.SwiftAPI.get_temp_url(
            api, 'ironic_configdrive_container',
            'configdrive-%s' % self.node.uuid, 1800)
        self.assertTrue(url.startswith(
            'https://swift.example:8080/v1/AUTH_p/'
            'ironic_configdrive_container/configdrive-%s?temp_url_sig='
            % self.node.uuid), url)
        endpoint.reset_mock()
        session.reset_mock()
        return url, endpoint, session

    @mock.patch.object(configdrive.requests, 'get', autospec=True)
    def test_url_read_bounded(self, mock_get):
        url, endpoint, session = self._swift()
        resp = mock_get.return_value.__enter__.return_value
        resp.iter_content.return_value = [isos.encode(ISO).encode()]
        drive = self._read(url)
        drive.discard()
        self.assertEqual(len(ISO), drive.size)
        mock_get.assert_called_once_with(
            url, stream=True, timeout=60, allow_redirects=False)
        endpoint.assert_called_with('swift', session=session.return_value)
        self.config(configdrive_max_kb=1, group='container')
        resp.iter_content.return_value = iter([b'A' * 1024] * 10)
        self.assertIn('more than [container]configdrive_max_kb (1 KiB)',
                      self._refused(url))

    @mock.patch.object(configdrive.requests, 'get', autospec=True)
    def test_url_ironic_did_not_store_refused_before_any_request(
            self, mock_get):
        """A lessee may patch instance_info/configdrive to any URL: only
        the one Ironic stores for this node (Swift's endpoint, container
        [conductor]configdrive_swift_container, object
        configdrive-<node UUID>) is fetched; any other is refused with
        one message, whatever it names, and no request is made."""
        url, _endpoint, _session = self._swift()
        path = url.split('?')[0][len('https://swift.example:8080'):]
        other = uuidutils.generate_uuid()
        for foreign in (
                'http://169.254.169.254:80' + path,
                'https://10.0.0.1:22' + path,
                'https://swift.example:8081' + path,
                'http://swift.example:8080' + path,
                'https://user@swift.example:8080' + path,
                url.replace(self.node.uuid, other),
                url.replace('ironic_configdrive_container', 'c'),
                url.replace('/v1/AUTH_p/', '/v1/AUTH_q/'),
                url.replace('?', '/x?'),
                url.replace('?', ';x?'),
                url + '#x',
                url + '&multipart-manifest=get',
                url.replace('https://swift.example',
                            'https://swift.example\n')):
            message = self._refused(foreign)
            self.assertEqual(
                'instance_info/configdrive is a URL that is not the '
                'configdrive Ironic stored for this node (the Swift '
                'temporary URL of object configdrive-<node UUID> that '
                '[deploy]configdrive_use_object_store makes): refused, '
                'not fetched', message, foreign)
        mock_get.assert_not_called()

    @mock.patch.object(configdrive.requests, 'get', autospec=True)
    def test_url_refused_without_swifts_endpoint(self, mock_get):
        url, endpoint, _session = self._swift()
        endpoint.side_effect = exception.CatalogNotFound(
            service_type='object-store', endpoint_type='internal')
        self.assertIn("cannot find Swift's endpoint", self._refused(url))
        mock_get.assert_not_called()


class PrepareTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.config_temp_dir('tempdir')

    def _prepare(self, value, **ii):
        self.node.instance_info = dict(self.node.instance_info,
                                       configdrive=value, **ii)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            info, report, self.server = configdrive.prepare(task)
            task.node.save()
        return info, report

    def test_published_for_the_agent(self):
        info, report = self._prepare(isos.encode(ISO))
        self.assertEqual({'token_url', 'sha256', 'size', 'authorized_keys'},
                         set(info))
        self.assertTrue(info['authorized_keys'])
        self.assertTrue(report['used'])
        prefix = 'http://10.0.2.100:8080/%s/configdrive-' % self.node.uuid
        self.assertTrue(info['token_url'].startswith(prefix))
        self.assertTrue(info['token_url'].endswith('/config-2.iso'))
        path = os.path.join(CONF.deploy.http_root,
                            info['token_url'][len(prefix) - len(
                                'configdrive-') - 37:])
        with open(path, 'rb') as f:
            self.assertEqual(ISO, f.read())
        self.assertEqual([], os.listdir(CONF.tempdir))
        arg = configdrive.step_arg(info)
        self.assertEqual(info['token_url'], arg['url'])
        self.assertNotIn('token_url', arg)
        # Ironic's API masks it for whoever may not see the secrets.
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        shown = strutils.mask_dict_password({'i': info}, '***')
        self.assertNotIn('configdrive-', str(shown))
        # The next deploy's replaces it.
        with task_manager.acquire(self.context, node.uuid) as task:
            configdrive.unpublish(task)
            task.node.save()
        self.assertFalse(os.path.exists(path))

    def test_keys_switched_off(self):
        self.config(configdrive_authorized_keys=False, group='container')
        info, _report = self._prepare(isos.encode(ISO))
        self.assertFalse(info['authorized_keys'])

    def test_none(self):
        self.assertEqual((None, None), self._prepare(None))

    def test_refused(self):
        self.assertRaises(configdrive.Refused, self._prepare, 'AAAA')

    def test_optional_goes_on_without_it(self):
        for conf, ii in ((True, {}), (False, {
                'container_configdrive_optional': 'true'})):
            self.config(configdrive_optional=conf, group='container')
            info, report = self._prepare('AAAA', **ii)
            self.assertIsNone(info)
            self.assertFalse(report['used'])
            self.assertTrue(report['reason'].startswith(
                MALFORMED + 'not gzip'), report)

    def test_instance_info_overrides_the_option(self):
        self.config(configdrive_optional=True, group='container')
        self.assertRaises(configdrive.Refused, self._prepare, 'AAAA',
                          container_configdrive_optional=False)

    def test_optional_must_be_a_boolean(self):
        self.node.instance_info = dict(self.node.instance_info,
                                       container_configdrive_optional='yes!')
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertRaisesRegex(
                exception.InvalidParameterValue,
                'container_configdrive_optional must be true or false',
                task.driver.deploy.validate, task)


@mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                   autospec=True)
@mock.patch.object(boot_files, 'prepare', autospec=True)
@mock.patch.object(rootfs, 'prepare', autospec=True)
@mock.patch.object(rootfs, 'resolve', autospec=True)
class DeployTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.config_temp_dir('tempdir')
        self.executor = base.CapturingExecutor.install(self)

    def _deploy(self, mock_resolve, value, **ii):
        mock_resolve.return_value = base.resolved()
        self.node.instance_info = dict(self.node.instance_info,
                                       configdrive=value, **ii)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            result = task.driver.deploy.deploy(task)
            task.node.save()
        return result

    @mock.patch.object(agent_base, 'execute_step', autospec=True)
    def test_given_to_the_start_step_then_unpublished(
            self, mock_execute, mock_resolve, mock_prepare, mock_boot,
            mock_power):
        mock_execute.return_value = states.DEPLOYWAIT
        self.assertEqual(states.DEPLOYWAIT,
                         self._deploy(mock_resolve, isos.encode(ISO)))
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        report = run_report.get(node)
        self.assertTrue(report['configdrive']['used'])
        self.assertEqual(len(ISO), report['configdrive']['bytes'])
        info = node.driver_internal_info['bmc_deploy']
        url = info['configdrive']['token_url']
        path = os.path.join(CONF.deploy.http_root,
                            url[len(CONF.deploy.http_url) + 1:])
        self.assertTrue(os.path.exists(path))

        info['workload_args'] = {'command': ['/x']}
        node.set_driver_internal_info('bmc_deploy', info)
        node.deploy_step = {'interface': 'deploy',
                            'step': 'bmc_start_workload', 'priority': 70,
                            'args': {}}
        node.save()
        with task_manager.acquire(self.context, node.uuid) as task:
            task.driver.deploy.bmc_start_workload(task)
            args = mock_execute.call_args[0][1]['args']
            self.assertEqual(['/x'], args['command'])
            self.assertEqual(
                {'url': url, 'sha256': hashlib.sha256(ISO).hexdigest(),
                 'size': len(ISO), 'authorized_keys': True},
                args['configdrive'])
            with mock.patch.object(container_deploy.agent_calls, 'call',
                                   autospec=True):
                task.driver.deploy.bmc_record_start(task)
            task.node.save()
        self.assertFalse(os.path.exists(path))

    def test_malformed_fails_before_power_and_staging(
            self, mock_resolve, mock_prepare, mock_boot, mock_power):
        exc = self.assertRaises(exception.InstanceDeployFailure,
                                self._deploy, mock_resolve, 'AAAA')
        self.assertTrue(str(exc).startswith(MALFORMED + 'not gzip'), exc)
        mock_power.assert_not_called()
        mock_boot.assert_not_called()
        mock_resolve.assert_not_called()
        self.assertEqual([], self.executor.submitted)
        self.assertFalse(os.path.exists(os.path.join(
            CONF.deploy.http_root, self.node.uuid)))

    def _nova_group_drive(self):
        self.node.instance_uuid = uuidutils.generate_uuid()
        self.node.save()
        return isos.encode(isos.config_drive(
            meta={'uuid': 'u-1', 'launch_index': 0,
                  'meta': {'container_group': 'mpi',
                           'container_group_size': '2'}},
            extra={'ec2/latest/meta-data.json':
                   b'{"reservation-id": "r-k2jx0w7f"}'}))

    def test_nova_servers_properties_join_a_group(
            self, mock_resolve, mock_prepare, mock_boot, mock_power):
        drive = self._nova_group_drive()
        obj_utils.create_test_port(
            self.context, uuid=uuidutils.generate_uuid(),
            node_id=self.node.id, address='52:54:00:bd:00:00',
            physical_network='bmc-group',
            extra={'bmc_group_address': '192.0.2.10/24'})
        self.assertEqual(states.DEPLOYWAIT, self._deploy(
            mock_resolve, drive, project_id='p1'))
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        rec = node.driver_internal_info['bmc_deploy']['group']
        self.assertEqual(('p1/mpi@r-k2jx0w7f', 2, 'joined'),
                         (rec['key'], rec['size'], rec['state']))

    def test_nova_group_without_port_fails_before_power(
            self, mock_resolve, mock_prepare, mock_boot, mock_power):
        exc = self.assertRaises(
            exception.InstanceDeployFailure, self._deploy, mock_resolve,
            self._nova_group_drive(), project_id='p1')
        self.assertIn('cannot join a run group', str(exc))
        mock_power.assert_not_called()
        mock_resolve.assert_not_called()

    def test_optional_run_goes_on_and_reports_why(
            self, mock_resolve, mock_prepare, mock_boot, mock_power):
        self.assertEqual(states.DEPLOYWAIT, self._deploy(
            mock_resolve, 'AAAA', container_configdrive_optional=True))
        mock_power.assert_called_once_with(mock.ANY, states.POWER_ON)
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        section = run_report.get(node)['configdrive']
        self.assertFalse(section['used'])
        self.assertIn('not gzip', section['reason'])
        self.assertIsNone(node.driver_internal_info['bmc_deploy'][
            'configdrive'])

    def test_without_one_nothing_changes(
            self, mock_resolve, mock_prepare, mock_boot, mock_power):
        self._deploy(mock_resolve, None)
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        self.assertNotIn('configdrive', run_report.get(node))


class NodeFactsTestCase(base.ContainerDeployTestCase):

    def test_checked(self):
        self.assertEqual(
            {'files': 4, 'authorized_keys': 1, 'seconds': 0.25,
             'device': '/dev/loop3'},
            configdrive.node_facts({'files': 4, 'authorized_keys': 1,
                                    'seconds': 0.25, 'device': '/dev/loop3',
                                    'bytes': 'x' * 10 ** 6}))
        self.assertEqual(
            {'device': None},
            configdrive.node_facts({'files': -1, 'authorized_keys': True,
                                    'seconds': 'slow',
                                    'device': '/dev/loop3; rm -rf /'}))
        self.assertIsNone(configdrive.node_facts(['x']))

    def test_start_step_result_in_the_report(self):
        from ironic_bmc.drivers import step_hooks
        report = run_report.new(self.node, mock.Mock(
            image=base.IMAGE, rootfs='ramfs', mode='job'))
        report['configdrive'] = {'used': True, 'bytes': 1}
        self.node.provision_state = states.DEPLOYWAIT
        self.node.set_driver_internal_info(run_report.INTERNAL_KEY, report)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            step_hooks.after_start_workload(task, {'command_result': {
                'deploy_result': {'pid': 7, 'started': 100.0,
                                  'configdrive': {
                                      'files': 4, 'authorized_keys': 1,
                                      'device': '/dev/loop0',
                                      'seconds': 0.1}}}})
            task.node.save()
        report = run_report.get(objects.Node.get_by_uuid(self.context,
                                                         self.node.uuid))
        self.assertEqual({'used': True, 'bytes': 1, 'node': {
            'files': 4, 'authorized_keys': 1, 'device': '/dev/loop0',
            'seconds': 0.1}}, report['configdrive'])
