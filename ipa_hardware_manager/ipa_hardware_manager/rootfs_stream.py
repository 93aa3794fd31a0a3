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


"""Stream the rootfs artifact into RAM block by block (``stream`` mode).

The workload starts as soon as the root is mountable; the blocks it reads
arrive on demand, and the rest follows in the background:

* ``nbdkit`` serves the artifact's URL (curl plugin, HTTP range requests)
  on a Unix socket, through its ``cache`` filter (``cache-on-read``: a
  block fetched once is kept in a tmpfs and never fetched again; with
  ``cache-max-size`` the least recently used blocks are dropped) and its
  ``retry`` filter (a web server that restarts mid-stream costs a pause,
  not a failed read);
* ``nbd-client`` attaches the socket to ``/dev/nbdN``;
* :mod:`ipa_hardware_manager.rootfs` opens dm-verity on that device, so
  every block is checked against the root hash when it is read, and
  mounts the erofs image from the verified device;
* :class:`Hydrator` then reads the whole NBD device once (below
  dm-verity: blocks are checked when the workload reads them), at a
  bounded rate, and yields whenever the workload is reading, so that the
  workload's own I/O keeps priority (BMcast's moderated background copy).
  When it has read every block the image is fully local and the network
  is no longer used.

The cache lives on a tmpfs of its own, sized to the bound, so that it can
never take more RAM than it was given; what that tmpfs holds is what was
fetched.
"""

import json
import mmap
import os
import signal
import subprocess
import threading
import time

from oslo_log import log

LOG = log.getLogger(__name__)

SOCKET = 'nbd.sock'
PID_FILE = 'nbdkit.pid'
LOG_FILE = 'stream.log'
CACHE_DIR = 'stream-cache'
PROGRESS_FILE = 'hydration.json'
#: Room in the cache tmpfs beyond the bound: the cache filter trims after
#: it has written, and its block map lives there too.
CACHE_SLACK = 64 * 1024 * 1024
#: The cache's block: one HTTP range request fetches this much.  nbdkit's
#: default (64 KiB) costs sixteen requests per MiB, which bounded the
#: background copy to ~8 MB/s on a lab node; a workload's first read of a
#: file fetches one block around it.
CACHE_BLOCK = 1024 * 1024
#: Seconds nbdkit waits for one HTTP request; the retry filter retries.
HTTP_TIMEOUT = 30
RETRIES = 30
#: Seconds the kernel waits for an NBD request before failing it.
NBD_TIMEOUT = 120
NBD_BLOCK_SIZE = 4096
NBD_MAX = 16
SYS_BLOCK = '/sys/block'
CHUNK = 1024 * 1024
#: Seconds the background copy steps aside when the workload read.
YIELD = 0.05
#: Seconds between two progress records.
PROGRESS_EVERY = 2.0


class StreamError(Exception):
    """The artifact could not be streamed; the message says why."""


def _run(cmd, log_path, env=None, timeout=120):
    """Run a command whose output goes to ``log_path``.

    Not to a pipe: nbdkit and nbd-client leave daemons behind that would
    hold a pipe open, and ``communicate`` would wait for them.
    """
    LOG.debug('Running %s', ' '.join(cmd))
    with open(log_path, 'ab') as out:
        begin = out.tell()
        try:
            # argv list, no shell: nbdkit/nbd-client with our arguments.
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out,  # noqa: S603
                                  stderr=out, env=env, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise StreamError('%s did not finish within %d s'
                              % (cmd[0], timeout)) from None
        except OSError as exc:
            raise StreamError('cannot run %s (are nbdkit and nbd-client in '
                              'the agent ramdisk?): %s'
                              % (cmd[0], exc)) from exc
    if proc.returncode != 0:
        raise StreamError('%s failed (exit %d): %s' % (
            ' '.join(cmd[:2]), proc.returncode, _tail(log_path, begin)))


def _tail(path, begin, size=500):
    """What the command wrote to the log from ``begin`` on (its end)."""
    try:
        with open(path, 'rb') as f:
            f.seek(max(begin, os.path.getsize(path) - size))
            return f.read().decode('utf-8', 'replace').strip()
    except OSError:
        return ''


def cache_tmpfs_size(size, cache_max=None):
    """Bytes of the tmpfs that holds the block cache."""
    return int(min(size, cache_max) if cache_max else size) + CACHE_SLACK


