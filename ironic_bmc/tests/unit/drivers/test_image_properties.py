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

"""Container keys from the Glance image: Nova's path into a deploy."""

from unittest import mock

from ironic.common import exception
from ironic.common import states
from ironic.conductor import task_manager
from ironic.drivers.modules import deploy_utils

from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import rootfs
from ironic_bmc.drivers import tuning
from ironic_bmc import deploy_info
from ironic_bmc import image_properties
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

GLANCE_ID = 'f9a1c3e2-5b7d-4e8a-9c0f-1d2e3f4a5b6c'
KERNEL_ID = '0b6f2e4c-3a1d-4c9e-8f7a-2b3c4d5e6f70'
RAMDISK_ID = '1c7a3f5d-4b2e-4dae-9a8b-3c4d5e6f7081'


@mock.patch.object(deploy_utils, 'get_image_properties', autospec=True)
class ImagePropertiesTestCase(base.ContainerDeployTestCase):
    """As Nova's ironic driver leaves a node: image_source only."""

    def setUp(self):
        super().setUp()
        self.node.instance_info = {'image_source': GLANCE_ID,
                                   'root_gb': 10}
        self.node.save()

    def _props(self, **props):
        base_props = {'container_image': base.IMAGE,
                      'container_mode': 'job'}
        base_props.update(props)
        return base_props

    def test_keys_come_from_the_image(self, mock_props):
        mock_props.return_value = self._props(
            container_command='["/bin/app", "-v"]',
            container_env='{"OMP_NUM_THREADS": "4"}',
            container_tunables='thp-never', kernel_id=KERNEL_ID,
            ramdisk_id=RAMDISK_ID, hw_architecture='x86_64')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            image_properties.snapshot(task)
            container = deploy_info.parse(task.node)
            self.assertEqual(base.IMAGE, container.image)
            self.assertEqual('job', container.mode)
            self.assertEqual(['/bin/app', '-v'], container.command)
            self.assertEqual({'OMP_NUM_THREADS': '4'}, container.env)
            self.assertEqual('never', tuning.requested(task.node)['thp'])
            images = boot_files.boot_images(task)
            self.assertEqual(KERNEL_ID, images['deploy_kernel'][0])
            # The tenant's ramdisk holds its kernel's modules; the agent
            # ramdisk stays the operator's.
            self.assertEqual(RAMDISK_ID, images['bmc_modules'][0])
            self.assertEqual('http://h/r', images['deploy_ramdisk'][0])
        mock_props.assert_called_once_with(mock.ANY, GLANCE_ID)

    def test_ramdisk_id_never_becomes_the_agent(self, mock_props):
        """A tenant-built initrd booted as the agent would receive the
        node's agent token: ramdisk_id alone is refused."""
        mock_props.return_value = self._props(ramdisk_id=RAMDISK_ID)
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    image_properties.snapshot, task)
        self.assertIn('property ramdisk_id names the modules initrd of the '
                      'kernel the image boots (kernel_id), and kernel_id is '
                      'not set', str(exc))

    def test_tenant_modules_not_put_under_the_operators_kernel(
            self, mock_props):
        mock_props.return_value = self._props(kernel_id=KERNEL_ID,
                                              ramdisk_id=RAMDISK_ID)
        self.node.instance_info = dict(self.node.instance_info,
                                       kernel='http://h/operator-kernel')
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            image_properties.snapshot(task)
            images = boot_files.boot_images(task)
        self.assertEqual('http://h/operator-kernel',
                         images['deploy_kernel'][0])
        self.assertEqual('http://h/r', images['deploy_ramdisk'][0])
        self.assertNotIn('bmc_modules', images)

    def test_instance_info_wins(self, mock_props):
        mock_props.return_value = self._props(container_mode='service')
        self.node.instance_info = dict(self.node.instance_info,
                                       container_mode='job')
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            image_properties.snapshot(task)
            self.assertEqual('job', deploy_info.parse(task.node).mode)

    def _confined(self, mock_props, tunables, **instance_info):
        mock_props.return_value = self._props(container_privileged='false',
                                              container_tunables=tunables)
        self.node.instance_info = dict(self.node.instance_info,
                                       **instance_info)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            image_properties.snapshot(task)
            tuning.check_confined(task.node, deploy_info.parse(task.node))

    def test_confined_image_may_not_set_node_wide_knobs(self, mock_props):
        for knobs in ('{"sysctl": {"kernel.core_pattern": "|/x"}}',
                      '{"kernel_modules": ["evil"], "thp": "never"}'):
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    self._confined, mock_props, knobs)
            self.assertIn('property container_tunables of Glance image %s: '
                          'a confined run (container_privileged false) may '
                          'not set' % GLANCE_ID, str(exc))

    def test_confined_image_may_name_profiles_and_other_knobs(
            self, mock_props):
        self._confined(mock_props, 'thp-never')
        self._confined(mock_props, '{"profile": "thp-never", "thp": '
                                   '"always"}')
        # The operator's own tunables are the operator's business.
        self._confined(mock_props, '{"thp": "never"}',
                       container_tunables='{"sysctl": {"vm.swappiness": '
                                          '"10"}}')

    def test_bad_property_named_as_such(self, mock_props):
        mock_props.return_value = self._props(container_command='not json')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            image_properties.snapshot(task)
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    deploy_info.parse, task.node)
        self.assertIn('property container_command of Glance image %s'
                      % GLANCE_ID, str(exc))

    def test_args_from_the_image(self, mock_props):
        mock_props.return_value = self._props(
            container_args='["postgres", "-c", "fsync=off"]')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            image_properties.snapshot(task)
            container = deploy_info.parse(task.node)
        self.assertEqual(['postgres', '-c', 'fsync=off'], container.args)
        self.assertIsNone(container.command)
        mock_props.return_value = self._props(container_args='["a\\u0000"]')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            image_properties.snapshot(task)
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    deploy_info.parse, task.node)
        self.assertIn('property container_args of Glance image %s: an '
                      'argument contains a NUL byte' % GLANCE_ID, str(exc))

    def test_operator_only_keys_refused(self, mock_props):
        # A tenant may not point the conductor at its own disk or set the
        # pull secret through the image, and is told so.
        for key, value in (('kernel', 'file:///etc/shadow'),
                           ('kernel_modules', 'file:///etc/x'),
                           ('ramdisk', 'http://x/r'),
                           ('image_pull_secret', 'u:p'),
                           ('container_measure_link', 'true'),
                           ('container_noise_probe', '5')):
            mock_props.return_value = self._props(**{key: value})
            with task_manager.acquire(self.context, self.node.uuid) as task:
                exc = self.assertRaises(exception.InvalidParameterValue,
                                        task.driver.deploy.validate, task)
                self.assertNotIn(image_properties.SNAPSHOT_KEY,
                                 task.node.driver_internal_info)
            self.assertIn('Glance image %s: property %s may only be set by '
                          'the operator' % (GLANCE_ID, key), str(exc))
            if len(value) > 3:      # a URL or secret is never echoed
                self.assertNotIn(value, str(exc))

    def test_several_operator_keys_named_together(self, mock_props):
        mock_props.return_value = self._props(kernel='http://k',
                                              ramdisk='http://r')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    image_properties.snapshot, task)
        self.assertIn('property kernel, ramdisk may only', str(exc))

    def test_kernel_id_must_be_a_glance_image(self, mock_props):
        mock_props.return_value = self._props(kernel_id='file:///boot/vmlinuz')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    image_properties.snapshot, task)
        self.assertIn('kernel_id must be the UUID of a Glance image',
                      str(exc))

    def test_image_without_container_image(self, mock_props):
        mock_props.return_value = {'hw_architecture': 'x86_64'}
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertFalse(task.driver.deploy.supports_deploy(task))
            image_properties.snapshot(task)
            exc = self.assertRaises(exception.MissingParameterValue,
                                    deploy_info.parse, task.node)
        self.assertIn('Glance image %s has no container_image property'
                      % GLANCE_ID, str(exc))

    def test_supports_deploy_for_autodetect(self, mock_props):
        mock_props.return_value = self._props()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertTrue(task.driver.deploy.supports_deploy(task))
        mock_props.side_effect = exception.InvalidParameterValue('gone')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertFalse(task.driver.deploy.supports_deploy(task))

    def test_image_not_visible_is_a_clear_error(self, mock_props):
        mock_props.side_effect = exception.InvalidParameterValue(
            'Image %s can not be found.' % GLANCE_ID)
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    task.driver.deploy.validate, task)
        self.assertIn(GLANCE_ID, str(exc))

    def _validate_boot_images(self, mock_props, formats, missing=()):
        """validate with kernel_id/ramdisk_id whose Glance images have
        these disk formats; returns the exception, or None."""
        mock_props.return_value = self._props(kernel_id=KERNEL_ID,
                                              ramdisk_id=RAMDISK_ID)
        # As Ironic's GlanceImageService: show(); the operator's agent
        # ramdisk (an HTTP URL) is checked with validate_href().
        service = mock.Mock(spec=['show', 'validate_href'])

        def show(href):
            if href in missing:
                raise exception.ImageNotFound(image_id=href)
            return {'id': href, 'disk_format': formats[href]}

        service.show.side_effect = show
        with mock.patch.object(boot_files.image_service,
                               'get_image_service', autospec=True,
                               return_value=service):
            with task_manager.acquire(self.context,
                                      self.node.uuid) as task:
                image_properties.snapshot(task)
                try:
                    boot_files.validate(task)
                except exception.InvalidParameterValue as exc:
                    return exc
        return None

    def test_kernel_and_ramdisk_images_accepted(self, mock_props):
        self.assertIsNone(self._validate_boot_images(
            mock_props, {KERNEL_ID: 'aki', RAMDISK_ID: 'ari'}))

    def test_kernel_id_that_is_not_a_kernel(self, mock_props):
        # E.g. the container's own image named as the kernel.
        exc = self._validate_boot_images(
            mock_props, {KERNEL_ID: 'raw', RAMDISK_ID: 'ari'})
        self.assertIn('property kernel_id of Glance image %s: image %s is '
                      'not a kernel (disk_format raw)'
                      % (GLANCE_ID, KERNEL_ID), str(exc))
        self.assertIn('--disk-format aki', str(exc))

    def test_ramdisk_id_that_is_not_a_ramdisk(self, mock_props):
        exc = self._validate_boot_images(
            mock_props, {KERNEL_ID: 'aki', RAMDISK_ID: 'aki'})
        self.assertIn('property ramdisk_id of Glance image %s: image %s is '
                      'not a ramdisk (disk_format aki)'
                      % (GLANCE_ID, RAMDISK_ID), str(exc))

    def test_kernel_id_that_does_not_exist(self, mock_props):
        exc = self._validate_boot_images(
            mock_props, {RAMDISK_ID: 'ari'}, missing=(KERNEL_ID,))
        self.assertIn('property kernel_id of Glance image %s %s cannot be '
                      'used' % (GLANCE_ID, KERNEL_ID), str(exc))

    def test_image_too_big_for_ram_names_the_glance_image(self,
                                                           mock_props):
        digest_ref = 'r/a@sha256:' + 'b' * 64
        mock_props.return_value = self._props(container_image=digest_ref)
        entry = mock.Mock(meta={'unpacked_size': 64 * 1024 ** 3})
        with mock.patch.object(rootfs.get_cache(), 'lookup',
                               return_value=entry):
            with task_manager.acquire(self.context,
                                      self.node.uuid) as task:
                image_properties.snapshot(task)
                exc = self.assertRaises(
                    exception.InvalidParameterValue,
                    rootfs.check_known_size, task.node,
                    deploy_info.parse(task.node))
        self.assertIn('property container_image of Glance image %s: %s '
                      'unpacks to 65536 MiB' % (GLANCE_ID, digest_ref),
                      str(exc))

    @mock.patch.object(boot_files, 'clean_up', autospec=True)
    def test_snapshot_kept_for_the_run_and_dropped_at_clean_up(
            self, mock_clean, mock_props):
        mock_props.return_value = self._props()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            image_properties.snapshot(task)
            task.node.save()
        # The image changes while the node runs: the run keeps its keys.
        mock_props.return_value = self._props(container_mode='service')
        node = self.node.get_by_uuid(self.context, self.node.uuid)
        self.assertEqual('job', deploy_info.parse(node).mode)
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.node.power_state = states.POWER_OFF
            task.driver.deploy.clean_up(task)
            self.assertNotIn(image_properties.SNAPSHOT_KEY,
                             task.node.driver_internal_info)
