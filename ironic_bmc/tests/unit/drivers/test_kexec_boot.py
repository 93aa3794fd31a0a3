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

"""kexec from a warm agent, conductor side: what the agent is given (the
files the iPXE script would boot, and its command line) and the agent
forgotten as after a reboot."""

import hashlib
import os
from unittest import mock

from ironic.common import exception
from ironic.conductor import task_manager
from ironic.conf import CONF
from ironic.tests.unit.objects import utils as obj_utils

from bmc_common import protocol
from ironic_bmc.drivers import agent_calls
from ironic_bmc.drivers import boot_files
from ironic_bmc.drivers import kexec_boot
from ironic_bmc.tests.unit.drivers import test_container_deploy as base

MAC = '52:54:00:12:34:56'


class KexecBootTestCase(base.ContainerDeployTestCase):

    def setUp(self):
        super().setUp()
        obj_utils.create_test_port(self.context, node_id=self.node.id,
                                   address=MAC, pxe_enabled=True)
        self.images = {}
        for label, body in ((boot_files.LABEL_KERNEL, b'kernel'),
                            (boot_files.LABEL_RAMDISK, b'070701agent'),
                            (boot_files.LABEL_MODULES, b'\x1f\x8bmodules')):
            path = os.path.join(self.useFixture(
                __import__('fixtures').TempDir()).path, label)
            with open(path, 'wb') as f:
                f.write(body)
            self.images[label] = ('file:///' + label, path)
        self.options = {'pxe_append_params':
                        'nofb console=ttyS0 ipa-api-url=http://a:6385 '
                        'isolcpus=1'}
        self.node.set_driver_internal_info('agent_url', 'http://n:9999')
        self.node.set_driver_internal_info('agent_secret_token', 't')
        self.node.set_driver_internal_info('agent_cached_deploy_steps',
                                           {'deploy': []})
        self.node.save()

    @mock.patch.object(kexec_boot.initrd_pack, 'pack', autospec=True)
    def test_the_agent_gets_the_ipxe_boot(self, mock_pack):
        def pack(paths, out):
            with open(out, 'wb') as f:
                f.write(b'packed:' + b'+'.join(
                    os.path.basename(p).encode() for p in paths))
        mock_pack.side_effect = pack
        with task_manager.acquire(self.context, self.node.uuid) as task:
            args = kexec_boot.load_args(task, self.images, self.options)
            again = kexec_boot.load_args(task, self.images, self.options)
        self.assertEqual(args, again)
        # Packed once, the ramdisk first, as the iPXE script loads them.
        mock_pack.assert_called_once_with(
            [self.images['deploy_ramdisk'][1], self.images['bmc_modules'][1]],
            mock.ANY)
        base_url = 'http://10.0.2.100:8080/%s/' % self.node.uuid
        self.assertEqual(
            {'url': base_url + 'deploy_kernel',
             'sha256': hashlib.sha256(b'kernel').hexdigest(), 'size': 6},
            args['kernel'])
        [initrd] = args['initrds']
        packed = b'packed:deploy_ramdisk+bmc_modules'
        self.assertEqual(
            {'sha256': hashlib.sha256(packed).hexdigest(),
             'size': len(packed)},
            {k: initrd[k] for k in ('sha256', 'size')})
        self.assertTrue(initrd['url'].startswith(
            'http://10.0.2.100:8080/bmc-kexec/'), initrd['url'])
        name = initrd['url'].rsplit('/', 1)[1]
        with open(os.path.join(CONF.deploy.http_root, 'bmc-kexec',
                               name), 'rb') as f:
            self.assertEqual(packed, f.read())
        self.assertEqual('text nofb console=ttyS0 ipa-api-url=http://a:6385 '
                         'isolcpus=1 BOOTIF=%s' % MAC, args['cmdline'])

    @mock.patch.object(kexec_boot, '_packed', autospec=True,
                       return_value=('/p', 'http://h/p', 'a' * 64, 4))
    @mock.patch.object(agent_calls, 'call', autospec=True)
    def test_a_kexec_forgets_the_agent_as_a_reboot_does(self, mock_call,
                                                        _packed):
        mock_call.side_effect = [{'method': 'kexec_file_load'},
                                 {'exec_in_s': 2.0}]
        with task_manager.acquire(self.context, self.node.uuid) as task:
            got = kexec_boot.kexec(task, self.images, self.options)
            info = task.node.driver_internal_info
        self.assertEqual({'method': 'kexec_file_load'}, got)
        self.assertEqual([protocol.STEP_KEXEC_LOAD, protocol.STEP_KEXEC_EXEC],
                         [c[0][1] for c in mock_call.call_args_list])
        for key in ('agent_url', 'agent_secret_token',
                    'agent_cached_deploy_steps'):
            self.assertNotIn(key, info)

    @mock.patch.object(kexec_boot, '_packed', autospec=True,
                       return_value=('/p', 'http://h/p', 'a' * 64, 4))
    @mock.patch.object(agent_calls, 'call', autospec=True)
    def test_a_failed_load_leaves_the_agent_known(self, mock_call,
                                                  _packed):
        mock_call.side_effect = exception.IronicException('no kexec')
        with task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertRaises(exception.IronicException, kexec_boot.kexec,
                              task, self.images, self.options)
            self.assertEqual('t', task.node.driver_internal_info[
                'agent_secret_token'])
        self.assertEqual(1, mock_call.call_count)
