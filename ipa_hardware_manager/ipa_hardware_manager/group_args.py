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

"""The start step's ``group`` argument, checked before anything is touched.

The conductor made it, but what it holds ends up in the node's network
configuration, its host name and files the image's sshd trusts: every
field is checked, and an error names the field (never the value of a
private key).  The fields a launcher does not use (with ``none``:
``ssh``, the members' ``host_key``, ``peer_wait``) may be absent or
null; given, they are checked all the same.

The keys are parsed with the standard library only: an OpenSSH private
key carries its public key in clear, which is what the known_hosts and
``.pub`` files need and what ties the member's host key to the public one
the others are told.
"""

import base64
import binascii
import ipaddress
import math
import re
import struct

from ipa_hardware_manager import workload_args
from bmc_common import protocol

MAX_SIZE = 1024
MAX_ID = 64
#: Bound of each private key (an ed25519 one is about 400 bytes).
MAX_PRIVATE_KEY = 8 * 1024
#: Bound of each public key line (an RSA 16384-bit one fits).
MAX_PUBLIC_KEY = 8 * 1024
MAX_AUTHORIZED_KEYS = 4 * MAX_SIZE
MAX_PEER_WAIT = 3600
ED25519 = 'ssh-ed25519'
BEGIN = '-----BEGIN OPENSSH PRIVATE KEY-----'
END = '-----END OPENSSH PRIVATE KEY-----'
_MAGIC = b'openssh-key-v1\0'

_NAME = re.compile(protocol.GROUP_NAME_PATTERN)
_LABEL = re.compile(r'^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$')
_ID = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,%d}$' % (MAX_ID - 1))
_MAC = re.compile(r'^[0-9a-f]{2}(:[0-9a-f]{2}){5}$')
_PUBLIC = re.compile(r'^(?P<type>[a-z0-9@.-]+) (?P<data>[A-Za-z0-9+/]+'
                     r'={0,2})(?: [^\r\n\0]*)?\Z')


class GroupError(workload_args.WorkloadError):
    """The group argument, the image or the node cannot make this member
    of its group; says why (a WorkloadError: the start step fails)."""


def _fail(field, what, value=None, show=True):
    raise GroupError('group %s must be %s%s' % (
        field, what, ', got %r' % (value,) if show else ''))


def _integer(args, field, low, high):
    value = args.get(field)
    if (not isinstance(value, int) or isinstance(value, bool)
            or not low <= value <= high):
        _fail(field, 'an integer from %d to %d' % (low, high), value)
    return value


def _string(data, pos):
    """An SSH wire-format string of ``data`` at ``pos``; (it, the next
    position)."""
    if pos + 4 > len(data):
        raise ValueError('truncated')
    size = struct.unpack_from('>I', data, pos)[0]
    pos += 4
    if pos + size > len(data):
        raise ValueError('truncated')
    return data[pos:pos + size], pos + size


def _ed25519_blob(blob):
    kind, pos = _string(blob, 0)
    key, pos = _string(blob, pos)
    if kind != ED25519.encode() or len(key) != 32 or pos != len(blob):
        raise ValueError('not an ssh-ed25519 key')


def public_key(line, field, ed25519=True):
    """A public key line (``type base64 [comment]``), checked; with
    ``ed25519``, its canonical ``ssh-ed25519 <base64>`` (no comment)."""
    if not isinstance(line, str) or len(line) > MAX_PUBLIC_KEY:
        _fail(field, 'a public key line of at most %d characters'
              % MAX_PUBLIC_KEY, line)
    found = _PUBLIC.match(line.strip())
    try:
        if not found:
            raise ValueError('not a key line')
        blob = base64.b64decode(found.group('data'), validate=True)
        kind = _string(blob, 0)[0].decode('ascii')
        if kind != found.group('type'):
            raise ValueError('its type and its data differ')
        if ed25519:
            _ed25519_blob(blob)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        _fail(field, 'a "%s <base64> [comment]" line without a newline'
              % (ED25519 if ed25519 else 'type'), line)
    return '%s %s' % (ED25519, found.group('data')) if ed25519 else (
        line.strip())