def nbdkit_command(url, base, cache_max=None):
    """nbdkit as a daemon (it must outlive the step that starts it)."""
    cmd = ['nbdkit', '--readonly',
           '--unix', os.path.join(base, SOCKET),
           '--pidfile', os.path.join(base, PID_FILE),
           '--filter=cache', '--filter=retry',
           'curl', 'url=%s' % url, 'timeout=%d' % HTTP_TIMEOUT,
           'cache-on-read=true', 'cache-min-block-size=%d' % CACHE_BLOCK,
           'retries=%d' % RETRIES, 'retry-delay=1',
           'retry-exponential=no']
    if cache_max:
        cmd.append('cache-max-size=%d' % cache_max)
    return cmd


def free_device():
    """The first /dev/nbdN that no client holds."""
    sys_block = SYS_BLOCK
    for n in range(NBD_MAX):
        name = 'nbd%d' % n
        if (os.path.isdir(os.path.join(sys_block, name))
                and not os.path.exists(os.path.join(sys_block, name,
                                                    'pid'))):
            return '/dev/' + name
    raise StreamError('no free NBD device (is the nbd module loaded?)')


def sectors_read(device):
    """Sectors read from ``device`` so far (its block stat, field 3)."""
    try:
        with open(os.path.join(SYS_BLOCK, os.path.basename(device),
                               'stat')) as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return 0


def cached_bytes(base):
    """Bytes the block cache holds: what was fetched and kept."""
    try:
        st = os.statvfs(os.path.join(base, CACHE_DIR))
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class Stream:
    """nbdkit + nbd-client: the artifact at ``url`` as a block device."""

    def __init__(self, base, url, size, cache_max=None):
        self.base = base
        self.url = url
        self.size = int(size)
        self.cache_max = cache_max
        self.device = None
        self.log = os.path.join(base, LOG_FILE)

    def start(self):
        """Start the server and attach the device; return its path.

        The cache tmpfs must be mounted at ``<base>/stream-cache``.
        """
        sock = os.path.join(self.base, SOCKET)
        if os.path.exists(sock):
            os.unlink(sock)
        env = dict(os.environ, TMPDIR=os.path.join(self.base, CACHE_DIR))
        _run(nbdkit_command(self.url, self.base, self.cache_max), self.log,
             env=env)
        device = free_device()
        try:
            _run(['nbd-client', '-unix', sock, device, '-readonly',
                  '-block-size', str(NBD_BLOCK_SIZE),
                  '-timeout', str(NBD_TIMEOUT)], self.log)
        except StreamError:
            self.stop()
            raise
        self.device = device
        return device

    def record(self):
        return {'device': self.device, 'url': self.url, 'size': self.size,
                'cache_max': self.cache_max}

    def stop(self):
        """Detach the device and end the server (each if present)."""
        errors = []
        if self.device:
            try:
                _run(['nbd-client', '-d', self.device], self.log,
                     timeout=60)
            except StreamError as exc:
                errors.append(str(exc))
            self.device = None
        pid_file = os.path.join(self.base, PID_FILE)
        try:
            with open(pid_file) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            pid = None
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                errors.append('nbdkit (pid %d) did not end' % pid)
            try:
                os.unlink(pid_file)
            except OSError:
                pass
        if errors:
            raise StreamError('; '.join(errors))


