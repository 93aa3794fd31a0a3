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

"""The Wake-on-LAN magic packet: built by the conductor's ``wol`` power
interface, parsed by the lab's listener.

A magic packet is six bytes 0xFF, then the MAC address of the NIC to
wake, sixteen times (102 bytes), sent in a UDP datagram (port 9, the
"discard" port, by convention; 7 and 0 are also seen).  It carries no
password: whoever can reach the NIC's L2 segment can wake the machine,
and do nothing else with it.  (The optional "SecureOn" password, six
more bytes, is neither sent nor expected here.)

Standard library only, so that the lab imports it without Ironic.  Not in
``bmc_common``: the node's agent never sees a magic packet (its NIC's
firmware does), and ``common/`` goes into the agent ramdisk, whose build
is keyed by a hash of it.
"""

import re

#: The UDP port magic packets go to unless a node names another.
DEFAULT_PORT = 9
#: Where they go unless a node names another: the local broadcast.
DEFAULT_HOST = '255.255.255.255'

SYNC = b'\xff' * 6
REPEAT = 16
#: Bytes of a magic packet (without a SecureOn password).
PACKET_SIZE = len(SYNC) + 6 * REPEAT

_MAC = re.compile(r'^[0-9a-f]{2}([:-]?)[0-9a-f]{2}(\1[0-9a-f]{2}){4}$')


def mac_bytes(mac):
    """The six bytes of ``mac`` (``52:54:00:bc:00:00``, dashes, or bare
    hex; any case).

    :raises: ValueError naming the address when it is not one.
    """
    text = str(mac).strip().lower()
    if not _MAC.match(text):
        raise ValueError('%r is not a MAC address (six hex bytes, e.g. '
                         '52:54:00:bc:00:00)' % (mac,))
    return bytes.fromhex(text.replace(':', '').replace('-', ''))


def format_mac(raw):
    """``52:54:00:bc:00:00`` from six bytes."""
    return ':'.join('%02x' % b for b in raw)


def magic_packet(mac):
    """The magic packet that wakes the NIC of ``mac``."""
    return SYNC + mac_bytes(mac) * REPEAT


def parse_magic_packet(data):
    """The MAC address (lower case, colons) a datagram wakes, or None
    when it is no magic packet.

    Accepts what NICs accept: the sync bytes and sixteen copies of one
    MAC, with a SecureOn password (4 or 6 bytes) or nothing after them.
    """
    data = bytes(data)
    if len(data) not in (PACKET_SIZE, PACKET_SIZE + 4, PACKET_SIZE + 6):
        return None
    if not data.startswith(SYNC):
        return None
    raw = data[len(SYNC):len(SYNC) + 6]
    if data[len(SYNC):PACKET_SIZE] != raw * REPEAT:
        return None
    return format_mac(raw)
