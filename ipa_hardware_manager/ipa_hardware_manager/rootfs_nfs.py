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


"""Mount a container root exported over NFS (the ``nfs`` rootfs mode).

The conductor host exports each image's unpacked root read-only (see
``ironic_bmc.nfs.ganesha``); the node mounts it here, NFSv4 over TCP, and
:mod:`ipa_hardware_manager.rootfs` lays a tmpfs overlay on top.

The kernel mounts without ``mount.nfs`` (the agent ramdisk has no
nfs-common): the server address is passed as ``addr=`` (an IP literal),
which the kernel needs when no mount helper resolved it.
"""

import ipaddress
import re
import socket
import subprocess
import time

from oslo_log import log

LOG = log.getLogger(__name__)

#: Seconds one mount attempt may take before it counts as no answer.
MOUNT_TIMEOUT = 60
#: The export may appear a moment after the conductor asked the server to
#: re-read its exports: attempts, and the pause between two.
MOUNT_ATTEMPTS = 5
RETRY_DELAY = 1.0
_EXPORT_RE = re.compile(r'^/[A-Za-z0-9_./-]{1,1000}$')
_OPTION_RE = re.compile(r'^[A-Za-z0-9_.=-]+$')
#: Options the conductor may not set: the mount is read-only and the
#: address is ours to resolve.
_RESERVED = ('rw', 'addr', 'port')


class NFSError(Exception):
    """The export could not be mounted; the message says why."""


def check(nfs):
    """Validate the step's ``nfs`` argument; return it normalized."""
    if not isinstance(nfs, dict):
        raise NFSError('nfs must be an object with server, port, export '
                       'and options, got %r' % (nfs,))
    server = nfs.get('server')
    if not isinstance(server, str) or not server or any(
            c.isspace() or c in ',:/' for c in server):
        raise NFSError('nfs.server must be a host name or an IPv4 address, '
                       'got %r' % (server,))
    try:
        port = int(nfs.get('port', 2049))
    except (TypeError, ValueError):
        raise NFSError('nfs.port must be an integer, got %r'
                       % (nfs.get('port'),)) from None
    if not 0 < port < 65536:
        raise NFSError('nfs.port must be 1-65535, got %d' % port)
    export = nfs.get('export')
    if (not isinstance(export, str) or not _EXPORT_RE.match(export)
            or '..' in export.split('/')):
        raise NFSError('nfs.export must be an absolute path without "..", '
                       'got %r' % (export,))
    options = [o for o in str(nfs.get('options') or '').split(',') if o]
    for option in options:
        if not _OPTION_RE.match(option):
            raise NFSError('nfs.options: bad option %r' % option)
        if option.split('=', 1)[0] in _RESERVED:
            raise NFSError('nfs.options: %r is set by the agent' % option)
    return {'server': server, 'port': port, 'export': export,
            'options': options}


def resolve(server):
    """The server's IPv4 address (the kernel mounts by address)."""
    try:
        return str(ipaddress.IPv4Address(server))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(server, None, socket.AF_INET,
                                   socket.SOCK_STREAM)
    except OSError as exc:
        raise NFSError('cannot resolve NFS server %s: %s'
                       % (server, exc)) from exc
    return infos[0][4][0]


def mount_command(nfs, target, address):
    options = ['ro', 'addr=%s' % address, 'port=%d' % nfs['port']]
    options += nfs['options']
    return ['mount', '-t', 'nfs4', '-o', ','.join(options),
            '%s:%s' % (address, nfs['export']), target]


def mount(nfs, target, attempts=MOUNT_ATTEMPTS, delay=RETRY_DELAY,
          timeout=MOUNT_TIMEOUT):
    """Mount the export read-only on ``target``; return the seconds it
    took.  Retries a refused or missing export a few times."""
    address = resolve(nfs['server'])
    cmd = mount_command(nfs, target, address)
    where = '%s:%d%s' % (nfs['server'], nfs['port'], nfs['export'])
    start = time.monotonic()
    error = None
    for attempt in range(attempts):
        LOG.debug('Running %s', ' '.join(cmd))
        try:
            # argv list, no shell: mount.nfs with the conductor's address.
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,  # noqa: S603
                                  capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise NFSError('NFS server %s did not answer within %d s'
                           % (where, timeout)) from None
        except OSError as exc:
            raise NFSError('cannot run mount: %s' % exc) from exc
        if proc.returncode == 0:
            return round(time.monotonic() - start, 3)
        error = (proc.stderr or proc.stdout).strip()[-500:]
        LOG.warning('Mounting NFS export %s failed (attempt %d of %d): %s',
                    where, attempt + 1, attempts, error)
        if attempt + 1 < attempts:
            time.sleep(delay)
    raise NFSError('cannot mount NFS export %s: %s' % (where, error))
