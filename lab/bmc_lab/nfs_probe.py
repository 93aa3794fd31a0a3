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


"""A tiny NFSv4.0 client: what "another node" sees of the NFS server.

One ONC RPC call over TCP (record marking, AUTH_SYS) per question, from a
socket bound to a chosen source address: on loopback, 127.0.0.2 stands
for a node that is not among an export's clients.  It asks the questions
a mount asks (``PUTROOTFH; LOOKUP ...; GETFH``) and lists directories
(``READDIR``), and answers with NFSv4 status names.  Standard library
only.
"""

import os
import socket
import struct

NFS_PROGRAM = 100003
NFS_V4 = 4
PROC_COMPOUND = 1
AUTH_NONE = 0
AUTH_SYS = 1
MACHINE_NAME = 'bmc-probe'

OP_GETFH = 10
OP_LOOKUP = 15
OP_PUTROOTFH = 24
OP_READDIR = 26

# RFC 7530's nfsstat4, the common ones; others are named by number.
NFS4_STATUS = {
    0: 'NFS4_OK', 1: 'NFS4ERR_PERM', 2: 'NFS4ERR_NOENT', 5: 'NFS4ERR_IO',
    6: 'NFS4ERR_NXIO', 13: 'NFS4ERR_ACCESS', 17: 'NFS4ERR_EXIST',
    18: 'NFS4ERR_XDEV', 20: 'NFS4ERR_NOTDIR', 21: 'NFS4ERR_ISDIR',
    22: 'NFS4ERR_INVAL', 30: 'NFS4ERR_ROFS', 63: 'NFS4ERR_NAMETOOLONG',
    70: 'NFS4ERR_STALE', 10001: 'NFS4ERR_BADHANDLE',
    10003: 'NFS4ERR_BAD_COOKIE', 10004: 'NFS4ERR_NOTSUPP',
    10005: 'NFS4ERR_TOOSMALL', 10006: 'NFS4ERR_SERVERFAULT',
    10007: 'NFS4ERR_BADTYPE', 10008: 'NFS4ERR_DELAY',
    10013: 'NFS4ERR_GRACE', 10014: 'NFS4ERR_FHEXPIRED',
    10016: 'NFS4ERR_WRONGSEC', 10018: 'NFS4ERR_RESOURCE',
    10019: 'NFS4ERR_MOVED', 10020: 'NFS4ERR_NOFILEHANDLE',
    10021: 'NFS4ERR_MINOR_VERS_MISMATCH', 10029: 'NFS4ERR_SYMLINK',
    10032: 'NFS4ERR_ATTRNOTSUPP', 10036: 'NFS4ERR_BADXDR',
    10040: 'NFS4ERR_BADCHAR', 10041: 'NFS4ERR_BADNAME',
    10044: 'NFS4ERR_OP_ILLEGAL',
}

_ACCEPT_STAT = {1: 'PROG_UNAVAIL', 2: 'PROG_MISMATCH', 3: 'PROC_UNAVAIL',
                4: 'GARBAGE_ARGS', 5: 'SYSTEM_ERR'}
_AUTH_STAT = {0: 'AUTH_OK', 1: 'AUTH_BADCRED', 2: 'AUTH_REJECTEDCRED',
              3: 'AUTH_BADVERF', 4: 'AUTH_REJECTEDVERF', 5: 'AUTH_TOOWEAK',
              6: 'AUTH_INVALIDRESP', 7: 'AUTH_FAILED'}


class ProbeError(Exception):
    """The server could not be asked: connection or RPC-level failure."""


def status_name(status):
    """The name of NFSv4 status number ``status``."""
    return NFS4_STATUS.get(status, 'NFS4ERR_%d' % status)


def _u32(value):
    return struct.pack('>I', value)


def _opaque(data):
    if isinstance(data, str):
        data = data.encode()
    return _u32(len(data)) + data + b'\0' * (-len(data) % 4)


class _Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def u32(self):
        return struct.unpack('>I', self.fixed(4))[0]

    def u64(self):
        return (self.u32() << 32) | self.u32()

    def fixed(self, size):
        if self.pos + size > len(self.data):
            raise ProbeError('reply too short (%d bytes)' % len(self.data))
        value = self.data[self.pos:self.pos + size]
        self.pos += size + (-size % 4)
        return value

    def opaque(self):
        return self.fixed(self.u32())


def _auth_sys(uid, gid):
    body = (_u32(0) + _opaque(MACHINE_NAME) + _u32(uid) + _u32(gid)
            + _u32(1) + _u32(gid))
    return _u32(AUTH_SYS) + _opaque(body)


def _recv_exact(sock, size):
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise ProbeError('the server closed the connection')
        chunks.append(chunk)
        size -= len(chunk)
    return b''.join(chunks)


