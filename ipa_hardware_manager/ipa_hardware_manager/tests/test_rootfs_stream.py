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

import json
import os
import shutil
import stat
import tempfile
import textwrap
import threading
import time
import unittest
from unittest import mock

from ipa_hardware_manager import rootfs_stream

MiB = 1024 * 1024


def _alive(pid):
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


class CheckTest(unittest.TestCase):
    def test_defaults(self):
        self.assertEqual({'cache_max': None, 'rate': 64 * MiB},
                         rootfs_stream.check(None))

    def test_values(self):
        self.assertEqual({'cache_max': 2 * MiB, 'rate': 5},
                         rootfs_stream.check({'cache_max': str(2 * MiB),
                                              'rate': 5}))

    def test_bad(self):
        for bad, message in (({'cache_max': 'lots'}, 'number of bytes'),
                             ({'cache_max': 1000}, 'at least 1 MiB'),
                             ({'rate': -1}, 'must be positive'),
                             ({'rate': 'fast'}, 'bytes a second'),
                             ([1], 'must be an object')):
            with self.assertRaisesRegex(rootfs_stream.StreamError, message):
                rootfs_stream.check(bad)


class CommandTest(unittest.TestCase):
    def test_nbdkit(self):
        cmd = rootfs_stream.nbdkit_command('http://h/a.erofs', '/b')
        # The cache filter sits above retry: a cached block never reaches
        # the network, a failed request is retried below the cache.
        self.assertEqual(['nbdkit', '--readonly', '--unix', '/b/nbd.sock',
                          '--pidfile', '/b/nbdkit.pid', '--filter=cache',
                          '--filter=retry', 'curl', 'url=http://h/a.erofs'],
                         cmd[:10])
        self.assertIn('cache-on-read=true', cmd)
        self.assertIn('cache-min-block-size=1048576', cmd)
        self.assertFalse([a for a in cmd if a.startswith('cache-max')])
        cmd = rootfs_stream.nbdkit_command('http://h/a', '/b', 5 * MiB)
        self.assertEqual('cache-max-size=%d' % (5 * MiB), cmd[-1])

    def test_cache_tmpfs_size(self):
        slack = rootfs_stream.CACHE_SLACK
        self.assertEqual(300 + slack, rootfs_stream.cache_tmpfs_size(300))
        self.assertEqual(100 + slack,
                         rootfs_stream.cache_tmpfs_size(300, 100))


class SysBlockTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.sys = os.path.join(self.tmp.name, 'sys')
        patcher = mock.patch.object(rootfs_stream, 'SYS_BLOCK', self.sys)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.addCleanup(self.tmp.cleanup)

    def device(self, n, held=False, sectors=0):
        path = os.path.join(self.sys, 'nbd%d' % n)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, 'stat'), 'w') as f:
            f.write('   12 0 %d 40 0 0 0 0 0 60 40\n' % sectors)
        if held:
            with open(os.path.join(path, 'pid'), 'w') as f:
                f.write('123\n')


class FreeDeviceTest(SysBlockTestCase):
    def test_first_without_a_client(self):
        self.device(0, held=True)
        self.device(1)
        self.assertEqual('/dev/nbd1', rootfs_stream.free_device())
        self.assertEqual(0, rootfs_stream.sectors_read('/dev/nbd1'))
        self.device(1, sectors=2048)
        self.assertEqual(2048, rootfs_stream.sectors_read('/dev/nbd1'))

    def test_none(self):
        self.device(0, held=True)
        with self.assertRaisesRegex(rootfs_stream.StreamError,
                                    'no free NBD device'):
            rootfs_stream.free_device()


