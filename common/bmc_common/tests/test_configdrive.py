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

import base64
import gzip
import io
import json
import shutil
from unittest import mock

import pytest

from bmc_common import configdrive as cd
from bmc_common.tests import isos

FILES = ['ec2/latest/meta-data.json', 'openstack/latest/meta_data.json',
         'openstack/latest/user_data']


def check(data):
    return cd.check(io.BytesIO(data), len(data))


def files_of(entries):
    return sorted(e.path for e in entries if not e.is_dir)


@pytest.mark.parametrize('joliet,rock_ridge', [(True, True), (False, True)])
def test_names_of_joliet_and_rock_ridge(joliet, rock_ridge):
    data = isos.config_drive(joliet=joliet, rock_ridge=rock_ridge)
    image, entries = check(data)
    assert image.label == 'config-2'
    assert files_of(entries) == FILES
    assert [e.path for e in entries if e.is_dir][:1] == ['ec2']
    user = next(e for e in entries if e.path.endswith('user_data'))
    assert image.read_file(user) == b'#!/bin/sh\necho hi\n'


def test_plain_iso_names_without_extensions():
    data = isos.build({'a/b': b'x'}, joliet=False, rock_ridge=False)
    _image, entries = check(data)
    # (the test builder's ISO names)
    assert [e.path for e in entries] == ['D001', 'D001/F002']


def test_server():
    image, entries = check(isos.config_drive(
        meta={'uuid': 'u-1', 'launch_index': 1,
              'meta': {'container_group': 'mpi',
                       'container_group_size': '2'}},
        extra={'ec2/latest/meta-data.json':
               b'{"reservation-id": "r-k2jx0w7f"}'}))
    assert cd.server(image, entries) == {
        'meta': {'container_group': 'mpi', 'container_group_size': '2'},
        'launch_index': 1, 'reservation_id': 'r-k2jx0w7f'}


def test_server_without_nova_facts():
    image, entries = check(isos.config_drive(meta={'uuid': 'u-1'}))
    assert cd.server(image, entries) == {
        'meta': {}, 'launch_index': None, 'reservation_id': None}
    image, entries = check(isos.config_drive(
        meta={'launch_index': True},
        extra={'ec2/latest/meta-data.json':
               b'{"reservation-id": "r-../x"}'}))
    assert cd.server(image, entries) == {
        'meta': {}, 'launch_index': None, 'reservation_id': None}


@pytest.mark.parametrize('meta', [
    {'meta': ['a']},
    {'meta': {'a': 1}},
    {'meta': {'a': 'x' * 256}},
    {'meta': {'k%d' % i: 'v' for i in range(129)}},
])
def test_server_meta_refused(meta):
    image, entries = check(isos.config_drive(meta=meta))
    with pytest.raises(cd.ConfigDriveError, match='server properties'):
        cd.server(image, entries)


def test_public_keys():
    image, entries = check(isos.config_drive(meta={'public_keys': {
        'b': 'ssh-rsa BBB b\n', 'a': isos.KEY}}))
    assert cd.public_keys(image, entries) == [isos.KEY, 'ssh-rsa BBB b']
    image, entries = check(isos.config_drive(meta={'uuid': 'x'}))
    assert cd.public_keys(image, entries) == []


@pytest.mark.parametrize('meta,error', [
    (b'not json', 'is not JSON'),
    (b'[1]', 'not a JSON object'),
    (json.dumps({'public_keys': 'k'}).encode(), 'not an object'),
    (json.dumps({'public_keys': {'k': 'a\nb'}}).encode(), 'one line'),
    (json.dumps({'public_keys': {'k': 7}}).encode(), 'one line'),
])
def test_public_keys_refused(meta, error):
    data = isos.build({'openstack/latest/meta_data.json': meta})
    image, entries = check(data)
    with pytest.raises(cd.ConfigDriveError, match=error):
        cd.public_keys(image, entries)


def test_label_must_be_config_2():
    with pytest.raises(cd.ConfigDriveError, match="'cidata', not"):
        check(isos.config_drive(label='cidata'))


@pytest.mark.parametrize('data', [b'', b'x' * 40000,
                                  b'\0' * 32768 + b'\1CD002' + b'\0' * 4000])
def test_not_an_iso(data):
    with pytest.raises(cd.ConfigDriveError, match='not an ISO 9660 image'):
        check(data)


def test_truncated():
    data = isos.config_drive()
    with pytest.raises(cd.ConfigDriveError, match='past the end'):
        check(data[:len(data) - 4096])


def _record(data, name):
    """Offset of the plain-tree directory record named ``name``."""
    pos = data.index(bytes([len(name)]) + name)
    return pos - 32


def test_directory_loop_refused():
    data = bytearray(isos.build({'a/b': b'x'}, joliet=False,
                                rock_ridge=False))
    root_extent = data[16 * 2048 + 156 + 2:16 * 2048 + 156 + 6]
    rec = _record(data, b'D001')
    data[rec + 2:rec + 6] = root_extent
    with pytest.raises(cd.ConfigDriveError, match='reached twice'):
        check(bytes(data))


def test_files_sharing_one_big_extent_refused():
    big = b'z' * 300000
    data = bytearray(isos.build({'a': big, 'b': b'y'}, joliet=False,
                                rock_ridge=False))
    first, second = _record(data, b'F001.;1'), _record(data, b'F002.;1')
    data[second + 2:second + 18] = data[first + 2:first + 18]
    with pytest.raises(cd.ConfigDriveError, match='more bytes together'):
        check(bytes(data))


