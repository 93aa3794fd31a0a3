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

import hashlib
import http.server
import os
import tempfile
import threading
import unittest
from unittest import mock

from ipa_hardware_manager import rootfs
from ipa_hardware_manager import rootfs_download
from bmc_common import protocol

PAYLOAD = b'not really an erofs image\n' * 1000
DIGEST = 'sha256:' + hashlib.sha256(PAYLOAD).hexdigest()
VERITY = {'root_hash': 'a' * 64, 'url': 'http://x/a.verity', 'size': 8192}


class _Handler(http.server.BaseHTTPRequestHandler):
    #: The Range header of each request to /flaky*.img, in order.
    ranges = []

    def _flaky(self, honour_range):
        """The first request drops after half the payload (a server
        restart midway); later ones serve the rest when asked."""
        asked = self.headers.get('Range')
        _Handler.ranges.append(asked)
        half = len(PAYLOAD) // 2
        if len(_Handler.ranges) == 1:
            self.send_response(200)
            self.send_header('Content-Length', str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD[:half])
            self.close_connection = True
            return
        if honour_range and asked:
            start = int(asked.split('=')[1].rstrip('-'))
            self.send_response(206)
            self.send_header('Content-Range', 'bytes %d-%d/%d' % (
                start, len(PAYLOAD) - 1, len(PAYLOAD)))
            self.send_header('Content-Length', str(len(PAYLOAD) - start))
            self.end_headers()
            self.wfile.write(PAYLOAD[start:])
            return
        self.send_response(200)
        self.send_header('Content-Length', str(len(PAYLOAD)))
        self.end_headers()
        self.wfile.write(PAYLOAD)

    def do_GET(self):
        if self.path in ('/flaky.img', '/flaky-norange.img'):
            self._flaky(honour_range=self.path == '/flaky.img')
            return
        if self.path == '/truncated.img':
            # Promises more than it sends, then closes: a dropped link.
            self.send_response(200)
            self.send_header('Content-Length', str(len(PAYLOAD) * 2))
            self.end_headers()
            self.wfile.write(PAYLOAD)
            self.close_connection = True
            return
        if self.path != '/rootfs.img':
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header('Content-Length', str(len(PAYLOAD)))
        self.end_headers()
        self.wfile.write(PAYLOAD)

    def log_message(self, *args):
        pass


class HttpTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                     _Handler)
        cls.url = 'http://127.0.0.1:%d/rootfs.img' % cls.server.server_port
        cls.thread = threading.Thread(target=cls.server.serve_forever,
                                      daemon=True)
        cls.thread.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()


