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

"""Run group arguments for the tests, with keys of the OpenSSH formats.

The keys are made here, not with ssh-keygen (the unit tier's machine may
lack it): the agent reads only their public parts, so a private section
of zeros serves.  test_group checks the parser against ssh-keygen's own
keys where it is installed.
"""

import base64
import json
import os
import struct

from ipa_hardware_manager import group_args

MAC = '52:54:00:12:34:57'
NETWORK = '192.168.50.%d'


def _string(data):
    return struct.pack('>I', len(data)) + data


def blob(seed, kind=b'ssh-ed25519', size=32):
    return _string(kind) + _string(bytes([seed]) * size)


def public(seed, comment=None, kind='ssh-ed25519', size=32):
    """A public key line (``seed`` tells keys apart)."""
    line = '%s %s' % (kind, base64.b64encode(
        blob(seed, kind.encode(), size)).decode('ascii'))
    return line + ' ' + comment if comment else line


def private(seed, cipher=b'none', keys=1):
    """An OpenSSH private key whose public key is public(seed)."""
    kdf = b'none' if cipher == b'none' else b'bcrypt'
    body = (b'openssh-key-v1\0' + _string(cipher) + _string(kdf)
            + _string(b'') + struct.pack('>I', keys) + _string(blob(seed))
            + _string(b'\0' * 64))
    text = base64.b64encode(body).decode('ascii')
    lines = [text[i:i + 70] for i in range(0, len(text), 70)]
    return '\n'.join([group_args.BEGIN] + lines + [group_args.END]) + '\n'


def member_address(rank):
    return NETWORK % (10 + rank)


def group(rank=0, size=3, launcher='ssh', **over):
    """The start step's ``group`` argument of member ``rank``."""
    args = {
        'name': 'job', 'id': 'ab12cd34', 'rank': rank, 'size': size,
        'launcher': launcher,
        'interface': {'mac': MAC.upper(),
                      'address': member_address(rank) + '/24'},
        'members': [{'rank': r, 'hostname': 'job-%d' % r,
                     'address': member_address(r),
                     'host_key': public(100 + r, 'job-%d' % r)}
                    for r in range(size)],
        'ssh': {'private_key': private(1), 'host_key': private(100 + rank),
                'authorized_keys': [public(1, 'job')]},
        'peer_wait': 30,
    }
    args.update(over)
    return args


def fake_sysfs(base, interfaces):
    """A /sys/class/net of ``{name: mac}`` (``(mac, True)``: a NIC, with
    its ``device`` link)."""
    os.makedirs(base, exist_ok=True)
    for name, mac in interfaces.items():
        physical = isinstance(mac, tuple)
        mac = mac[0] if physical else mac
        os.makedirs(os.path.join(base, name))
        with open(os.path.join(base, name, 'address'), 'w') as f:
            f.write(mac + '\n')
        if physical:
            os.symlink('../../devices/pci0000:00/0000:00:03.0',
                       os.path.join(base, name, 'device'))
    return base


class FakeIp:
    """A fake ``ip``: records each call, answers ``-j`` ones from
    ``answers`` (keyed by the arguments after ``-j``, joined)."""

    def __init__(self, answers=None, fail=None):
        self.answers = answers or {}
        self.fail = fail
        self.calls = []

    def __call__(self, args):
        self.calls.append(list(args))
        if self.fail and self.fail == args[:len(self.fail)]:
            raise group_args.GroupError('ip %s failed (exit 2): RTNETLINK '
                                        'answers: Operation not permitted'
                                        % ' '.join(args))
        if args[0] == '-j':
            return json.dumps(self.answers.get(' '.join(args[1:]), []))
        return ''

    @property
    def changes(self):
        """The calls that change something."""
        return [c for c in self.calls if c[0] != '-j']


class FakeClock:
    """time.monotonic and time.sleep of a clock that moves on sleep."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