def private_key(text, field):
    """An unencrypted OpenSSH ed25519 private key, checked; (its text
    ending with a newline, its public key line)."""
    what = ('an unencrypted OpenSSH ed25519 private key ("%s"), at most %d '
            'bytes' % (BEGIN, MAX_PRIVATE_KEY))
    if not isinstance(text, str) or len(text) > MAX_PRIVATE_KEY:
        _fail(field, what, show=False)
    lines = text.replace('\r\n', '\n').strip().split('\n')
    if len(lines) < 3 or lines[0] != BEGIN or lines[-1] != END:
        _fail(field, what, show=False)
    try:
        data = base64.b64decode(''.join(lines[1:-1]), validate=True)
        if not data.startswith(_MAGIC):
            raise ValueError('not openssh-key-v1')
        cipher, pos = _string(data, len(_MAGIC))
        _kdf, pos = _string(data, pos)
        _kdf_options, pos = _string(data, pos)
        count = struct.unpack_from('>I', data, pos)[0]
        blob, pos = _string(data, pos + 4)
        _string(data, pos)  # the private section is there
        _ed25519_blob(blob)
    except (ValueError, binascii.Error, struct.error):
        _fail(field, what, show=False)
    if cipher != b'none':
        _fail(field, 'unencrypted: sshd and a BatchMode ssh cannot ask for '
              'a passphrase', show=False)
    if count != 1:
        _fail(field, 'one key, not %d' % count, show=False)
    public = '%s %s' % (ED25519, base64.b64encode(blob).decode('ascii'))
    return '\n'.join(lines) + '\n', public


def _interface(value):
    if not isinstance(value, dict):
        _fail('interface', 'an object {mac, address}', value)
    mac = value.get('mac')
    if not isinstance(mac, str) or not _MAC.match(mac.lower()):
        _fail('interface.mac', 'a MAC address (aa:bb:cc:dd:ee:ff)', mac)
    address = value.get('address')
    try:
        if not isinstance(address, str) or '/' not in address:
            raise ValueError('no prefix')
        interface = ipaddress.ip_interface(address)
    except ValueError:
        interface = None
    if interface is None or (interface.ip.is_loopback
                             or interface.ip.is_multicast
                             or interface.ip.is_unspecified):
        _fail('interface.address', 'an address with its prefix '
              '(A.B.C.D/prefix), not a loopback, multicast or unspecified '
              'one', address)
    return mac.lower(), interface


def _members(value, size, interface, need_keys):
    if not isinstance(value, list) or len(value) != size:
        _fail('members', 'a list of the %d members (size), by rank' % size,
              len(value) if isinstance(value, list) else value)
    members, names, addresses = [], set(), set()
    for rank, member in enumerate(value):
        field = 'members[%d]' % rank
        if not isinstance(member, dict):
            _fail(field, 'an object {rank, hostname, address, host_key}',
                  member)
        given = member.get('rank')
        if (not isinstance(given, int) or isinstance(given, bool)
                or given != rank):
            _fail(field + '.rank', '%d (the members are listed by rank)'
                  % rank, given)
        hostname = member.get('hostname')
        if not isinstance(hostname, str) or not _LABEL.match(hostname):
            _fail(field + '.hostname', 'a DNS label', hostname)
        try:
            # (A string: ip_address would take an integer too.)
            address = ipaddress.ip_address(str(member['address'])) if (
                isinstance(member.get('address'), str)) else None
        except ValueError:
            address = None
        if address is None or address not in interface.network:
            _fail(field + '.address', 'an address in the group network %s'
                  % interface.network, member.get('address'))
        if hostname.lower() in names or address in addresses:
            _fail(field, 'a member of its own (its hostname or address is '
                  'another\'s)', '%s %s' % (hostname, address))
        names.add(hostname.lower())
        addresses.add(address)
        host_key = member.get('host_key')
        if need_keys or host_key is not None:
            host_key = public_key(host_key, field + '.host_key')
        members.append({'rank': rank, 'hostname': hostname,
                        'address': str(address), 'host_key': host_key})
    return members