class ValidateTest(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(DIGEST.split(':')[1], rootfs.validate(
            'http://x/a', DIGEST, 'erofs', '12', 'ramfs'))

    def _bad(self, message, **kw):
        args = {'url': 'http://x/a', 'digest': DIGEST, 'fmt': 'erofs',
                'size': None, 'rootfs': protocol.ROOTFS_RAMFS}
        args.update(kw)
        with self.assertRaisesRegex(rootfs.StagingError, message):
            rootfs.validate(**args)

    def test_unknown_format(self):
        self._bad('unknown artifact format .qcow2', fmt='qcow2')

    def test_unknown_mode(self):
        self._bad('unknown rootfs mode', rootfs='floppy')

    @mock.patch.object(protocol, 'ROOTFS_MODES_SUPPORTED', ('ramfs',))
    def test_unsupported_mode(self):
        self._bad("rootfs mode 'stream' is not supported", rootfs='stream')

    def test_stream(self):
        self.assertEqual(DIGEST.split(':')[1], rootfs.validate(
            'http://x/a', DIGEST, 'erofs', 4096, 'stream', verity=VERITY,
            stream={'cache_max': None, 'rate': 1000}))

    def test_stream_needs_verity_a_size_and_an_image(self):
        for kw in ({'size': 4096}, {'verity': VERITY},
                   {'fmt': 'tar', 'size': 4096, 'verity': VERITY}):
            self._bad('stream needs a erofs or squashfs artifact, its size '
                      'and its dm-verity tree', rootfs='stream', **kw)

    def test_stream_bad_cache_or_rate(self):
        ok = {'rootfs': 'stream', 'size': 4096, 'verity': VERITY}
        self._bad('cache_max must be a number of bytes',
                  stream={'cache_max': '1G'}, **ok)
        self._bad('at least 1 MiB', stream={'cache_max': 4096}, **ok)
        self._bad('rate must be positive', stream={'rate': 0}, **ok)
        self._bad('stream must be an object', stream='fast', **ok)

    def test_nfs(self):
        nfs = {'server': '10.0.2.100', 'port': 12049, 'export': '/bmc/k',
               'options': 'vers=4.1,hard'}
        checked = rootfs.validate(None, DIGEST, 'tree', None, 'nfs', nfs)
        self.assertEqual(['vers=4.1', 'hard'], checked['options'])
        self.assertEqual(12049, checked['port'])

    def test_nfs_needs_a_tree_and_its_arguments(self):
        self._bad("nfs mounts a 'tree', not a 'erofs'", rootfs='nfs')
        self._bad('nfs must be an object', rootfs='nfs', fmt='tree')

    def test_bad_digest(self):
        self._bad('digest must be', digest='md5:abc')
        self._bad('digest must be', digest=None)

    def test_bad_url(self):
        self._bad('must be http', url='ftp://x/a')

    def test_bad_size(self):
        self._bad('size must be an integer', size='big')
        self._bad('must not be negative', size=-1)


@mock.patch.object(rootfs_download, 'RETRY_DELAY', 0)
class DownloadTest(HttpTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dest = os.path.join(self.tmp.name, 'artifact')
        _Handler.ranges = []

    def tearDown(self):
        self.tmp.cleanup()

    def test_ok(self):
        n = rootfs_download.download(self.url, self.dest, DIGEST.split(':')[1],
                            len(PAYLOAD))
        self.assertEqual(len(PAYLOAD), n)
        with open(self.dest, 'rb') as f:
            self.assertEqual(PAYLOAD, f.read())

    @mock.patch.object(rootfs_download, 'QUEUE_CHUNKS', 2)
    @mock.patch.object(rootfs_download, 'CHUNK', 1000)
    def test_many_chunks_through_a_small_queue(self):
        timings = {}
        n = rootfs_download.download(self.url, self.dest, DIGEST.split(':')[1],
                            len(PAYLOAD), timings=timings)
        self.assertEqual(len(PAYLOAD), n)
        with open(self.dest, 'rb') as f:
            self.assertEqual(PAYLOAD, f.read())
        self.assertEqual({'hash', 'write'}, set(timings))
        self.assertTrue(all(v >= 0 for v in timings.values()))
        self.assertFalse([t for t in threading.enumerate()
                          if t.name == 'bmc-rootfs-reader'])

    def test_only_http_urls(self):
        """A file: URL would read the node's own disk into the root."""
        for url in ('file:///etc/shadow', 'ftp://h/x'):
            with self.assertRaisesRegex(rootfs_download.DownloadError,
                                        'not an http'):
                rootfs_download.download(url, self.dest,
                                         DIGEST.split(':')[1])
            with self.assertRaisesRegex(rootfs_download.DownloadError,
                                        'not an http'):
                rootfs_download.measure_raw_transfer(url)

    @mock.patch.object(rootfs_download, 'CHUNK', 1000)
    def test_link_dropped_midway(self):
        url = self.url.replace('/rootfs.img', '/truncated.img')
        with self.assertRaisesRegex(rootfs_download.DownloadError,
                                    'download of .*truncated.img failed '
                                    'after %d bytes' % len(PAYLOAD)):
            rootfs_download.download(url, self.dest, DIGEST.split(':')[1])
        self.assertFalse([t for t in threading.enumerate()
                          if t.name == 'bmc-rootfs-reader'])

    @mock.patch.object(rootfs_download, 'CHUNK', 1000)
    def test_server_restart_midway_resumes_with_a_range(self):
        url = self.url.replace('/rootfs.img', '/flaky.img')
        n = rootfs_download.download(url, self.dest, DIGEST.split(':')[1],
                            len(PAYLOAD))
        self.assertEqual(len(PAYLOAD), n)
        with open(self.dest, 'rb') as f:
            self.assertEqual(PAYLOAD, f.read())
        # Only the missing part was asked for again.
        self.assertEqual(2, len(_Handler.ranges))
        self.assertIsNone(_Handler.ranges[0])
        self.assertRegex(_Handler.ranges[1], r'^bytes=\d+-$')
        self.assertGreater(int(_Handler.ranges[1][6:-1]), 0)

    @mock.patch.object(rootfs_download, 'CHUNK', 1000)
    def test_server_without_ranges_starts_again(self):
        url = self.url.replace('/rootfs.img', '/flaky-norange.img')
        n = rootfs_download.download(url, self.dest, DIGEST.split(':')[1],
                            len(PAYLOAD))
        self.assertEqual(len(PAYLOAD), n)
        with open(self.dest, 'rb') as f:
            self.assertEqual(PAYLOAD, f.read())

    def test_refused_connection_gives_up_after_the_attempts(self):
        with mock.patch.object(rootfs_download, 'DOWNLOAD_ATTEMPTS', 3):
            with self.assertRaisesRegex(rootfs_download.DownloadError,
                                        'earlier attempts: .*refused'):
                rootfs_download.download('http://127.0.0.1:9/x.img', self.dest,
                                '0' * 64)

    @mock.patch.object(rootfs_download, 'QUEUE_CHUNKS', 1)
    @mock.patch.object(rootfs_download, 'CHUNK', 100)
    def test_write_error_stops_the_reader(self):
        with mock.patch('builtins.open', side_effect=OSError(28, 'No '
                                                             'space left')):
            with self.assertRaisesRegex(rootfs_download.DownloadError,
                                        'No space left'):
                rootfs_download.download(self.url, self.dest,
                                         DIGEST.split(':')[1])
        self.assertFalse([t for t in threading.enumerate()
                          if t.name == 'bmc-rootfs-reader'])

    def test_digest_mismatch(self):
        with self.assertRaisesRegex(rootfs_download.DownloadError,
                                    'expected sha256:' + '0' * 64):
            rootfs_download.download(self.url, self.dest, '0' * 64)

    def test_size_mismatch(self):
        with self.assertRaisesRegex(rootfs_download.DownloadError,
                                    'expected 5'):
            rootfs_download.download(self.url, self.dest,
                                     DIGEST.split(':')[1], 5)

    def test_http_error(self):
        with self.assertRaisesRegex(rootfs_download.DownloadError, '404'):
            rootfs_download.download(self.url + '.missing', self.dest,
                                     '0' * 64)


@mock.patch.object(rootfs, '_ensure_filesystem', autospec=True)
@mock.patch.object(rootfs, '_run', autospec=True)
class StageTest(HttpTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.base = os.path.join(self.tmp.name, 'bmc')
        os.makedirs(os.path.join(self.tmp.name, 'etc'))

    def tearDown(self):
        self.tmp.cleanup()

    def _mount_calls(self, mock_run):
        return [c.args for c in mock_run.call_args_list
                if c.args[0] == 'mount']

    def test_erofs(self, mock_run, mock_fs):
        staging = rootfs.Staging(self.base)
        result = staging.stage(self.url, DIGEST, 'erofs', len(PAYLOAD))
        root = os.path.join(self.base, 'root')
        self.assertEqual(root, result['root'])
        self.assertEqual(len(PAYLOAD), result['bytes'])
        self.assertEqual(['download', 'hash', 'mount', 'write'],
                         sorted(result['timings']))
        self.assertEqual([protocol.STAGE_ROOTFS_STAGED],
                         [s['name'] for s in result['stages']])
        mock_fs.assert_has_calls([mock.call('erofs'),
                                  mock.call('overlay')])
        mounts = self._mount_calls(mock_run)
        self.assertEqual(('mount', '-t', 'tmpfs'), mounts[0][:3])
        self.assertEqual(self.base, mounts[0][-1])
        self.assertEqual(('mount', '-t', 'erofs', '-o', 'ro,loop',
                          os.path.join(self.base, 'artifact.erofs'),
                          os.path.join(self.base, 'lower')), mounts[1])
        self.assertEqual('overlay', mounts[2][2])
        self.assertIn('upperdir=%s/upper' % self.base, mounts[2][4])
        # Nothing of the agent's is bound into the root: crun mounts the
        # container's /proc, /sys, /dev and /run, inside the root.
        self.assertEqual(3, len(mounts))
        # The record lets a later step find the root and undo it.
        record = rootfs.load(self.base)
        self.assertEqual(root, record['root'])
        self.assertEqual([self.base], record['outer'])
        self.assertEqual(2, len(record["mounts"]))

    def test_resolv_conf_stays_inside_the_root(self, mock_run, mock_fs):
        """An image whose /etc is an absolute symlink to an agent
        directory: resolv.conf goes to the root's own /etc of that name,
        never to the agent's."""
        outside = os.path.join(self.tmp.name, 'agent-state')
        os.makedirs(outside)
        staging = rootfs.Staging(self.base)
        os.makedirs(os.path.join(staging.root, outside.lstrip('/')))
        os.symlink(outside, os.path.join(staging.root, 'etc'))
        staging._copy_resolv_conf()
        self.assertEqual([], os.listdir(outside))
        inside = os.path.join(staging.root, outside.lstrip('/'),
                              'resolv.conf')
        self.assertEqual(os.path.isfile('/etc/resolv.conf'),
                         os.path.isfile(inside))

    def test_squashfs(self, mock_run, mock_fs):
        rootfs.Staging(self.base).stage(self.url, DIGEST, 'squashfs')
        self.assertEqual('squashfs', self._mount_calls(mock_run)[1][2])

    def test_tar(self, mock_run, mock_fs):
        rootfs.Staging(self.base).stage(self.url, DIGEST, 'tar')
        mock_fs.assert_not_called()
        tar = [c.args for c in mock_run.call_args_list
               if c.args[0] == 'tar']
        self.assertEqual(1, len(tar))
        self.assertIn(os.path.join(self.base, 'root'), tar[0])
        # the tarball is removed once unpacked: it would double the RAM
        self.assertFalse(os.path.exists(os.path.join(self.base,
                                                     'artifact.tar')))
        mounts = self._mount_calls(mock_run)
        self.assertEqual(1, len(mounts))

    def test_failure_unmounts_everything(self, mock_run, mock_fs):
        def run(*cmd):
            if cmd[0] == 'mount' and cmd[1:3] == ('-t', 'overlay'):
                raise rootfs.StagingError('boom')
            return ''
        mock_run.side_effect = run
        staging = rootfs.Staging(self.base)
        with self.assertRaisesRegex(rootfs.StagingError, 'boom'):
            staging.stage(self.url, DIGEST, 'erofs')
        umounts = [c.args[-1] for c in mock_run.call_args_list
                   if c.args[0] == 'umount']
        self.assertEqual([os.path.join(self.base, 'lower'), self.base],
                         umounts)
        self.assertEqual([], staging.mounts)

    def test_bad_digest_unmounts_tmpfs(self, mock_run, mock_fs):
        with self.assertRaisesRegex(rootfs.StagingError, 'has digest'):
            rootfs.Staging(self.base).stage(self.url, 'sha256:' + 'a' * 64,
                                            'erofs')
        umounts = [c.args[-1] for c in mock_run.call_args_list
                   if c.args[0] == 'umount']
        self.assertEqual([self.base], umounts)

    def test_refuses_before_touching_anything(self, mock_run, mock_fs):
        with self.assertRaisesRegex(rootfs.StagingError, 'unknown artifact'):
            rootfs.Staging(self.base).stage(self.url, DIGEST, 'zip')
        mock_run.assert_not_called()

    def test_teardown_from_record(self, mock_run, mock_fs):
        rootfs.Staging(self.base).stage(self.url, DIGEST, 'erofs')
        mock_run.reset_mock()
        self.assertTrue(rootfs.teardown(self.base))
        umounts = [c.args[-1] for c in mock_run.call_args_list]
        self.assertEqual(3, len(umounts))
        self.assertEqual(self.base, umounts[-1])

    def test_lazy_unmount_fallback(self, mock_run, mock_fs):
        staging = rootfs.Staging(self.base)
        staging.mounts = ['/a']

        def run(*cmd):
            if cmd == ('umount', '/a'):
                raise rootfs.StagingError('busy')
            return ''
        mock_run.side_effect = run
        staging.teardown()
        mock_run.assert_called_with('umount', '-l', '/a')


@mock.patch.object(rootfs, '_ensure_target', autospec=True)
@mock.patch.object(rootfs.rootfs_verity, 'close', autospec=True)
@mock.patch.object(rootfs.rootfs_verity, 'open_device', autospec=True,
                   return_value='/dev/mapper/bmc-rootfs')
@mock.patch.object(rootfs, '_ensure_filesystem', autospec=True)
@mock.patch.object(rootfs, '_run', autospec=True, return_value='')
class StageVerityTest(HttpTestCase):
    ROOT_HASH = 'c' * 64

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.base = os.path.join(self.tmp.name, 'bmc')
        self.verity = {'root_hash': self.ROOT_HASH, 'url': self.url,
                       'size': len(PAYLOAD)}

    def tearDown(self):
        self.tmp.cleanup()

    def test_blocks_checked_when_read_not_hashed_first(
            self, mock_run, mock_fs, mock_open, mock_close, mock_target):
        # A digest that does not match: not checked, dm-verity is.
        result = rootfs.Staging(self.base).stage(
            self.url, 'sha256:' + 'a' * 64, 'erofs', len(PAYLOAD),
            verity=self.verity)
        artifact = os.path.join(self.base, 'artifact.erofs')
        mock_open.assert_called_once_with(artifact, artifact + '.verity',
                                          self.ROOT_HASH)
        mock_target.assert_called_once_with('verity', 'dm_verity')
        mounts = [c.args for c in mock_run.call_args_list
                  if c.args[0] == 'mount']
        self.assertEqual(('mount', '-t', 'erofs', '-o', 'ro',
                          '/dev/mapper/bmc-rootfs',
                          os.path.join(self.base, 'lower')), mounts[1])
        self.assertEqual('dm-verity', result['verify'])
        self.assertEqual(0, result['timings']['hash'])
        self.assertEqual(2 * len(PAYLOAD), result['bytes'])
        # Teardown closes the device once everything is unmounted.
        mock_run.reset_mock()
        self.assertTrue(rootfs.teardown(self.base))
        mock_close.assert_called_once_with('bmc-rootfs')
        self.assertEqual(self.base, mock_run.call_args_list[-1].args[-1])

    def test_tree_refused_undoes_everything(
            self, mock_run, mock_fs, mock_open, mock_close, mock_target):
        mock_open.side_effect = rootfs.rootfs_verity.VerityError(
            'dm-verity refused the rootfs artifact')
        with self.assertRaisesRegex(rootfs.StagingError, 'refused'):
            rootfs.Staging(self.base).stage(self.url, DIGEST, 'erofs',
                                            verity=self.verity)
        umounts = [c.args[-1] for c in mock_run.call_args_list
                   if c.args[0] == 'umount']
        self.assertEqual([self.base], umounts)
        mock_close.assert_not_called()

    def test_bad_arguments(self, mock_run, mock_fs, mock_open, mock_close,
                           mock_target):
        for bad, message in (
                (dict(self.verity, root_hash='abc'), 'root_hash must be'),
                (dict(self.verity, url='file:///x'), 'url must be http'),
                (dict(self.verity, size='x'), 'size must be an integer'),
                ('nope', 'must be an object')):
            with self.assertRaisesRegex(rootfs.StagingError, message):
                rootfs.Staging(self.base).stage(self.url, DIGEST, 'erofs',
                                                verity=bad)
        with self.assertRaisesRegex(rootfs.StagingError,
                                    'tar artifact is not mounted'):
            rootfs.Staging(self.base).stage(self.url, DIGEST, 'tar',
                                            verity=self.verity)
        mock_run.assert_not_called()


@mock.patch.object(rootfs, '_ensure_filesystem', autospec=True)
@mock.patch.object(rootfs, '_run', autospec=True, return_value='')
class StageNfsTest(unittest.TestCase):
    NFS = {'server': '10.0.2.100', 'port': 12049,
           'export': '/bmc/sha256-abc-tree-none-v1', 'options': 'vers=4.1'}

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.base = os.path.join(self.tmp.name, 'bmc')

    def tearDown(self):
        self.tmp.cleanup()

    @mock.patch.object(rootfs.rootfs_nfs, 'mount', autospec=True,
                       return_value=0.25)
    def test_mounts_export_under_an_overlay(self, mock_nfs, mock_run,
                                            mock_fs):
        result = rootfs.Staging(self.base).stage(None, DIGEST, 'tree',
                                                 rootfs='nfs', nfs=self.NFS)
        lower = os.path.join(self.base, 'lower')
        checked = mock_nfs.call_args.args[0]
        self.assertEqual('/bmc/sha256-abc-tree-none-v1', checked['export'])
        self.assertEqual(lower, mock_nfs.call_args.args[1])
        mock_fs.assert_has_calls([mock.call('nfs4', module='nfsv4'),
                                  mock.call('overlay')])
        mounts = [c.args for c in mock_run.call_args_list
                  if c.args[0] == 'mount']
        self.assertEqual(('mount', '-t', 'tmpfs'), mounts[0][:3])
        self.assertEqual('overlay', mounts[1][2])
        self.assertIn('lowerdir=%s,' % lower, mounts[1][4])
        self.assertEqual(0, result['bytes'])
        self.assertEqual('nfs', result['rootfs'])
        self.assertEqual({'export': '10.0.2.100:/bmc/sha256-abc-tree-none-v1',
                          'mount': 0.25}, result['nfs'])
        # The NFS mount is undone with the rest, after the overlay.
        record = rootfs.load(self.base)
        self.assertEqual([self.base], record['outer'])
        self.assertEqual([lower], record['mounts'][:1])

    @mock.patch.object(rootfs.rootfs_nfs, 'mount', autospec=True,
                       side_effect=rootfs.rootfs_nfs.NFSError('no answer'))
    def test_mount_failure_undoes_the_tmpfs(self, mock_nfs, mock_run,
                                            mock_fs):
        staging = rootfs.Staging(self.base)
        with self.assertRaisesRegex(rootfs.StagingError, 'no answer'):
            staging.stage(None, DIGEST, 'tree', rootfs='nfs', nfs=self.NFS)
        umounts = [c.args[-1] for c in mock_run.call_args_list
                   if c.args[0] == 'umount']
        self.assertEqual([self.base], umounts)


class EnsureFilesystemTest(unittest.TestCase):
    @mock.patch.object(rootfs, '_run', autospec=True)
    def test_loads_missing_module(self, mock_run):
        with mock.patch('builtins.open',
                        mock.mock_open(read_data='nodev\tproc\n\text4\n')):
            rootfs._ensure_filesystem('erofs')
        mock_run.assert_called_once_with('modprobe', 'erofs')

    @mock.patch.object(rootfs, '_run', autospec=True)
    def test_known(self, mock_run):
        with mock.patch('builtins.open',
                        mock.mock_open(read_data='nodev\toverlay\n')):
            rootfs._ensure_filesystem('overlay')
        mock_run.assert_not_called()

    @mock.patch.object(rootfs, '_run', autospec=True)
    def test_module_missing(self, mock_run):
        mock_run.side_effect = rootfs.StagingError('modprobe failed')
        with mock.patch('builtins.open',
                        mock.mock_open(read_data='nodev\tproc\n')), \
                self.assertRaisesRegex(rootfs.StagingError,
                                       'no squashfs support'):
            rootfs._ensure_filesystem('squashfs')


class RunTest(unittest.TestCase):
    def test_error_carries_stderr(self):
        with self.assertRaisesRegex(rootfs.StagingError, 'exit 3.*oops'):
            rootfs._run('sh', '-c', 'echo oops >&2; exit 3')

    def test_missing_binary(self):
        with self.assertRaisesRegex(rootfs.StagingError, 'cannot run'):
            rootfs._run('/nonexistent/binary')


def _attach(stream):
    stream.device = '/dev/nbd3'
    return stream.device


@mock.patch.object(rootfs.rootfs_stream, 'cached_bytes', autospec=True,
                   return_value=65536)
@mock.patch.object(rootfs.rootfs_stream, 'start_hydrator', autospec=True)
@mock.patch.object(rootfs.rootfs_stream.Stream, 'stop', autospec=True)
@mock.patch.object(rootfs.rootfs_stream.Stream, 'start', autospec=True,
                   side_effect=_attach)
@mock.patch.object(rootfs, '_ensure_nbd', autospec=True)
@mock.patch.object(rootfs, '_ensure_target', autospec=True)
@mock.patch.object(rootfs.rootfs_verity, 'close', autospec=True)
@mock.patch.object(rootfs.rootfs_verity, 'open_device', autospec=True,
                   return_value='/dev/mapper/bmc-rootfs')
@mock.patch.object(rootfs, '_ensure_filesystem', autospec=True)
@mock.patch.object(rootfs, '_run', autospec=True, return_value='')
class StageStreamTest(HttpTestCase):
    ROOT_HASH = 'c' * 64
    SIZE = 400 * 1024 * 1024

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.base = os.path.join(self.tmp.name, 'bmc')
        # The tree is what is downloaded; the artifact is streamed.
        self.verity = {'root_hash': self.ROOT_HASH, 'url': self.url,
                       'size': len(PAYLOAD)}
        self.artifact_url = 'http://127.0.0.1:9/never-downloaded.erofs'

    def tearDown(self):
        self.tmp.cleanup()

    def _stage(self, stream):
        return rootfs.Staging(self.base).stage(
            self.artifact_url, DIGEST, 'erofs', self.SIZE, 'stream',
            verity=self.verity, stream=stream)

    def test_only_the_tree_is_fetched_before_the_mount(
            self, mock_run, mock_fs, mock_open, mock_close, mock_target,
            mock_nbd, mock_start, mock_stop, mock_hydrate, mock_cached):
        result = self._stage({'cache_max': None, 'rate': 1000})
        tree = os.path.join(self.base, 'artifact.erofs.verity')
        mock_open.assert_called_once_with('/dev/nbd3', tree, self.ROOT_HASH)
        mock_nbd.assert_called_once_with()
        self.assertEqual('dm-verity', result['verify'])
        self.assertEqual('stream', result['rootfs'])
        # The tree, and what the mount read on demand.
        self.assertEqual(len(PAYLOAD) + 65536, result['bytes'])
        mounts = [c.args for c in mock_run.call_args_list
                  if c.args[0] == 'mount']
        cache = os.path.join(self.base, 'stream-cache')
        self.assertEqual(('mount', '-t', 'tmpfs', '-o',
                          'mode=0700,size=%d' % (self.SIZE + 64 * 2 ** 20),
                          'bmc-stream-cache', cache), mounts[1])
        self.assertEqual(('mount', '-t', 'erofs', '-o', 'ro',
                          '/dev/mapper/bmc-rootfs',
                          os.path.join(self.base, 'lower')), mounts[2])
        # Below dm-verity: the copy brings blocks in, reads check them.
        mock_hydrate.assert_called_once_with(self.base, '/dev/nbd3',
                                             self.SIZE, 1000)
        self.assertEqual({'device': '/dev/nbd3', 'cache_max': None,
                          'background_rate': 1000, 'fully_local': False},
                         result['stream'])
        # Undone innermost first: the root's mounts, dm-verity, the
        # stream, then the cache and the tmpfs holding it.
        order = mock.Mock()
        order.attach_mock(mock_run, 'run')
        order.attach_mock(mock_close, 'close')
        order.attach_mock(mock_stop, 'stop')
        mock_run.reset_mock()
        self.assertTrue(rootfs.teardown(self.base))
        calls = [(c[0], c.args[-1] if c[0] == 'run' else None)
                 for c in order.mock_calls]
        close_at = calls.index(('close', None))
        stop_at = [c[0] for c in calls].index('stop')
        self.assertEqual(os.path.join(self.base, 'lower'),
                         calls[close_at - 1][1])
        self.assertEqual(close_at + 1, stop_at)
        self.assertEqual([('run', cache), ('run', self.base)],
                         calls[stop_at + 1:])
        self.assertEqual('/dev/nbd3', mock_stop.call_args.args[0].device)

    def test_a_bounded_cache_keeps_the_cold_part_remote(
            self, mock_run, mock_fs, mock_open, mock_close, mock_target,
            mock_nbd, mock_start, mock_stop, mock_hydrate, mock_cached):
        result = self._stage({'cache_max': 100 * 2 ** 20, 'rate': 1000})
        mock_hydrate.assert_not_called()
        # The status still has a stream section, saying why.
        progress = rootfs.rootfs_stream.progress(self.base)
        self.assertIn('bounded to', progress['not_local_reason'])
        self.assertFalse(progress['running'])
        self.assertIn('bounded to 104857600 bytes, less than the image',
                      result['stream']['not_local_reason'])
        mounts = [c.args for c in mock_run.call_args_list
                  if c.args[0] == 'mount']
        self.assertEqual('mode=0700,size=%d' % (164 * 2 ** 20),
                         mounts[1][4])
        self.assertEqual(100 * 2 ** 20,
                         mock_start.call_args.args[0].cache_max)

    def test_stream_failure_undoes_the_cache_and_the_tmpfs(
            self, mock_run, mock_fs, mock_open, mock_close, mock_target,
            mock_nbd, mock_start, mock_stop, mock_hydrate, mock_cached):
        mock_start.side_effect = rootfs.rootfs_stream.StreamError(
            'nbdkit failed (exit 1): curl: HTTP 404')
        with self.assertRaisesRegex(rootfs.StagingError,
                                    'cannot stream .*404'):
            self._stage({'rate': 1000})
        umounts = [c.args[-1] for c in mock_run.call_args_list
                   if c.args[0] == 'umount']
        self.assertEqual([os.path.join(self.base, 'stream-cache'),
                          self.base], umounts)
        mock_open.assert_not_called()
        mock_close.assert_not_called()
        mock_hydrate.assert_not_called()
