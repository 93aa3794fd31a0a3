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

"""kexec from the agent: files fetched over real HTTP, checked, joined and
handed to a stand-in ``kexec`` program that records its arguments."""

import functools
import hashlib
import http.server
import os
import stat
import tempfile
import threading
import unittest
from unittest import mock

from ironic_python_agent import errors

from ipa_hardware_manager import kexec
from ipa_hardware_manager import manager

FILES = {'/kernel': b'K' * 5000, '/ramdisk': b'R' * 7001,
         '/modules': b'M' * 3000}

FAKE_KEXEC = """#!/bin/sh
printf '%%s\\n' "$@" > %(log)s
for a in "$@"; do
  case "$a" in --initrd=*) cp "${a#--initrd=}" %(initrd)s ;; esac
done
exit %(rc)d
"""


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = FILES.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _spec(base, path, body=None):
    body = FILES[path] if body is None else body
    return {'url': base + path, 'sha256': hashlib.sha256(body).hexdigest(),
            'size': len(body)}


class KexecLoadTestCase(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                     _Handler)
        threading.Thread(target=cls.server.serve_forever,
                         daemon=True).start()
        cls.base = 'http://127.0.0.1:%d' % cls.server.server_address[1]

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.work = os.path.join(self.tmp.name, 'work')
        self.log = os.path.join(self.tmp.name, 'argv')
        self.initrd = os.path.join(self.tmp.name, 'initrd-seen')

    def _kexec(self, rc=0):
        path = os.path.join(self.tmp.name, 'kexec')
        with open(path, 'w') as f:
            f.write(FAKE_KEXEC % {'log': self.log, 'initrd': self.initrd,
                                  'rc': rc})
        os.chmod(path, stat.S_IRWXU)
        return functools.partial(kexec.load, work_dir=self.work, kexec=path)

    def test_loads_the_checked_files_with_the_initrds_joined(self):
        load = self._kexec()
        got = load(_spec(self.base, '/kernel'),
                   [_spec(self.base, '/ramdisk'),
                    _spec(self.base, '/modules')],
                   'text console=ttyS0 isolcpus=1 BOOTIF=52:54:00:00:00:01')
        self.assertEqual('kexec_file_load', got['method'])
        self.assertEqual(10001, got['initrd_bytes'])
        with open(self.log) as f:
            argv = f.read().splitlines()
        self.assertEqual(['--load', '--kexec-file-syscall'], argv[:2])
        self.assertIn('--command-line=text console=ttyS0 isolcpus=1 '
                      'BOOTIF=52:54:00:00:00:01', argv)
        # One initrd: the ramdisk, then the modules 4-byte aligned, as
        # iPXE loads them.
        with open(self.initrd, 'rb') as f:
            self.assertEqual(FILES['/ramdisk'] + b'\0' * 3
                             + FILES['/modules'], f.read())
        # The kernel holds its copy: nothing stays in the agent's RAM.
        self.assertFalse(os.path.exists(self.work))

    def test_a_file_that_does_not_match_its_digest_is_refused(self):
        load = self._kexec()
        bad = _spec(self.base, '/ramdisk', body=b'other')
        bad['size'] = len(FILES['/ramdisk'])
        exc = self._raises(kexec.KexecError, load,
                                _spec(self.base, '/kernel'), [bad], 'text')
        self.assertIn('/ramdisk', str(exc))
        self.assertFalse(os.path.exists(self.log))

    def test_a_refused_load_says_why(self):
        load = self._kexec(rc=1)
        exc = self._raises(kexec.KexecError, load,
                                _spec(self.base, '/kernel'),
                                [_spec(self.base, '/ramdisk')], 'text')
        self.assertIn('kexec --load exited 1', str(exc))

    def test_bad_arguments_name_the_field(self):
        load = self._kexec()
        for args, field in (
                (({'url': 'file:///etc/shadow', 'sha256': 'a' * 64}, [],
                  'x'), 'kernel'),
                ((_spec(self.base, '/kernel'), [], 'x'), 'initrds'),
                ((_spec(self.base, '/kernel'),
                  [{'url': self.base + '/ramdisk'}], 'x'), 'initrds[0]'),
                ((_spec(self.base, '/kernel'),
                  [_spec(self.base, '/ramdisk')], 'a\nb'), 'cmdline')):
            exc = self._raises(kexec.KexecError, load, *args)
            self.assertTrue(str(exc).startswith(field), exc)

    def _raises(self, exc_type, func, *args):
        with self.assertRaises(exc_type) as ctx:
            func(*args)
        return ctx.exception

    def test_missing_kexec_program_is_named(self):
        exc = self._raises(
            kexec.KexecError,
            functools.partial(kexec.load, work_dir=self.work,
                              kexec='/nonexistent/kexec'),
            _spec(self.base, '/kernel'), [_spec(self.base, '/ramdisk')],
            'text')
        self.assertIn('kexec-tools', str(exc))


class KexecStepsTestCase(unittest.TestCase):

    def setUp(self):
        self.hwm = manager.BmcContainerHardwareManager()
        self.hwm._supervisor = mock.Mock()
        self.hwm._supervisor.status.return_value = {'state': 'absent'}

    def test_steps_are_offered_at_priority_zero(self):
        steps = {s['step']: s for s in self.hwm.get_deploy_steps({}, [])}
        self.assertEqual(0, steps['bmc_kexec_load']['priority'])
        self.assertEqual(0, steps['bmc_kexec_exec']['priority'])

    def test_never_next_to_a_workload(self):
        self.hwm._supervisor.status.return_value = {'state': 'running'}
        with self.assertRaisesRegex(errors.DeploymentError,
                                    'a workload is running'):
            self.hwm.bmc_kexec_load({}, [], kernel={}, initrds=[],
                                    cmdline='x')

    @mock.patch.object(kexec, 'loaded', autospec=True, return_value=False)
    def test_exec_without_a_load_is_refused(self, _loaded):
        with self.assertRaisesRegex(errors.DeploymentError,
                                    'no kernel is loaded'):
            self.hwm.bmc_kexec_exec({}, [])

    @mock.patch.object(manager.agent_quiet, 'stop_heartbeats',
                       autospec=True)
    @mock.patch.object(kexec, '_jump', autospec=True)
    @mock.patch.object(kexec, 'loaded', autospec=True, return_value=True)
    def test_exec_answers_then_jumps_without_heartbeats(
            self, _loaded, mock_jump, mock_quiet):
        done = threading.Event()
        mock_jump.side_effect = lambda *a: done.set()
        self.assertEqual({'exec_in_s': kexec.EXEC_DELAY},
                         self.hwm.bmc_kexec_exec({}, []))
        mock_quiet.assert_called_once_with()
        self.assertTrue(done.wait(5))
        mock_jump.assert_called_once_with(kexec.KEXEC, kexec.EXEC_DELAY)