def _ssh(value, need):
    if value is None and not need:
        return None
    if not isinstance(value, dict):
        _fail('ssh', 'an object {private_key, host_key, authorized_keys} '
              '(container_group_launcher=ssh)', show=False)
    key, public = private_key(value.get('private_key'), 'ssh.private_key')
    host, host_public = private_key(value.get('host_key'), 'ssh.host_key')
    keys = value.get('authorized_keys')
    if (not isinstance(keys, list) or not keys
            or len(keys) > MAX_AUTHORIZED_KEYS):
        _fail('ssh.authorized_keys', 'a list of 1 to %d public key lines'
              % MAX_AUTHORIZED_KEYS, keys)
    keys = [public_key(k, 'ssh.authorized_keys[%d]' % i, ed25519=False)
            for i, k in enumerate(keys)]
    return {'private_key': key, 'public_key': public, 'host_key': host,
            'host_public_key': host_public, 'authorized_keys': keys}


def validate(args):
    """The ``group`` argument, checked; a dict of its normalized fields
    (``interface`` an ``ipaddress`` interface, the keys canonical).

    :raises GroupError: naming the first field that is wrong.
    """
    if not isinstance(args, dict):
        raise GroupError('group must be an object, got %s'
                         % type(args).__name__)
    name = args.get('name')
    if (not isinstance(name, str) or len(name) > protocol.GROUP_NAME_MAX
            or not _NAME.match(name)):
        _fail('name', 'a lowercase DNS label of at most %d characters'
              % protocol.GROUP_NAME_MAX, name)
    ident = args.get('id')
    if not isinstance(ident, str) or not _ID.match(ident):
        _fail('id', 'letters, digits, ".", "_" or "-", at most %d' % MAX_ID,
              ident)
    size = _integer(args, 'size', 1, MAX_SIZE)
    rank = _integer(args, 'rank', 0, size - 1)
    launcher = args.get('launcher')
    if launcher not in protocol.GROUP_LAUNCHERS:
        _fail('launcher', 'one of %s' % ', '.join(protocol.GROUP_LAUNCHERS),
              launcher)
    ssh = launcher == protocol.GROUP_LAUNCHER_SSH
    mac, interface = _interface(args.get('interface'))
    members = _members(args.get('members'), size, interface, ssh)
    own = members[rank]
    if own['address'] != str(interface.ip):
        _fail('members[%d].address' % rank, 'this member\'s interface '
              'address %s' % interface.ip, own['address'])
    if own['hostname'] != protocol.group_hostname(name, rank):
        _fail('members[%d].hostname' % rank, protocol.group_hostname(
            name, rank), own['hostname'])
    keys = _ssh(args.get('ssh'), ssh)
    if keys and own['host_key'] and (keys['host_public_key']
                                     != own['host_key']):
        # The others would refuse this member's sshd (known_hosts).
        _fail('ssh.host_key', 'the private key of members[%d].host_key'
              % rank, show=False)
    wait = args.get('peer_wait')
    if wait is not None or ssh:
        if (not isinstance(wait, (int, float)) or isinstance(wait, bool)
                or not math.isfinite(wait)
                or not 0 <= wait <= MAX_PEER_WAIT):
            _fail('peer_wait', 'a number of seconds from 0 to %d'
                  % MAX_PEER_WAIT, wait)
    return {'name': name, 'id': ident, 'rank': rank, 'size': size,
            'launcher': launcher, 'mac': mac, 'interface': interface,
            'members': members, 'ssh': keys,
            'peer_wait': float(wait or 0)}
