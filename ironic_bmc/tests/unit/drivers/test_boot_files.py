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

"""The node reaches its iPXE script through Ironic's DHCP provider, and
the deploy puts it on the provisioning network, as Ironic's own iPXE boot
and agent deploy do."""

import os
from unittest import mock

from ironic.common import dhcp_factory
from ironic.common import states
from ironic.conductor import task_manager
from ironic.tests.unit.objects import utils as obj_utils

from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import container_deploy
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

MAC = '52:54:00:12:34:56'


def _staging_mocked(test):
    """Ironic's iPXE staging and the boot device mocked: the test gets
    (script, options, config, cache, boot device) mocks."""
    # The first applied is the innermost: its mock comes first.
    for target, name, extra in (
            (boot_files.pxe_utils, 'create_ipxe_boot_script', {}),
            (boot_files.pxe_utils, 'build_pxe_config_options',
             {'return_value': {}}),
            (boot_files.pxe_utils, 'create_pxe_config', {}),
            (boot_files.pxe_utils, 'cache_ramdisk_kernel', {}),
            (boot_files.manager_utils, 'node_set_boot_device', {})):
        test = mock.patch.object(target, name, autospec=True, **extra)(test)
    return test


class DHCPTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        # Ironic's dnsmasq provider: real option and host files.
        self.config(dhcp_provider='dnsmasq', group='dhcp')
        self.config_temp_dir('dhcp_optsdir', group='dnsmasq')
        self.config_temp_dir('dhcp_hostsdir', group='dnsmasq')
        dhcp_factory.DHCPFactory._dhcp_provider = None
        self.addCleanup(setattr, dhcp_factory.DHCPFactory, '_dhcp_provider',
                        None)
        obj_utils.create_test_port(self.context, node_id=self.node.id,
                                   address=MAC, pxe_enabled=True)

    @_staging_mocked
    def test_boot_files_update_dhcp(self, *mocks):
        from ironic.conf import CONF
        with task_manager.acquire(self.context, self.node.uuid) as task:
            boot_files.prepare(task, {})
            tag = task.node.driver_internal_info['dnsmasq_tag']
        with open(os.path.join(CONF.dnsmasq.dhcp_optsdir,
                               'ironic-%s.conf' % self.node.uuid)) as f:
            opts = f.read()
        # iPXE itself is handed the script over HTTP.
        self.assertIn('tag:%s,tag:ipxe,67,%s/boot.ipxe'
                      % (tag, CONF.deploy.http_url), opts)
        with open(os.path.join(CONF.dnsmasq.dhcp_hostsdir,
                               'ironic-%s.conf' % MAC)) as f:
            self.assertIn(tag, f.read())

    @_staging_mocked
    def test_staged_for_a_kexec_the_boot_device_is_left(
            self, mock_script, mock_options, mock_config, mock_cache,
            mock_boot):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            boot_files.prepare(task, {}, pxe_boot=False)
            mock_config.assert_called_once()
            mock_cache.assert_called_once()
            mock_boot.assert_not_called()
            boot_files.set_pxe_boot(task)
        mock_boot.assert_called_once_with(mock.ANY, mock.ANY,
                                          persistent=True)
        self.assertEqual('pxe', mock_boot.call_args[0][1])

    @_staging_mocked
    def test_cache_race_is_tried_again(self, mock_script, mock_options,
                                       mock_config, mock_cache, mock_boot):
        # Ironic's cache clean-up stats a temporary file another node's
        # download has just renamed.
        gone = FileNotFoundError(2, 'No such file or directory')
        mock_cache.side_effect = [gone, gone, None]
        with task_manager.acquire(self.context, self.node.uuid) as task:
            boot_files.prepare(task, {})
        self.assertEqual(3, mock_cache.call_count)
        mock_boot.assert_called_once_with(mock.ANY, mock.ANY,
                                          persistent=True)
        # Not forever.
        mock_cache.reset_mock()
        mock_cache.side_effect = gone
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertRaises(FileNotFoundError, boot_files.prepare, task,
                              {})
        self.assertEqual(4, mock_cache.call_count)

    @mock.patch.object(container_deploy.manager_utils, 'node_power_action',
                       autospec=True)
    def test_prepare_adds_provisioning_network(self, mock_power):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            net = task.driver.network
            with mock.patch.object(net, 'add_provisioning_network',
                                   autospec=True) as add, \
                    mock.patch.object(net, 'unconfigure_tenant_networks',
                                      autospec=True) as unconf:
                task.driver.deploy.prepare(task)
                add.assert_called_once_with(task)
                unconf.assert_called_once_with(task)
            mock_power.assert_called_once_with(task, states.POWER_OFF)


