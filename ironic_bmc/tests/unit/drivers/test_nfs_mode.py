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


"""The nfs rootfs mode on the conductor: validate, deploy, exports."""

import dataclasses
import os
from unittest import mock

import fixtures
from ironic.common import exception
from ironic.common import states
from ironic.conductor import task_manager
from ironic.conf import CONF
from ironic import objects
from ironic.tests.unit.objects import utils as obj_utils
from oslo_utils import uuidutils

from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import rootfs
from ironic_bmc.nfs import ganesha
from ironic_bmc.tests.unit.drivers import test_container_deploy as base


class NfsTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        self.node.instance_info = dict(self.node.instance_info,
                                       container_rootfs='nfs')
        self.node.save()
        nfs_dir = self.useFixture(fixtures.TempDir()).path
        self.config(nfs_server_address='10.0.2.100', nfs_port=12049,
                    nfs_exports_file=os.path.join(nfs_dir, 'exports.conf'),
                    nfs_pid_file=os.path.join(nfs_dir, 'ganesha.pid'),
                    group='container')
        rootfs._cache.cache_clear()
        self.addCleanup(rootfs._cache.cache_clear)
        self.reloads = self.useFixture(fixtures.MockPatchObject(
            ganesha.ExportTable, 'reload', autospec=True)).mock

    def _tree(self, key):
        """A tree entry in the real cache, pinned for the node."""
        def build(work):
            os.makedirs(os.path.join(work, 'artifact', 'bin'))
            return {'format': 'tree', 'size': 0}
        entry, _built = rootfs.get_cache().get_or_build(key, build,
                                                        pin=self.node.uuid)
        return dataclasses.replace(self.artifact, path=entry.artifact,
                                   format='tree', cache_key=key)


class ValidateTestCase(NfsTestCase):

    def test_refused_without_a_server(self):
        self.config(nfs_server_address=None, group='container')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    task.driver.deploy.validate, task)
        self.assertIn('instance_info/container_rootfs: "nfs" needs the '
                      'conductor\'s NFS server', str(exc))
        self.assertIn('[container]nfs_server_address', str(exc))


@mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                   autospec=True)
@mock.patch.object(boot_files, 'prepare', autospec=True)
@mock.patch.object(rootfs, 'resolve', autospec=True)
class DeployTestCase(NfsTestCase):

    def setUp(self):
        super().setUp()
        self.executor = base.CapturingExecutor.install(self)

    def test_server_down_fails_before_power_on(self, mock_resolve,
                                               mock_boot, mock_power):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InstanceDeployFailure,
                                    task.driver.deploy.deploy, task)
        self.assertIn('no running nfs-ganesha found through its pid file',
                      str(exc))
        self.assertIn('[container]nfs_pid_file', str(exc))
        mock_resolve.assert_not_called()
        mock_boot.assert_not_called()
        mock_power.assert_not_called()
        self.assertEqual([], self.executor.submitted)

    @mock.patch.object(rootfs, 'check_nfs_server', autospec=True)
    @mock.patch.object(rootfs.pipeline, 'prepare_rootfs', autospec=True)
    def test_tree_is_exported_not_published(self, mock_prepare, mock_check,
                                            mock_resolve, mock_boot,
                                            mock_power):
        key = 'sha256-%s-tree-none-v1' % ('b' * 64)
        # As the pipeline does: built (or found) and pinned for the node.
        mock_prepare.side_effect = lambda *a, **kw: self._tree(key)
        mock_resolve.return_value = base.resolved()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertEqual(states.DEPLOYWAIT,
                             task.driver.deploy.deploy(task))
            task.node.save()        # as Ironic does when the step waits
        mock_check.assert_called_once_with()
        self.executor.run_all()
        self.assertEqual('tree', mock_prepare.call_args.kwargs['fmt'])
        node = objects.Node.get_by_uuid(self.context, self.node.uuid)
        info = node.driver_internal_info['bmc_deploy']
        self.assertEqual('ready', info['build']['state'])
        self.assertNotIn('artifact_token_url', info)
        self.assertEqual({'server': '10.0.2.100', 'port': 12049,
                          'export': '/bmc/' + key,
                          'options': 'vers=4.1,hard,timeo=100'},
                         info['stage_args']['nfs'])
        self.assertEqual('tree', info['stage_args']['format'])
        # Nothing published for the node to download.
        self.assertFalse(os.path.exists(os.path.join(CONF.deploy.http_root,
                                                     self.node.uuid)))
        # No node may mount it yet: the node's address is known once its
        # agent has looked up.
        self.assertEqual({}, rootfs.export_table().exported())
        self.assertEqual(0, self.reloads.call_count)
        node.set_driver_internal_info('agent_url', 'https://10.0.2.15:9999')
        node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            with mock.patch.object(task.driver.deploy, '_agent_up',
                                   autospec=True), \
                    mock.patch.object(task.driver.deploy,
                                      '_execute_in_band',
                                      autospec=True) as mock_execute:
                task.driver.deploy.bmc_stage_rootfs(task)
        self.assertEqual('/bmc/' + key,
                         mock_execute.call_args.args[1]['nfs']['export'])
        text = open(CONF.container.nfs_exports_file).read()
        self.assertIn('Pseudo = "/bmc/%s";' % key, text)
        # That node only, read-only, root squashed.
        self.assertIn('Clients = 10.0.2.15;\n        Access_Type = RO;',
                      text)
        self.assertIn('Squash = Root_Squash;', text)
        self.assertEqual(1, self.reloads.call_count)