def _set_extent(data, rec, location, length):
    """Point the directory record at ``rec`` at ``length`` bytes from
    sector ``location`` (both byte orders, as ISO 9660 keeps them)."""
    data[rec + 2:rec + 10] = (location.to_bytes(4, 'little')
                              + location.to_bytes(4, 'big'))
    data[rec + 10:rec + 18] = (length.to_bytes(4, 'little')
                               + length.to_bytes(4, 'big'))


def test_directories_naming_overlapping_big_extents_refused():
    """Each directory extent is read once, but 64 directories naming
    overlapping 512 KiB extents (sector n, n+1, ...) of one big file
    would have the walk read 32 MiB of records: refused once the tree's
    directories pass MAX_TOTAL_DIR_BYTES together."""
    import pycdlib
    iso = pycdlib.PyCdlib()
    iso.new(vol_ident='config-2')
    big = b'\0' * (1024 * 1024)
    iso.add_fp(io.BytesIO(big), len(big), '/BIG.;1')
    for i in range(64):
        iso.add_directory('/D%04d' % i)
    out = io.BytesIO()
    iso.write_fp(out)
    data = bytearray(out.getvalue())
    extent = int.from_bytes(
        data[_record(data, b'BIG.;1') + 2:_record(data, b'BIG.;1') + 6],
        'little')
    for i in range(64):
        _set_extent(data, _record(data, b'D%04d' % i), extent + i,
                    512 * 1024)
    with pytest.raises(cd.ConfigDriveError,
                       match='its directories hold more than 4194304 '
                             'bytes of records together'):
        check(bytes(data))
    # Fewer of them fit (each extent is still read whole, overlapping).
    data = bytearray(out.getvalue())
    for i in range(4):
        _set_extent(data, _record(data, b'D%04d' % i), extent + i,
                    512 * 1024)
    _image, entries = check(bytes(data))
    assert len(entries) == 65
    # An honest drive is far below the bound.
    _image, entries = check(isos.config_drive())
    assert files_of(entries) == FILES


def test_an_honest_tree_of_max_files_directories_fits():
    """MAX_FILES directories with long names, as pycdlib lays them out
    (one sector each), fit in MAX_TOTAL_DIR_BYTES in either tree."""
    import pycdlib
    iso = pycdlib.PyCdlib()
    iso.new(vol_ident='config-2', joliet=3, rock_ridge='1.09')
    for i in range(cd.MAX_FILES):
        iso.add_directory('/D%04d' % i, joliet_path='/%s%04d' % ('j' * 60, i),
                          rr_name='%s%04d' % ('r' * 200, i))
    out = io.BytesIO()
    iso.write_fp(out)
    image, entries = check(out.getvalue())
    assert len(entries) == cd.MAX_FILES
    image._joliet_root = None
    assert len(image.entries()) == cd.MAX_FILES


def test_more_than_one_dot_record_refused():
    """A directory's . and .. records are not entries, so they are not
    counted: one of each, or the walk could spend its time on them."""
    data = bytearray(isos.build({'a/b': b'x'}, joliet=False,
                                rock_ridge=False))
    rec = _record(data, b'F002.;1')
    data[rec + 32:rec + 34] = b'\x01\x00'     # a third record named "."
    with pytest.raises(cd.ConfigDriveError,
                       match=r'directory D001 has more than one \. or \.\. '
                             r'record'):
        check(bytes(data))


def test_name_with_a_slash_refused():
    data = bytearray(isos.build({'a': b'x'}, joliet=False, rock_ridge=False))
    rec = _record(data, b'F001.;1')
    data[rec + 33:rec + 40] = b'../a.;1'
    with pytest.raises(cd.ConfigDriveError, match='not a plain name'):
        check(bytes(data))


def test_bounds_of_the_tree():
    data = isos.config_drive()
    with mock.patch.object(cd, 'MAX_FILES', 4):
        with pytest.raises(cd.ConfigDriveError, match='more than 4 files'):
            check(data)
    with mock.patch.object(cd, 'MAX_DEPTH', 1):
        with pytest.raises(cd.ConfigDriveError, match='directories deep'):
            check(data)


def test_rock_ridge_symlink_left_out():
    import pycdlib
    iso = pycdlib.PyCdlib()
    iso.new(rock_ridge='1.09', vol_ident='config-2')
    iso.add_fp(io.BytesIO(b'x'), 1, '/F.;1', rr_name='f')
    iso.add_symlink('/L.;1', rr_symlink_name='l', rr_path='/etc/shadow')
    out = io.BytesIO()
    iso.write_fp(out)
    _image, entries = check(out.getvalue())
    assert [e.path for e in entries] == ['f']


@pytest.mark.skipif(not shutil.which('genisoimage'),
                    reason='genisoimage is not installed')
def test_what_ironic_and_nova_build():
    """A config drive as openstacksdk builds it for Ironic (genisoimage
    -J -r, as Nova): the Joliet and the Rock Ridge trees agree."""
    from openstack.baremetal import configdrive as sdk
    iso = gzip.decompress(base64.b64decode(sdk.build(
        {'public_keys': {'k': isos.KEY}, 'uuid': 'u'},
        user_data=b'#!/bin/sh\necho hi', network_data={'links': []},
        vendor_data={'a': 1})))
    image, entries = check(iso)
    assert cd.public_keys(image, entries) == [isos.KEY]
    assert 'openstack/latest/vendor_data2.json' in files_of(entries)
    image._joliet_root = None
    assert image.entries() == entries