class PublishTestCase(base.ContainerDeployTestCase):
    """The rootfs artifact is published as Ironic's LocalPublisher does."""

    def _published_path(self, url):
        from ironic.conf import CONF
        self.assertTrue(url.startswith(CONF.deploy.http_url + '/'))
        return os.path.join(CONF.deploy.http_root,
                            url[len(CONF.deploy.http_url) + 1:])

    @mock.patch.object(boot_files, '_selinux', lambda: True)
    def test_publish_links_and_restores_context(self):
        self.restorecon.side_effect = None
        with task_manager.acquire(self.context, self.node.uuid) as task:
            url = boot_files.publish_artifact(task, self.artifact.path,
                                              'erofs')
            path = self._published_path(url)
            rel = task.node.driver_internal_info[
                boot_files.ARTIFACT_DIR_KEY]
        self.assertEqual(os.path.join(self.node.uuid,
                                      os.path.basename(
                                          os.path.dirname(path))), rel)
        self.assertTrue(os.path.basename(os.path.dirname(path))
                        .startswith('rootfs-'))
        self.assertTrue(os.path.samefile(self.artifact.path, path))
        self.assertEqual(0o644, os.stat(path).st_mode & 0o777)
        # SELinux hosts: the web server may read what was linked in.
        self.restorecon.assert_called_once_with(
            '/usr/sbin/restorecon', '-i', '-R', os.path.dirname(path))

    @mock.patch.object(boot_files, '_selinux', lambda: False)
    def test_no_process_without_selinux(self):
        # LocalPublisher forks restorecon for every publication, even
        # where there is none: 4 % of a busy conductor's CPU.
        verity = self.artifact.path + '.verity'
        with open(verity, 'wb') as f:
            f.write(b'hash tree')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            url = boot_files.publish_artifact(task, self.artifact.path,
                                              'erofs', verity_path=verity)
        path = self._published_path(url)
        self.assertTrue(os.path.samefile(self.artifact.path, path))
        self.assertTrue(os.path.samefile(
            verity, path + boot_files.VERITY_SUFFIX))
        self.assertEqual(0o755, os.stat(os.path.dirname(path)).st_mode
                         & 0o777)
        self.restorecon.assert_not_called()

    def test_publish_copies_across_filesystems(self):
        with mock.patch.object(os, 'link', autospec=True,
                               side_effect=OSError(18, 'cross-device')):
            with task_manager.acquire(self.context,
                                      self.node.uuid) as task:
                url = boot_files.publish_artifact(task, self.artifact.path,
                                                  'erofs')
        path = self._published_path(url)
        self.assertFalse(os.path.samefile(self.artifact.path, path))
        with open(path, 'rb') as a, open(self.artifact.path, 'rb') as b:
            self.assertEqual(b.read(), a.read())
        self.assertEqual(0o644, os.stat(path).st_mode & 0o777)

    def test_each_publication_has_its_own_url(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            first = boot_files.publish_artifact(task, self.artifact.path,
                                                'erofs')
            boot_files.unpublish_artifact(task)
            second = boot_files.publish_artifact(task, self.artifact.path,
                                                 'erofs')
        self.assertNotEqual(first, second)
        self.assertFalse(os.path.exists(self._published_path(first)))
        self.assertTrue(os.path.exists(self._published_path(second)))