class ExportLifeTestCase(NfsTestCase):

    def _up(self, node, address):
        node.set_driver_internal_info('agent_url', 'https://%s:9999'
                                      % address)
        node.save()

    def test_exported_while_a_node_holds_it(self):
        key = 'sha256-%s-tree-none-v1' % ('c' * 64)
        self._tree(key)
        other = obj_utils.create_test_node(
            self.context, uuid=uuidutils.generate_uuid(),
            name='other-node', driver='fake-hardware')
        self._up(self.node, '10.0.2.15')
        self._up(other, '10.0.2.16')
        rootfs.get_cache().pin(key, other.uuid)
        table = rootfs.export_table()
        rootfs.sync_exports()
        self.assertEqual([key], list(table.exported()))
        self.assertIn('Clients = 10.0.2.15, 10.0.2.16;',
                      open(table.exports_file).read())
        # The first node is done; the other still reads it, alone.
        rootfs.release(self.node)
        self.assertEqual([key], list(table.exported()))
        self.assertIn('Clients = 10.0.2.16;',
                      open(table.exports_file).read())
        self.assertEqual([], rootfs.get_cache().evict(max_size=0))
        rootfs.release_holder(other.uuid)
        self.assertEqual({}, table.exported())
        self.assertNotIn('EXPORT', open(table.exports_file).read())
        # Withdrawn first, evictable after.
        self.assertEqual([key], rootfs.get_cache().evict(max_size=0))

    def test_only_trees_are_exported(self):
        def build(work):
            open(os.path.join(work, 'artifact'), 'wb').close()
            return {'format': 'erofs', 'size': 0}
        rootfs.get_cache().get_or_build('e1', build, pin=self.node.uuid)
        rootfs.sync_exports()
        self.assertEqual({}, rootfs.export_table().exported())

    @mock.patch.object(rootfs.LOG, 'warning', autospec=True)
    def test_release_with_the_server_gone_still_releases(self, mock_warn):
        key = 'sha256-%s-tree-none-v1' % ('d' * 64)
        self._tree(key)
        self._up(self.node, '10.0.2.15')
        rootfs.sync_exports()
        self.reloads.side_effect = ganesha.NFSServerUnavailable(reason='x')
        rootfs.release(self.node)
        self.assertEqual([], rootfs.get_cache().pins(key))
        self.assertEqual({}, rootfs.export_table().exported())
        self.assertIn('Could not withdraw NFS exports',
                      mock_warn.call_args.args[0])
