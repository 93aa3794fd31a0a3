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
"""Download a rootfs artifact over HTTP into a file, resuming when the
link drops, checking its size and (unless dm-verity checks its blocks
later) its sha256 on the way.

Receiving runs in one thread, hashing and writing in another, so the
transfer overlaps the verification instead of adding to it.
"""

import hashlib
import http.client
import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from oslo_log import log

LOG = log.getLogger(__name__)

CHUNK = 1024 * 1024
#: Chunks received ahead of hashing/writing (bounds the memory used).
QUEUE_CHUNKS = 16
HTTP_TIMEOUT = 60
#: Requests one artifact download may take (resuming), and the first pause.
DOWNLOAD_ATTEMPTS = 4
RETRY_DELAY = 1.0


class DownloadError(Exception):
    """The artifact could not be downloaded or is not the one expected."""


class _Reader(threading.Thread):
    """Read an HTTP response in chunks into a bounded queue.

    Receiving runs beside hashing and writing (both release the GIL), so
    the network transfer overlaps the verification instead of adding to
    it.  ``None`` marks the end; an exception is passed on as it is.
    """

    def __init__(self, resp, chunks):
        super().__init__(name='bmc-rootfs-reader', daemon=True)
        self.resp = resp
        self.chunks = chunks
        self.stopped = threading.Event()

    def run(self):
        try:
            while not self.stopped.is_set():
                chunk = self.resp.read(CHUNK)
                if not chunk:
                    missing = getattr(self.resp, 'length', None)
                    if missing:
                        raise ConnectionError(
                            'connection closed with %d bytes of the '
                            'response missing' % missing)
                    self.chunks.put(None)
                    return
                self.chunks.put(chunk)
        except Exception as exc:  # noqa: BLE001 - handed to the consumer
            self.chunks.put(exc)


class _Transfer:
    """What a download has received so far, across resumed requests."""

    def __init__(self, out, sha256=True):
        self.out = out
        self.sha256 = sha256
        self.hasher = hashlib.sha256() if sha256 else None
        self.total = 0
        self.spent = {'hash': 0.0, 'write': 0.0}

    def restart(self):
        self.out.seek(0)
        self.out.truncate()
        self.hasher = hashlib.sha256() if self.sha256 else None
        self.total = 0


def _http_only(url):
    """The conductor names artifacts by http(s) URL; anything else (a
    ``file:`` URL reading the node's own disk) is refused."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ('http', 'https'):
        raise DownloadError('not an http(s) URL: %r' % url[:100])
    return url


def _fetch(url, transfer):
    """One request: from ``transfer.total`` on (a Range request) to the
    end.  Raises what the network raised."""
    # The scheme is checked: http(s) only.
    request = urllib.request.Request(_http_only(url))  # noqa: S310
    if transfer.total:
        request.add_header('Range', 'bytes=%d-' % transfer.total)
    reader = None
    try:
        # A Request of an http(s) URL (_http_only).
        with urllib.request.urlopen(  # noqa: S310
                request, timeout=HTTP_TIMEOUT) as resp:
            if transfer.total and resp.status != 206:
                LOG.warning('%s does not resume (HTTP %s to a Range '
                            'request): downloading it again from the start',
                            url, resp.status)
                transfer.restart()
            chunks = queue.Queue(maxsize=QUEUE_CHUNKS)
            reader = _Reader(resp, chunks)
            reader.start()
            while True:
                chunk = chunks.get()
                if isinstance(chunk, Exception):
                    raise chunk
                if chunk is None:
                    break
                t = time.monotonic()
                if transfer.hasher is not None:
                    transfer.hasher.update(chunk)
                t2 = time.monotonic()
                transfer.out.write(chunk)
                transfer.spent['hash'] += t2 - t
                transfer.spent['write'] += time.monotonic() - t2
                transfer.total += len(chunk)
    finally:
        if reader is not None:
            reader.stopped.set()
            # Unblock a reader waiting on a full queue, then let it end.
            while reader.is_alive():
                try:
                    chunks.get(timeout=0.1)
                except queue.Empty:
                    pass


def _retryable(exc):
    """A dropped link or a restarting server, not an answer to act on."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in (502, 503, 504)
    return isinstance(exc, (urllib.error.URLError, ConnectionError,
                            TimeoutError, http.client.HTTPException))


def download(url, dest, expected_hex, size=None, timings=None):
    """Stream url to dest, checking sha256 (and size); return bytes read.

    ``expected_hex`` None: no whole-file hash (the artifact is checked
    block by block by dm-verity when read); the size is still checked.

    A link that drops or a server that restarts midway costs a retry, not
    the deploy: the transfer resumes where it stopped with a Range request
    (from the start if the server ignores ranges), up to
    ``DOWNLOAD_ATTEMPTS`` requests, ``RETRY_DELAY`` seconds apart and
    doubling.

    :param timings: if a dict, gets ``hash`` and ``write``: seconds spent
        hashing and writing (the verification's share of the download).
    """
    failures = []
    transfer = None
    try:
        with open(dest, 'wb') as out:
            transfer = _Transfer(out, sha256=expected_hex is not None)
            for attempt in range(DOWNLOAD_ATTEMPTS):
                try:
                    _fetch(url, transfer)
                    break
                except Exception as exc:  # noqa: BLE001 - sorted below
                    if not _retryable(exc):
                        raise
                    failures.append('%s after %d bytes' % (exc,
                                                           transfer.total))
                    if attempt + 1 == DOWNLOAD_ATTEMPTS:
                        raise
                    LOG.warning('Download of %s interrupted after %d bytes '
                                '(%s); resuming', url, transfer.total, exc)
                    time.sleep(RETRY_DELAY * 2 ** attempt)
    except (urllib.error.URLError, OSError,
            http.client.HTTPException) as exc:
        what = ('; earlier attempts: %s' % '; '.join(failures[:-1])
                if len(failures) > 1 else '')
        raise DownloadError('download of %s failed after %d bytes: %s%s' % (
            url, transfer.total if transfer else 0, exc, what)) from exc
    if timings is not None:
        timings.update({k: round(v, 3) for k, v in transfer.spent.items()})
    if failures:
        LOG.info('Downloaded %s after %d interrupted attempt(s): %s', url,
                 len(failures), '; '.join(failures))
    total = transfer.total
    if size is not None and total != int(size):
        raise DownloadError('artifact %s has %d bytes, expected %d' % (
            url, total, int(size)))
    if expected_hex is None:
        return total
    actual = transfer.hasher.hexdigest()
    if actual != expected_hex:
        raise DownloadError('artifact %s has digest sha256:%s, expected '
                           'sha256:%s' % (url, actual, expected_hex))
    return total


def measure_raw_transfer(url):
    """Seconds to fetch ``url`` and throw the bytes away: the link's limit.

    A diagnostic for the run report (``staging.raw_transfer``): what the
    same bytes cost when nothing but the network and HTTP is involved.
    """
    start = time.monotonic()
    total = 0
    try:
        # The scheme is checked: http(s) only.
        with urllib.request.urlopen(  # noqa: S310
                _http_only(url), timeout=HTTP_TIMEOUT) as resp:
            while True:
                chunk = resp.read(CHUNK)
                if not chunk:
                    break
                total += len(chunk)
    except (urllib.error.URLError, OSError) as exc:
        raise DownloadError('raw transfer of %s failed after %d bytes: %s'
                           % (url, total, exc)) from exc
    return round(time.monotonic() - start, 3), total
