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

"""The runtime spec against the fields of the OCI runtime spec 1.0
(config.md, config-linux.md): what each shape must and must not hold."""

import os
import tempfile
import unittest

from ipa_hardware_manager import container_root
from ipa_hardware_manager import oci_spec


def _image(root, passwd='', group=''):
    os.makedirs(os.path.join(root, 'etc'), exist_ok=True)
    os.makedirs(os.path.join(root, 'data'), exist_ok=True)
    with open(os.path.join(root, 'etc', 'passwd'), 'w') as f:
        f.write('root:x:0:0:root:/root:/bin/sh\n'
                'redis:x:999:998::/data:/bin/false\n' + passwd)
    with open(os.path.join(root, 'etc', 'group'), 'w') as f:
        f.write('root:x:0:\nredis:x:998:\nadm:x:4:redis,other\n'
                'video:x:44:other,redis\n' + group)


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = os.path.join(self.tmp.name, 'root')
        _image(self.root)

    def build(self, **kw):
        args = {'command': ['/app', '--serve']}
        args.update(kw)
        return oci_spec.build(self.root, **args)


class PrivilegedSpecTest(Base):
    def test_required_top_level_fields(self):
        spec = self.build()
        self.assertEqual('1.0.2', spec['ociVersion'])
        self.assertEqual({'path': self.root, 'readonly': False},
                         spec['root'])
        self.assertNotIn('hostname', spec)  # the node's UTS is shared

    def test_process(self):
        spec = self.build(env={'A': 'b', 'PATH': '/opt/bin'},
                          workdir='/data', user='redis')
        process = spec['process']
        self.assertFalse(process['terminal'])
        self.assertEqual(['/app', '--serve'], process['args'])
        self.assertEqual('/data', process['cwd'])
        self.assertEqual({'uid': 999, 'gid': 998, 'additionalGids': [4, 44]},
                         process['user'])
        self.assertIn('A=b', process['env'])
        self.assertIn('PATH=/opt/bin', process['env'])
        self.assertIn('HOME=/data', process['env'])
        self.assertFalse(process['noNewPrivileges'])

    def test_environment_as_docker_gives_it(self):
        """PATH, HOSTNAME, HOME; no TERM without a terminal (Docker sets
        one only with -t); the image's over them."""
        env = dict(e.split('=', 1) for e in self.build(
            hostname='node-3', env={'HOSTNAME': 'mine'})['process']['env'])
        self.assertEqual({'PATH': oci_spec.DEFAULT_PATH, 'HOSTNAME': 'mine',
                          'HOME': '/root', 'container': 'bmc'}, env)
        env = dict(e.split('=', 1)
                   for e in self.build(hostname='node-3')['process']['env'])
        self.assertEqual('node-3', env['HOSTNAME'])
        self.assertNotIn('TERM', env)

    def test_workload_is_not_protected_from_the_oom_killer(self):
        # The agent lowers its own oom_score_adj; crun sets the
        # workload's back to 0.
        self.assertEqual(0, self.build()['process']['oomScoreAdj'])
        self.assertEqual(0, self.build(privileged=False)['process'][
            'oomScoreAdj'])

    def test_every_capability_the_kernel_knows(self):
        caps = self.build(cap_last_cap=40)['process']['capabilities']
        self.assertEqual({'bounding', 'effective', 'permitted'}, set(caps))
        self.assertEqual(41, len(caps['bounding']))
        self.assertIn('CAP_SYS_MODULE', caps['effective'])
        self.assertIn('CAP_SYS_ADMIN', caps['permitted'])
        older = self.build(cap_last_cap=37)['process']['capabilities']
        self.assertEqual('CAP_AUDIT_READ', older['bounding'][-1])

    def test_hpc_rlimits_by_default(self):
        limits = {r['type']: (r['soft'], r['hard'])
                  for r in self.build()['process']['rlimits']}
        # memlock unlimited for MPI/RDMA; open files: soft 1024 as under
        # Docker and systemd (select(), per-fd tables), hard 1048576.
        self.assertEqual({'RLIMIT_MEMLOCK': (2 ** 64 - 1, 2 ** 64 - 1),
                          'RLIMIT_NOFILE': (1024, 1048576)}, limits)

    def test_rlimits_over_the_defaults(self):
        limits = {r['type']: (r['soft'], r['hard']) for r in self.build(
            rlimits={'nofile': {'soft': 1024, 'hard': 65536},
                     'RLIMIT_STACK': 'unlimited', 'core': 0})[
                'process']['rlimits']}
        self.assertEqual((1024, 65536), limits['RLIMIT_NOFILE'])
        self.assertEqual((2 ** 64 - 1,) * 2, limits['RLIMIT_STACK'])
        self.assertEqual((0, 0), limits['RLIMIT_CORE'])
        self.assertIn('RLIMIT_MEMLOCK', limits)

    def test_only_mount_and_pid_namespaces(self):
        linux = self.build()['linux']
        self.assertEqual([{'type': 'pid'}, {'type': 'mount'}],
                         linux['namespaces'])
        self.assertEqual([{'allow': True, 'access': 'rwm'}],
                         linux['resources']['devices'])
        self.assertNotIn('maskedPaths', linux)
        self.assertNotIn('readonlyPaths', linux)
        self.assertEqual('/bmc-workload', linux['cgroupsPath'])

    def test_mounts(self):
        mounts = {m['destination']: m for m in self.build()['mounts']}
        # No /run, no /tmp: the image's own, as under Docker.
        self.assertEqual(['/proc', '/dev', '/dev/pts', '/dev/shm',
                          '/dev/mqueue', '/sys'], list(mounts))
        for mount in mounts.values():
            self.assertEqual({'destination', 'type', 'source', 'options'},
                             set(mount))
        # Every device of the node, also those that appear later.
        self.assertEqual(('bind', '/dev', ['bind', 'nosuid']),
                         (mounts['/dev']['type'], mounts['/dev']['source'],
                          mounts['/dev']['options']))
        self.assertEqual(('bind', '/dev/pts'), (mounts['/dev/pts']['type'],
                                                mounts['/dev/pts']['source']))
        # The node's /sys with its cgroup2, debugfs and tracefs, writable.
        self.assertEqual(('bind', '/sys'), (mounts['/sys']['type'],
                                            mounts['/sys']['source']))
        self.assertIn('rbind', mounts['/sys']['options'])
        self.assertIn('rw', mounts['/sys']['options'])
        self.assertEqual('mqueue', mounts['/dev/mqueue']['type'])
        # Docker's /dev/shm options, without its 64 MiB size.
        self.assertEqual(['nosuid', 'noexec', 'nodev', 'mode=1777'],
                         mounts['/dev/shm']['options'])

    def test_hugetlbfs_when_hugepages_are_set(self):
        mounts = {m['destination']: m
                  for m in self.build(hugepages=True)['mounts']}
        self.assertEqual('hugetlbfs', mounts['/dev/hugepages']['type'])
        self.assertNotIn('/dev/hugepages', {
            m['destination'] for m in self.build()['mounts']})

    def test_cpus(self):
        spec = self.build(cpus={3, 1, 2})
        self.assertEqual({'cpus': '1,2,3'}, spec['linux']['resources']['cpu'])
        self.assertNotIn('cpu', self.build()['linux']['resources'])

    def test_annotations(self):
        spec = self.build(annotations={'org.example.mode': 'job'})
        self.assertEqual({'org.example.mode': 'job'}, spec['annotations'])