def _call(host, port, args, source, timeout, uid, gid):
    """Send one COMPOUND (``args``); a _Reader of the reply, after the
    RPC header."""
    xid = struct.unpack('>I', os.urandom(4))[0]
    msg = (_u32(xid) + _u32(0) + _u32(2) + _u32(NFS_PROGRAM) + _u32(NFS_V4)
           + _u32(PROC_COMPOUND) + _auth_sys(uid, gid)
           + _u32(AUTH_NONE) + _opaque(b'') + args)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            if source:
                sock.bind((source, 0))
            sock.connect((host, port))
            sock.sendall(_u32(0x80000000 | len(msg)) + msg)
            reply = b''
            last = False
            while not last:
                (mark,) = struct.unpack('>I', _recv_exact(sock, 4))
                last = bool(mark & 0x80000000)
                reply += _recv_exact(sock, mark & 0x7fffffff)
    except OSError as exc:
        raise ProbeError('NFS server %s:%s from %s: %s'
                         % (host, port, source or 'any address', exc))
    r = _Reader(reply)
    if r.u32() != xid or r.u32() != 1:
        raise ProbeError('not a reply to our call')
    if r.u32() != 0:  # MSG_DENIED
        reject = r.u32()
        if reject == 0:
            raise ProbeError('MSG_DENIED: RPC_MISMATCH (versions %d-%d)'
                             % (r.u32(), r.u32()))
        stat = r.u32()
        raise ProbeError('MSG_DENIED: AUTH_ERROR %s'
                         % _AUTH_STAT.get(stat, stat))
    r.u32()  # verifier flavor
    r.opaque()
    accept = r.u32()
    if accept != 0:
        detail = (' (versions %d-%d)' % (r.u32(), r.u32())
                  if accept == 2 else '')
        raise ProbeError('MSG_ACCEPTED but %s%s'
                         % (_ACCEPT_STAT.get(accept, accept), detail))
    return r


def _compound(host, port, ops, source, timeout, uid, gid):
    """Run ``ops`` (a list of (opnum, encoded args)): (status, [(opnum,
    status)] of the results, the reply's _Reader: after a READDIR's
    status when that op succeeded)."""
    args = _opaque(b'probe') + _u32(0) + _u32(len(ops))
    args += b''.join(_u32(op) + body for op, body in ops)
    r = _call(host, port, args, source, timeout, uid, gid)
    status = r.u32()
    r.opaque()  # tag
    count = r.u32()
    results = []
    for _ in range(count):
        op = r.u32()
        op_status = r.u32()
        results.append((op, op_status))
        if op_status == 0 and op == OP_GETFH:
            r.opaque()
        elif op_status == 0 and op == OP_READDIR:
            break  # decoded by the caller, from here
        elif op_status == 0 and op not in (OP_PUTROOTFH, OP_LOOKUP):
            raise ProbeError('cannot decode the result of op %d' % op)
    return status, results, r


def _walk(path):
    ops = [(OP_PUTROOTFH, b'')]
    for part in path.strip('/').split('/'):
        if part:
            ops.append((OP_LOOKUP, _opaque(part)))
    return ops


def _first_failure(status, results):
    for _op, op_status in results:
        if op_status != 0:
            return status_name(op_status)
    return status_name(status)


def lookup(host, port, path, source=None, timeout=10, uid=0, gid=0):
    """The NFSv4 status (a name: ``NFS4_OK``, ``NFS4ERR_ACCESS``...) of
    ``PUTROOTFH; LOOKUP <each component of path>; GETFH``: what mounting
    ``path`` gets.

    :raises: ProbeError for a connection or RPC-level failure.
    """
    ops = _walk(path) + [(OP_GETFH, b'')]
    status, results, _r = _compound(host, port, ops, source, timeout,
                                    uid, gid)
    return _first_failure(status, results)


def readdir(host, port, path, source=None, timeout=10, uid=0, gid=0,
            rounds=8):
    """(status name, [entry names]) of ``PUTROOTFH; LOOKUP ...;
    READDIR``; follows the cookies for ``rounds`` calls at most.

    :raises: ProbeError for a connection or RPC-level failure.
    """
    names = []
    cookie, verifier = 0, b'\0' * 8
    for _ in range(rounds):
        args = (struct.pack('>Q', cookie) + verifier + _u32(8192)
                + _u32(65536) + _u32(0))  # empty attribute request
        status, results, r = _compound(
            host, port, _walk(path) + [(OP_READDIR, args)], source,
            timeout, uid, gid)
        if status != 0:
            return _first_failure(status, results), names
        verifier = r.fixed(8)
        while r.u32():  # value follows
            cookie = r.u64()
            names.append(r.opaque().decode('utf-8', 'replace'))
            r.fixed(4 * r.u32())  # attribute bitmap
            r.opaque()  # attribute values
        if r.u32():  # eof
            break
    return 'NFS4_OK', names