class StreamProcessTest(SysBlockTestCase):
    """Stream with stand-ins for nbdkit and nbd-client that behave as the
    real ones do: nbdkit forks a daemon that keeps its stdout, writes its
    pid file when ready, and ends on SIGTERM."""

    def setUp(self):
        super().setUp()
        self.bin = os.path.join(self.tmp.name, 'bin')
        self.base = os.path.join(self.tmp.name, 'base')
        os.makedirs(self.bin)
        os.makedirs(os.path.join(self.base, rootfs_stream.CACHE_DIR))
        self.calls = os.path.join(self.tmp.name, 'calls')
        self._script('nbdkit', '''
            echo "nbdkit TMPDIR=$TMPDIR $*" >> %(calls)s
            pidfile=$(echo "$@" | sed 's/.*--pidfile \\([^ ]*\\).*/\\1/')
            sleep 300 &
            echo $! > "$pidfile"
            echo "nbdkit: started"
        ''')
        self._script('nbd-client', '''
            echo "nbd-client $*" >> %(calls)s
            [ -n "$NBD_FAIL" ] && [ "$1" != -d ] && {
                echo "nbd-client: cannot open $NBD_FAIL" >&2; exit 1; }
            exit 0
        ''')
        patcher = mock.patch.dict(os.environ, {
            'PATH': self.bin + os.pathsep + os.environ['PATH']})
        patcher.start()
        self.addCleanup(patcher.stop)
        self.device(0, held=True)
        self.device(1)

    def _script(self, name, body):
        path = os.path.join(self.bin, name)
        with open(path, 'w') as f:
            f.write('#!/bin/sh\n' + textwrap.dedent(body)
                    % {'calls': self.calls})
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)

    def _pid(self):
        with open(os.path.join(self.base, rootfs_stream.PID_FILE)) as f:
            return int(f.read())

    def test_start_and_stop(self):
        stream = rootfs_stream.Stream(self.base, 'http://h/a.erofs', 4096)
        # (Ends the daemon if the test fails before it stops it.)
        self.addCleanup(stream.stop)
        self.assertEqual('/dev/nbd1', stream.start())
        # Not held up by the daemon keeping its output open: start()
        # returned while the daemon runs, so holds it still (it lets go
        # of it only by ending, 300 s on).
        pid = self._pid()
        self.assertTrue(_alive(pid), 'start() waited for the daemon to end')
        with open(self.calls) as f:
            calls = f.read().splitlines()
        self.assertIn('TMPDIR=%s/stream-cache' % self.base, calls[0])
        self.assertEqual('nbd-client -unix %s/nbd.sock /dev/nbd1 -readonly '
                         '-block-size 4096 -timeout 120' % self.base,
                         calls[1])
        stream.stop()
        with open(self.calls) as f:
            self.assertEqual('nbd-client -d /dev/nbd1',
                             f.read().splitlines()[-1])
        self.assertFalse(os.path.exists(os.path.join(
            self.base, rootfs_stream.PID_FILE)))
        # The server is gone (reaped by init in real life; here a zombie
        # of this process at most).
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        self.assertRaises(ProcessLookupError, os.kill, pid, 0)

    def test_attach_failure_ends_the_server(self):
        stream = rootfs_stream.Stream(self.base, 'http://h/a.erofs', 4096)
        with mock.patch.dict(os.environ, {'NBD_FAIL': '/dev/nbd1'}):
            with self.assertRaisesRegex(rootfs_stream.StreamError,
                                        'nbd-client -unix failed .*cannot '
                                        'open /dev/nbd1'):
                stream.start()
        self.assertIsNone(stream.device)
        self.assertFalse(os.path.exists(os.path.join(
            self.base, rootfs_stream.PID_FILE)))