class ConfinedSpecTest(Base):
    def test_own_hostname(self):
        spec = self.build(privileged=False, hostname='node-3')
        self.assertEqual('bmc-workload', spec['hostname'])
        self.assertIn('HOSTNAME=bmc-workload', spec['process']['env'])
        self.assertEqual('bmc-workload', oci_spec.hostname_of(False, 'n'))
        self.assertEqual('n', oci_spec.hostname_of(True, 'n'))

    def test_docker_defaults(self):
        spec = self.build(privileged=False)
        caps = spec['process']['capabilities']['bounding']
        # Docker's set, but what leaves a chroot or forges packets on the
        # provisioning network.
        self.assertEqual(sorted(set(oci_spec.DEFAULT_CAPABILITIES)
                                - {'CAP_SYS_CHROOT', 'CAP_NET_RAW'}),
                         sorted(caps))
        self.assertNotIn('CAP_SYS_ADMIN', caps)
        linux = spec['linux']
        self.assertEqual(['pid', 'mount', 'ipc', 'uts', 'cgroup'],
                         [n['type'] for n in linux['namespaces']])
        self.assertNotIn('network', [n['type'] for n in linux['namespaces']])
        self.assertEqual({'allow': False, 'access': 'rwm'},
                         linux['resources']['devices'][0])
        self.assertIn('/proc/kcore', linux['maskedPaths'])
        self.assertIn('/proc/sys', linux['readonlyPaths'])
        self.assertEqual('bmc-workload', spec['hostname'])

    def test_seccomp_refuses_what_reaches_beyond_the_container(self):
        seccomp = self.build(privileged=False)['linux']['seccomp']
        self.assertEqual('SCMP_ACT_ALLOW', seccomp['defaultAction'])
        denied = {n for rule in seccomp['syscalls'] if 'args' not in rule
                  and rule['errnoRet'] == oci_spec.EPERM
                  for n in rule['names']}
        for name in ('mount', 'umount2', 'pivot_root', 'chroot', 'unshare',
                     'setns', 'open_by_handle_at', 'init_module',
                     'finit_module', 'kexec_load', 'bpf', 'keyctl',
                     'perf_event_open', 'userfaultfd', 'reboot'):
            self.assertIn(name, denied)
        clone = [r for r in seccomp['syscalls'] if r['names'] == ['clone']]
        self.assertEqual([{'index': 0, 'value': 0x10000000,
                           'valueTwo': 0x10000000,
                           'op': 'SCMP_CMP_MASKED_EQ'}], clone[0]['args'])
        clone3 = [r for r in seccomp['syscalls'] if r['names'] == ['clone3']]
        self.assertEqual(oci_spec.ENOSYS, clone3[0]['errnoRet'])
        self.assertEqual(['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86',
                          'SCMP_ARCH_X32'],
                         oci_spec.seccomp('x86_64')['architectures'])
        # A privileged container is the machine: no filter.
        self.assertNotIn('seccomp', self.build()['linux'])

    def test_read_only_sys_and_own_dev(self):
        mounts = {m['destination']: m
                  for m in self.build(privileged=False)['mounts']}
        self.assertIn('ro', mounts['/sys']['options'])
        self.assertNotIn('rbind', mounts['/sys']['options'])
        self.assertIn('ro', mounts['/sys/fs/cgroup']['options'])
        self.assertEqual('cgroup', mounts['/sys/fs/cgroup']['type'])
        self.assertEqual('tmpfs', mounts['/dev']['type'])
        self.assertIn('newinstance', mounts['/dev/pts']['options'])


