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

"""A node's kernel profile: what the conductor accepts, and who may ask
for a profiling run."""

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import types

from ironic.common import exception
from ironic.tests import base

from bmc_common import protocol
from ironic_bmc import agent_replies
from ironic_bmc.kernel import profile
from ironic_bmc.kernel import run_profile

BUILD = 'ab' * 12
PREFIX = 'var/lib/ironic/bmc-kernel-builds/builds/%s/obj/' % BUILD


def make_tar(members):
    """members: [(name, data or None for a symlink)] -> tar bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w') as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.SYMTYPE
                info.linkname = '/etc/passwd'
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def opened(data):
    return tarfile.open(fileobj=io.BytesIO(data))


class TestCase(base.TestCase):

    def _clear_attrs(self):
        # Ironic's base deletes the test's attributes at cleanup, which
        # pytest's unittest runner then trips over.
        pass


class ProfileCheckTestCase(TestCase):

    def test_a_good_profile(self):
        data = make_tar([(PREFIX + 'kernel/fork.gcda', b'x' * 10),
                         (PREFIX + 'mm/memory.gcda', b'y' * 5)])
        self.assertEqual((BUILD, 2, 15),
                         profile.check(opened(data), 100))

    def test_refusals_name_the_member(self):
        cases = [
            ([(PREFIX + 'kernel/fork.gcda', None)], 'not a regular file'),
            ([('/' + PREFIX + 'kernel/fork.gcda', b'x')],
             'not a plain relative path'),
            ([(PREFIX + '../../../../etc/cron.d/x.gcda', b'x')],
             'not a plain relative path'),
            ([(PREFIX + 'kernel/fork.o', b'x')],
             'not the .gcda file of an object of a kernel this service'),
            ([('home/user/linux/kernel/fork.gcda', b'x')],
             'not the .gcda file of an object of a kernel this service'),
            ([], 'holds no .gcda file'),
            ([(PREFIX + 'kernel/fork.gcda', b'x'),
              (PREFIX.replace(BUILD, 'cd' * 12) + 'mm/memory.gcda', b'y')],
             'mixes the objects of several kernel builds'),
            ([(PREFIX + 'kernel/fork.gcda', b'x' * 101)],
             'more than %d files or 100 bytes' % profile.MAX_FILES),
        ]
        for members, message in cases:
            self.assertRaisesRegex(profile.ProfileError, message,
                                   profile.check, opened(make_tar(members)),
                                   100)

    def test_extract_writes_under_the_object_tree_only(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        data = make_tar([(PREFIX + 'kernel/sched/core.gcda', b'counts')])
        self.assertEqual(1, profile.extract(opened(data), tmp))
        with open(os.path.join(tmp, 'kernel', 'sched', 'core.gcda'),
                  'rb') as f:
            self.assertEqual(b'counts', f.read())
        # A refused tar writes nothing.
        bad = make_tar([(PREFIX + 'kernel/fork.gcda', b'x'),
                        (PREFIX + 'kernel/evil', b'x')])
        self.assertRaises(profile.ProfileError, profile.extract,
                          opened(bad), tmp)
        self.assertFalse(os.path.exists(os.path.join(tmp, 'kernel',
                                                     'fork.gcda')))

    def test_not_a_tar(self):
        self.assertRaisesRegex(profile.ProfileError, 'not a tar',
                               profile.open_tar_bytes, b'not a tar' * 100)


def node(instance_info=None, lessee=None, image_props=None, owner=None,
         instance_uuid=None):
    internal = {}
    if image_props is not None:
        internal['bmc_image_properties'] = image_props
    return types.SimpleNamespace(uuid='1be26c0b-03f2-4d2e-ae87-c02d7f33c123',
                                 instance_info=instance_info or {},
                                 driver_internal_info=internal,
                                 lessee=lessee, owner=owner,
                                 instance_uuid=instance_uuid)


class RequestedTestCase(TestCase):

    def test_operator_asks_for_gcov(self):
        n = node({protocol.II_KERNEL_PROFILE: 'gcov'})
        self.assertEqual('gcov', run_profile.requested(n, n.instance_info))
        self.assertIsNone(run_profile.requested(node(), {}))

    def test_unknown_method(self):
        n = node({protocol.II_KERNEL_PROFILE: 'perf'})
        self.assertRaisesRegex(
            exception.InvalidParameterValue,
            "instance_info/container_kernel_profile: 'perf' is not one of "
            "gcov", run_profile.requested, n, n.instance_info)

    def test_a_tenant_deploy_is_refused(self):
        gcov = {protocol.II_KERNEL_PROFILE: 'gcov'}
        for n, project in (
                (node(dict(gcov, project_id='p1'),
                      instance_uuid='3c3c3c3c-0000-4000-8000-000000000001'),
                 'p1'),
                (node(gcov, lessee='p2'), 'p2'),
                # The owner is a project too, not the operator.
                (node(gcov, owner='o1'), 'o1')):
            self.assertRaisesRegex(
                exception.InvalidParameterValue,
                'kernel profiling is the operator\'s: node .* is deployed '
                'for project %s' % project,
                run_profile.requested, n, n.instance_info)

    def test_an_image_property_is_refused(self):
        n = node(image_props={protocol.II_KERNEL_PROFILE: 'gcov'})
        self.assertRaisesRegex(
            exception.InvalidParameterValue,
            'an image property cannot ask for it',
            run_profile.requested, n, {protocol.II_KERNEL_PROFILE: 'gcov'})


class SaveTestCase(TestCase):

    def setUp(self):
        super().setUp()
        self.config_temp_dir('report_dir', group='container')
        self.config(kernel_profile_max_mb=1, group='container')
        self.node = node()

    def _reply(self, data, **extra):
        reply = {'data': protocol.pack(data),
                 'sha256': hashlib.sha256(data).hexdigest(), 'files': 1,
                 'bytes': 3, 'uname_v': '#gcov-%s SMP' % BUILD[:12],
                 'machine': {'cpu_model': 'QEMU Virtual CPU version 2.5+',
                             'hypervisor': True, 'clocksource': 'tsc',
                             'emulated': True}}
        reply.update(extra)
        return reply

    def test_a_good_profile_is_kept(self):
        data = make_tar([(PREFIX + 'kernel/fork.gcda', b'abc')])
        section = run_profile.save(self.node, 'run-1', self._reply(data))
        self.assertEqual(BUILD, section['kernel_build'])
        self.assertEqual(1, section['files'])
        self.assertTrue(section['machine']['emulated'])
        path = run_profile.path(self.node.uuid, 'run-1')
        with open(path, 'rb') as f:
            self.assertEqual(data, f.read())
        found = run_profile.for_build(self.node.uuid, 'run-1')
        self.assertEqual((BUILD, path), (found['build'], found['path']))

    def test_a_changed_profile_is_refused_and_not_kept(self):
        data = make_tar([(PREFIX + 'kernel/fork.gcda', b'abc')])
        reply = self._reply(data, sha256='0' * 64)
        self.assertRaisesRegex(agent_replies.AgentReplyInvalid,
                               'sha256 mismatch', run_profile.save,
                               self.node, 'run-1', reply)
        self.assertFalse(os.path.exists(run_profile.path(self.node.uuid,
                                                         'run-1')))

    def test_a_profile_of_foreign_files_is_refused(self):
        data = make_tar([('etc/shadow.gcda', b'abc')])
        self.assertRaisesRegex(agent_replies.AgentReplyInvalid,
                               'kernel this service built',
                               run_profile.save, self.node, 'run-1',
                               self._reply(data))

    def test_a_profile_past_the_bound_is_refused(self):
        data = make_tar([(PREFIX + 'kernel/fork.gcda', os.urandom(2 ** 21))])
        self.assertRaises(agent_replies.AgentReplyInvalid, run_profile.save,
                          self.node, 'run-1', self._reply(data))

    def test_a_run_without_profile_cannot_feed_a_build(self):
        self.assertRaisesRegex(exception.InvalidParameterValue,
                               'has no kernel profile on this conductor',
                               run_profile.for_build, self.node.uuid,
                               'run-2')