class Hydrator(threading.Thread):
    """Read every block of the NBD ``device`` once, so that nbdkit's
    cache holds all of it.

    Below dm-verity: the copy only brings blocks in; each is checked when
    the workload reads it, as it would be anyway (hashing the whole image
    here would cost the node's CPU for blocks nobody reads).  Reads with
    O_DIRECT (the page cache would hold a second copy), at most ``rate``
    bytes a second, and steps aside for ``YIELD`` seconds whenever the
    device served more than this thread asked of it (the workload is
    reading).  Progress goes to ``<base>/hydration.json``.
    """

    def __init__(self, base, device, size, rate):
        super().__init__(name='bmc-rootfs-hydrator', daemon=True)
        self.base = base
        self.device = device
        self.size = int(size)
        self.rate = max(1, int(rate))
        self.stopped = threading.Event()
        self.done = 0
        self.yielded = 0.0
        self.started = time.time()
        self.fully_local_at = None
        self.error = None
        self._written = 0.0

    def stop(self, timeout=30):
        self.stopped.set()
        if self.is_alive():
            self.join(timeout)
        self._save(running=False)

    def _save(self, running=True):
        record = {'bytes': self.done, 'size': self.size,
                  'rate': self.rate, 'started': self.started,
                  'fully_local_at': self.fully_local_at,
                  'yielded_s': round(self.yielded, 3),
                  'error': self.error,
                  'running': running and not self.stopped.is_set()}
        path = os.path.join(self.base, PROGRESS_FILE)
        try:
            with open(path + '.tmp', 'w') as f:
                json.dump(record, f)
            os.replace(path + '.tmp', path)
        except OSError as exc:
            LOG.warning('Cannot record the background fetch: %s', exc)
        self._written = time.monotonic()

    def run(self):
        self._save()
        try:
            self._copy()
        except OSError as exc:
            if not self.stopped.is_set():
                self.error = 'reading %s at byte %d: %s' % (
                    self.device, self.done, exc)
                LOG.error('Background fetch of the rootfs stopped: %s',
                          self.error)
        self._save(running=False)

    def _copy(self):
        fd = os.open(self.device, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT wants
        try:
            seen = sectors_read(self.device)
            begin = time.monotonic()
            while self.done < self.size and not self.stopped.is_set():
                n = os.preadv(fd, [buf], self.done)
                if n <= 0:
                    break
                self.done += n
                now_seen = sectors_read(self.device)
                others = now_seen - seen - n // 512
                seen = now_seen
                if others > 0:
                    # The workload is reading: let it have the link.
                    self.yielded += YIELD
                    self.stopped.wait(YIELD)
                ahead = self.done / self.rate - (time.monotonic() - begin)
                if ahead > 0:
                    self.stopped.wait(ahead)
                if time.monotonic() - self._written > PROGRESS_EVERY:
                    self._save()
            if self.done >= self.size:
                self.fully_local_at = time.time()
                LOG.info('The rootfs is fully local after %.1f s of '
                         'background fetch',
                         self.fully_local_at - self.started)
        finally:
            buf.close()
            os.close(fd)


#: The background fetch of the staged root, if one runs.
_current = None


def start_hydrator(base, device, size, rate):
    global _current
    stop_hydrator()
    _current = Hydrator(base, device, size, rate)
    _current.start()
    return _current


def stop_hydrator():
    global _current
    if _current is not None:
        _current.stop()
        _current = None


def record_no_background(base, size, reason):
    """No background fetch (the cache cannot hold the image): say so where
    the status looks for the fetch's progress."""
    path = os.path.join(base, PROGRESS_FILE)
    with open(path, 'w') as f:
        json.dump({'bytes': 0, 'size': int(size), 'started': None,
                   'fully_local_at': None, 'error': None, 'running': False,
                   'not_local_reason': reason}, f)


def progress(base):
    """The stream section of the workload status, or None."""
    try:
        with open(os.path.join(base, PROGRESS_FILE)) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    record['cached_bytes'] = cached_bytes(base)
    return record


def check(stream):
    """Validate the step's ``stream`` argument; return it normalized:
    ``cache_max`` (bytes, or None: the whole image) and ``rate`` (bytes a
    second of background fetch)."""
    if stream is None:
        stream = {}
    if not isinstance(stream, dict):
        raise StreamError('stream must be an object with cache_max and '
                          'rate, got %r' % (stream,))
    cache_max = stream.get('cache_max')
    if cache_max is not None:
        try:
            cache_max = int(cache_max)
        except (TypeError, ValueError):
            raise StreamError('stream.cache_max must be a number of bytes, '
                              'got %r' % (cache_max,)) from None
        if cache_max < 1024 * 1024:
            raise StreamError('stream.cache_max must be at least 1 MiB, '
                              'got %d bytes' % cache_max)
    try:
        rate = int(stream.get('rate', 64 * 1024 * 1024))
    except (TypeError, ValueError):
        raise StreamError('stream.rate must be bytes a second, got %r'
                          % (stream.get('rate'),)) from None
    if rate <= 0:
        raise StreamError('stream.rate must be positive, got %d' % rate)
    return {'cache_max': cache_max, 'rate': rate}
