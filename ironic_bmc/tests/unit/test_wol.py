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

"""The Wake-on-LAN magic packet, byte for byte."""

import pytest

from ironic_bmc import wol

MAC = '52:54:00:bc:00:01'
RAW = b'\x52\x54\x00\xbc\x00\x01'


def test_packet_bytes_exact():
    packet = wol.magic_packet(MAC)
    assert len(packet) == 102
    assert packet == b'\xff\xff\xff\xff\xff\xff' + RAW * 16


@pytest.mark.parametrize('spelling', [
    '52:54:00:BC:00:01', '52-54-00-bc-00-01', '525400bc0001',
    ' 52:54:00:bc:00:01 '])
def test_mac_spellings(spelling):
    assert wol.mac_bytes(spelling) == RAW


@pytest.mark.parametrize('bad', [
    '', '52:54:00:bc:00', '52:54:00:bc:00:01:02', '52:54:00:bc:00:zz',
    '52:54-00:bc:00:01', '5254.00bc.0001', None])
def test_bad_macs_refused(bad):
    with pytest.raises(ValueError, match='not a MAC address'):
        wol.mac_bytes(bad)


def test_parse_round_trip():
    assert wol.parse_magic_packet(wol.magic_packet(MAC.upper())) == MAC


@pytest.mark.parametrize('password', [b'\x01\x02\x03\x04',
                                      b'\x01\x02\x03\x04\x05\x06'])
def test_parse_accepts_a_secureon_password(password):
    assert wol.parse_magic_packet(wol.magic_packet(MAC) + password) == MAC


@pytest.mark.parametrize('data', [
    b'',
    b'\xff' * 102,                                   # the MAC ff:ff:...
    b'\xff' * 5 + b'\x00' + RAW * 16,                # sync broken
    b'\xff' * 6 + RAW * 15,                          # too short
    b'\xff' * 6 + RAW * 15 + b'\x52\x54\x00\xbc\x00\x02',  # copies differ
    b'\xff' * 6 + RAW * 16 + b'\x00',               # odd trailer
    b'\xff' * 6 + RAW * 16 + b'\x00' * 8,          # too long
])
def test_parse_refuses_what_is_no_magic_packet(data):
    expected = 'ff:ff:ff:ff:ff:ff' if data == b'\xff' * 102 else None
    assert wol.parse_magic_packet(data) == expected