class HydratorTest(SysBlockTestCase):
    def setUp(self):
        super().setUp()
        # O_DIRECT needs a file system that supports it (not tmpfs): the
        # temporary directory's, else /var/tmp's (on disk where /tmp is a
        # tmpfs).  Never the user's home.
        self.size = 3 * MiB + 8192
        for parent in (tempfile.gettempdir(), '/var/tmp'):
            self.dir = tempfile.mkdtemp(prefix='bmc-hydrator-test-',
                                        dir=parent)
            self.addCleanup(shutil.rmtree, self.dir)
            self.data = os.path.join(self.dir, 'device')
            with open(self.data, 'wb') as f:
                f.write(os.urandom(self.size))
            try:
                os.close(os.open(self.data, os.O_RDONLY | os.O_DIRECT))
                break
            except OSError:
                pass
        else:
            self.skipTest('no O_DIRECT in %s nor /var/tmp'
                          % tempfile.gettempdir())

    def _progress(self):
        with open(os.path.join(self.dir, rootfs_stream.PROGRESS_FILE)) as f:
            return json.load(f)

    def _patch(self, *args, **kwargs):
        patcher = mock.patch.object(*args, **kwargs)
        self.addCleanup(patcher.stop)
        return patcher.start()

    def test_reads_everything_then_is_local(self):
        hydrator = rootfs_stream.Hydrator(self.dir, self.data, self.size,
                                          rate=1024 * MiB)
        hydrator.start()
        hydrator.join(30)
        progress = rootfs_stream.progress(self.dir)
        self.assertEqual(self.size, progress['bytes'])
        self.assertIsNotNone(progress['fully_local_at'])
        self.assertIsNone(progress['error'])
        self.assertFalse(progress['running'])
        self.assertIn('cached_bytes', progress)

    def test_steps_aside_when_the_workload_reads(self):
        # Every read of the copy sees 8 more sectors than its own.
        count = iter(range(0, 10 ** 9, 2048 + 8))
        with mock.patch.object(rootfs_stream, 'sectors_read',
                               side_effect=lambda d: next(count)):
            with mock.patch.object(rootfs_stream, 'YIELD', 0.01):
                hydrator = rootfs_stream.Hydrator(
                    self.dir, self.data, self.size, rate=1024 * MiB)
                hydrator.run()
        self.assertGreaterEqual(self._progress()['yielded_s'], 0.03)

    def test_rate_bound_and_stop(self):
        hydrator = rootfs_stream.Hydrator(self.dir, self.data, self.size,
                                          rate=MiB)
        # The hydrator's clock stands still (so no progress is saved on
        # the way, and its pace is exact); its waits are the test's: each
        # records how long the hydrator would wait, says so, and lasts
        # until the stop (on a clock that stands still, a wait does not
        # end by itself).
        mock_time = self._patch(rootfs_stream, 'time', autospec=True)
        mock_time.time.side_effect = time.time
        mock_time.monotonic.return_value = 100.0
        stopped = threading.Event()
        waits = []
        waiting = threading.Event()

        def wait(timeout=None):
            waits.append(timeout)
            waiting.set()
            return stopped.wait()

        hydrator.stopped = mock.create_autospec(threading.Event,
                                                instance=True)
        hydrator.stopped.set.side_effect = stopped.set
        hydrator.stopped.is_set.side_effect = stopped.is_set
        hydrator.stopped.wait.side_effect = wait
        self.addCleanup(hydrator.stop)
        hydrator.start()
        # Until it waits, or ends without waiting (it reads a local file:
        # it does one or the other).
        while not waiting.wait(0.01) and hydrator.is_alive():
            pass
        self.assertTrue(waiting.is_set(), 'the hydrator never waited')
        # A progress record exists from the start, before any chunk.
        self.assertEqual({'running': True, 'bytes': 0},
                         {k: self._progress()[k]
                          for k in ('running', 'bytes')})
        # At 1 MiB/s, one chunk read, the next waits a second for its
        # turn; a stop then ends the copy with that one chunk read.
        self.assertEqual([1.0], waits)
        hydrator.stop()
        self.assertFalse(hydrator.is_alive())
        progress = self._progress()
        self.assertEqual(MiB, progress['bytes'])
        self.assertIsNone(progress['fully_local_at'])
        self.assertFalse(progress['running'])
        self.assertEqual([1.0], waits)     # (none after the stop)

    def test_read_error_is_recorded(self):
        hydrator = rootfs_stream.Hydrator(
            self.dir, os.path.join(self.dir, 'missing'), self.size,
            rate=MiB)
        hydrator.run()
        self.assertIn('No such file', self._progress()['error'])

    def test_no_progress_outside_stream_mode(self):
        self.assertIsNone(rootfs_stream.progress(self.tmp.name))