class UserTest(Base):
    def test_default_is_root(self):
        self.assertEqual((0, 0, [], '/root'),
                         container_root.resolve_user(self.root, None))

    def test_name_with_its_groups(self):
        self.assertEqual((999, 998, [4, 44], '/data'),
                         container_root.resolve_user(self.root, 'redis'))

    def test_name_and_group(self):
        # An explicit group: that group only, no supplementary groups
        # (runc, Docker).
        self.assertEqual((999, 4, [], '/data'),
                         container_root.resolve_user(self.root, 'redis:adm'))
        self.assertEqual((999, 998, [], '/data'),
                         container_root.resolve_user(self.root, 'redis:998'))

    def test_numeric(self):
        self.assertEqual((1234, 5678, [], '/'),
                         container_root.resolve_user(self.root, '1234:5678'))
        self.assertEqual((999, 998, [4, 44], '/data'),
                         container_root.resolve_user(self.root, 999))

    def test_primary_group_listed_as_a_member_stays(self):
        # As runc: an image made with "adduser -G" lists the user in its
        # own primary group.
        with open(os.path.join(self.root, 'etc', 'group'), 'a') as f:
            f.write('app:x:1000:app\nvideo2:x:45:app\n')
        with open(os.path.join(self.root, 'etc', 'passwd'), 'a') as f:
            f.write('app:x:1000:1000::/home/app:/bin/sh\n')
        self.assertEqual((1000, 1000, [1000, 45], '/home/app'),
                         container_root.resolve_user(self.root, 'app'))

    def test_numeric_without_passwd_entry_gets_gid_0(self):
        self.assertEqual((1234, 0, [], '/'),
                         container_root.resolve_user(self.root, '1234'))

    def test_unknown(self):
        with self.assertRaisesRegex(oci_spec.SpecError,
                                    "user 'nobody' is not in the image"):
            container_root.resolve_user(self.root, 'nobody')
        with self.assertRaisesRegex(oci_spec.SpecError,
                                    "group 'wheel' is not in the image"):
            container_root.resolve_user(self.root, 'redis:wheel')
        with self.assertRaisesRegex(oci_spec.SpecError, 'nobody'):
            self.build(user='nobody')

    def test_etc_symlink_out_of_the_root_stays_inside(self):
        # /etc -> /elsewhere/etc must read <root>/elsewhere/etc, never the
        # node's /etc (which knows users the image does not).
        os.rename(os.path.join(self.root, 'etc'),
                  os.path.join(self.root, 'real-etc'))
        os.symlink('/real-etc', os.path.join(self.root, 'etc'))
        self.assertEqual((999, 998, [4, 44], '/data'),
                         container_root.resolve_user(self.root, 'redis'))
        os.unlink(os.path.join(self.root, 'etc'))
        os.symlink('/etc', os.path.join(self.root, 'etc'))  # itself
        with self.assertRaisesRegex(oci_spec.SpecError, 'symbolic links'):
            container_root.resolve_user(self.root, 'root')


