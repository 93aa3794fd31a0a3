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

"""The agent a node boots is the operator's; Wake-on-LAN is never warm.

Issue 43, findings 3 and 4, on Ironic's DB test fixtures: a lessee that
writes ``instance_info/kernel`` and ``ramdisk`` and asks for cleaning
must not get its own "agent" booted (and left up, warm, for the next
tenant's deploy), and a node whose power-off is the agent's word is
neither warm nor a project's to deploy on unless the operator says so.
"""

from unittest import mock

from ironic.common import exception
from ironic.common import states
from ironic.conductor import task_manager

from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import deploy_checks
from ironic_bmc.drivers import warm
from ironic_bmc.drivers import wol_power
from ironic_bmc.tests.unit.drivers import test_container_deploy as base
from ironic_bmc.tests.unit.drivers import test_warm

EVIL = {'kernel': 'http://203.0.113.9/evil-kernel',
        'ramdisk': 'http://203.0.113.9/evil-agent'}


class AgentFilesTestCase(base.ContainerDeployTestCase):

    def _images(self, agent_only):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            images = boot_files.boot_images(task, agent_only=agent_only)
        return {label: href for label, (href, _path) in images.items()}

    def test_cleaning_boots_the_operators_agent_whatever_instance_info(
            self):
        # A lessee's instance_info on an AVAILABLE node, then manage +
        # provide: cleaning boots driver_info's files.
        self.node.lessee = 'p1'
        self.node.instance_info = dict(EVIL)
        self.node.save()
        images = self._images(agent_only=True)
        self.assertEqual('http://h/k', images[boot_files.LABEL_KERNEL])
        self.assertEqual('http://h/r', images[boot_files.LABEL_RAMDISK])
        # The operator's own node: the same (cleaning is the operator's).
        self.node.lessee = None
        self.node.save()
        self.assertEqual('http://h/r',
                         self._images(agent_only=True)[
                             boot_files.LABEL_RAMDISK])

    def test_cleaning_marks_the_operators_files_as_warm(self):
        self.node.lessee = 'p1'
        self.node.instance_info = dict(EVIL)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            warm.booting_for_cleaning(task)
            mark = task.node.driver_internal_info[warm.KEY]
        self.assertEqual('http://h/k', mark['boot']['kernel'])
        self.assertEqual('http://h/r', mark['boot']['ramdisk'])

    @mock.patch.object(boot_files, 'cache_boot_files', autospec=True)
    @mock.patch.object(boot_files.pxe_utils, 'create_pxe_config',
                       autospec=True)
    @mock.patch.object(boot_files, 'ipxe_dhcp', autospec=True)
    def test_cleaning_stages_the_operators_files(self, mock_dhcp,
                                                  mock_script, mock_cache):
        self.node.lessee = 'p1'
        self.node.instance_info = dict(EVIL)
        self.node.provision_state = states.CLEANING
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.prepare_cleaning(task)
        staged = mock_cache.call_args[0][1]
        self.assertEqual('http://h/r',
                         staged[boot_files.LABEL_RAMDISK][0])
        self.assertEqual('http://h/k', staged[boot_files.LABEL_KERNEL][0])

    def test_a_projects_deploy_boots_the_operators_agent(self):
        self.node.lessee = 'p1'
        self.node.instance_info = dict(self.node.instance_info, **EVIL)
        self.node.save()
        images = self._images(agent_only=False)
        # The run's kernel is the project's choice; the agent is not.
        self.assertEqual(EVIL['kernel'], images[boot_files.LABEL_KERNEL])
        self.assertEqual('http://h/r', images[boot_files.LABEL_RAMDISK])

    def test_the_operator_may_still_name_a_ramdisk(self):
        self.node.instance_info = dict(self.node.instance_info, **EVIL)
        self.node.save()
        self.assertEqual(EVIL['ramdisk'], self._images(agent_only=False)[
            boot_files.LABEL_RAMDISK])

    def _refused(self, **info):
        self.node.instance_info = dict(self.node.instance_info, **info)
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    boot_files.validate, task)
        return str(exc)

    def test_a_projects_agent_ramdisk_is_refused_at_validate(self):
        self.node.lessee = 'p1'
        msg = self._refused(ramdisk=EVIL['ramdisk'])
        self.assertIn('instance_info/ramdisk: the agent ramdisk', msg)
        self.assertIn('deployed for project p1 (the node\'s lessee)', msg)

    def test_a_projects_file_url_is_refused_at_validate(self):
        self.node.owner = 'o1'
        for key in ('kernel', 'kernel_modules'):
            msg = self._refused(**{key: 'file:///var/lib/ironic/x'})
            self.assertIn('instance_info/%s: a file:// boot file' % key,
                          msg)
            self.assertIn('project o1 (the node\'s owner)', msg)
            self.node.instance_info.pop(key)


class WakeOnLanTestCase(test_warm.WarmBase):
    """A node whose power interface is ours (wol)."""

    def test_the_power_interface_decides(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertTrue(warm.power_proven(task))
            task.driver.power = wol_power.WakeOnLanPower()
            self.assertFalse(warm.power_proven(task))

    def test_cleaning_never_binds_a_wol_node(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.power = wol_power.WakeOnLanPower()
            task.node.set_driver_internal_info(warm.KEY, {
                'boot': {}, 'booted_at': 1.0})
            warm.bind(task)
            self.assertNotIn(warm.KEY, task.node.driver_internal_info)

    def test_a_wol_node_is_never_claimed_warm(self):
        self._cleaned()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.power = wol_power.WakeOnLanPower()
            self.assertFalse(warm.may_be_warm(task))
            got = warm.claim(task, test_warm.DEFAULT_BOOT)
        self.assertEqual(warm.COLD, got.mode)
        self.assertIn('Wake-on-LAN', got.reason)

    def _validate(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.power = wol_power.WakeOnLanPower()
            deploy_checks._check_wake_on_lan(task)

    def test_a_projects_deploy_on_a_wol_node_is_refused(self):
        self.node.lessee = 'p1'
        self.node.save()
        exc = self.assertRaises(exception.InvalidParameterValue,
                                self._validate)
        self.assertIn('[container]wol_project_deploys is false', str(exc))
        self.assertIn('project p1', str(exc))
        # The operator's own run, or an operator that opts in: allowed.
        self.config(wol_project_deploys=True, group='container')
        self._validate()
        self.config(wol_project_deploys=False, group='container')
        self.node.lessee = None
        self.node.save()
        self._validate()