class ResolveInRootTest(Base):
    def test_absolute_and_dotdot_links_stay_inside(self):
        os.symlink('/etc', os.path.join(self.root, 'proc'))
        os.symlink('../../../../var/run', os.path.join(self.root, 'run'))
        self.assertEqual(os.path.join(self.root, 'etc'),
                         container_root.resolve_in_root(self.root, '/proc'))
        self.assertEqual(os.path.join(self.root, 'var', 'run'),
                         container_root.resolve_in_root(self.root, '/run'))
        self.assertEqual(os.path.join(self.root, 'etc', 'x'),
                         container_root.resolve_in_root(self.root, '/proc/x'))

    def test_loop(self):
        os.symlink('/b', os.path.join(self.root, 'a'))
        os.symlink('/a', os.path.join(self.root, 'b'))
        with self.assertRaisesRegex(oci_spec.SpecError, 'symbolic links'):
            container_root.resolve_in_root(self.root, '/a/x')

    def test_workdir_through_a_link_out_stays_inside(self):
        os.symlink('/../../../tmp', os.path.join(self.root, 'w'))
        with self.assertRaisesRegex(oci_spec.SpecError,
                                    'workdir /w is not a directory'):
            self.build(workdir='/w')
        # Created as runc does, where the link leads inside the root.
        container_root.make_workdir(self.root, '/w')
        self.assertTrue(os.path.isdir(os.path.join(self.root, 'tmp')))
        self.assertEqual('/w', self.build(workdir='/w')['process']['cwd'])

    def test_missing_workdir_is_made(self):
        container_root.make_workdir(self.root, '/srv/app/work')
        path = os.path.join(self.root, 'srv/app/work')
        self.assertTrue(os.path.isdir(path))
        self.assertEqual(0o755, os.stat(path).st_mode & 0o777)
        container_root.make_workdir(self.root, '/srv/app/work')   # again: fine

    def test_workdir_under_a_file_is_refused(self):
        with open(os.path.join(self.root, 'f'), 'w') as f:
            f.write('x')
        with self.assertRaisesRegex(oci_spec.SpecError,
                                    'cannot create the workdir /f/w'):
            container_root.make_workdir(self.root, '/f/w')


class MountPointsTest(Base):
    def test_links_resolved_inside_the_root(self):
        # The image's /run points out of its root (as the agent's state
        # directory would be if followed on the node).
        os.symlink('/../../../../var/run', os.path.join(self.root, 'run'))
        extra = {'destination': '/run/bmc/config-drive', 'type': 'bind',
                 'source': '/x', 'options': ['bind', 'ro']}
        mounts = container_root.resolve_mount_points(
            self.root, self.build(mounts=[extra])['mounts'])
        destinations = [m['destination'] for m in mounts]
        self.assertNotIn('/run/bmc/config-drive', destinations)
        drive = [m for m in mounts
                 if m['destination'] == '/var/run/bmc/config-drive']
        self.assertEqual('/x', drive[0]['source'])
        # Every parent before its child.
        self.assertLess(destinations.index('/dev'),
                        destinations.index('/dev/shm'))
        self.assertLess(destinations.index('/proc'),
                        destinations.index('/var/run/bmc/config-drive'))
        self.assertFalse(os.path.exists(os.path.join(self.root, 'var')))

    def test_plain_destinations_unchanged(self):
        mounts = self.build()['mounts']
        self.assertEqual(
            sorted(m['destination'] for m in mounts),
            sorted(m['destination'] for m in
                   container_root.resolve_mount_points(self.root, mounts)))

    def test_a_link_to_the_root_is_refused(self):
        os.symlink('/', os.path.join(self.root, 'proc'))
        with self.assertRaisesRegex(oci_spec.SpecError,
                                    "image's /proc leads to its root"):
            container_root.resolve_mount_points(self.root,
                                                self.build()['mounts'])


class NodeFactsTest(unittest.TestCase):
    def test_cap_last_cap(self):
        with tempfile.TemporaryDirectory() as proc:
            os.makedirs(os.path.join(proc, 'sys/kernel'))
            with open(os.path.join(proc, 'sys/kernel/cap_last_cap'),
                      'w') as f:
                f.write('37\n')
            self.assertEqual(37, oci_spec.cap_last_cap(proc))
        self.assertEqual(40, oci_spec.cap_last_cap('/nonexistent'))

    def test_hugepages_configured(self):
        with tempfile.TemporaryDirectory() as sys_dir:
            base = os.path.join(sys_dir, 'kernel/mm/hugepages')
            for size, count in (('hugepages-2048kB', 0),
                                ('hugepages-1048576kB', 0)):
                os.makedirs(os.path.join(base, size))
                with open(os.path.join(base, size, 'nr_hugepages'),
                          'w') as f:
                    f.write('%d\n' % count)
            self.assertFalse(oci_spec.hugepages_configured(sys_dir))
            with open(os.path.join(base, 'hugepages-2048kB',
                                   'nr_hugepages'), 'w') as f:
                f.write('64\n')
            self.assertTrue(oci_spec.hugepages_configured(sys_dir))
        self.assertFalse(oci_spec.hugepages_configured('/nonexistent'))
