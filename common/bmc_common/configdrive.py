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

"""A config drive (an ISO 9660 image labelled ``config-2``), read.

Every byte of a config drive is the tenant's: this reader is written for
hostile images, and both sides use it, so that what the conductor
accepts is what the node extracts.  It reads only what a config drive
needs: the primary volume descriptor (the label), the file tree with the
names of the Joliet tree (what Nova's ``genisoimage -J -r`` and Ironic's
``mkisofs`` write), else the Rock Ridge names, else the plain ISO 9660
names.  Files are regular files: a Rock Ridge symlink, device or FIFO is
left out, and nothing is ever followed.

Bounded: the image is read through ``seek``/``read`` (never whole), each
extent must lie inside it, a directory extent is read once (no loops),
the tree is at most :data:`MAX_DEPTH` deep and :data:`MAX_FILES` entries
large, its directories together at most :data:`MAX_TOTAL_DIR_BYTES`
(many directories naming overlapping big extents are refused), a
directory holds one ``.`` and one ``..`` record, and its files together
hold at most the image's size (many entries naming one big extent are
refused).

Standard library only (the agent ramdisk installs this package alone).
"""

import collections
import json
import posixpath
import re

SECTOR = 2048
#: The volume label a config drive carries (cloud-init looks for it).
LABEL = 'config-2'
#: Entries (files and directories) a config drive may hold.
MAX_FILES = 1024
#: Directory levels below the root.
MAX_DEPTH = 16
#: Bytes of one directory's records.
MAX_DIR_BYTES = 1024 * 1024
#: Bytes of directory records read for the whole tree, every directory
#: extent and Rock Ridge continuation area counted each time it is read
#: (directories may name overlapping extents, each read whole).  Walking
#: records costs about 16 ms of CPU per MiB (1024 directories naming
#: overlapping 1 MiB extents took 16 s), so this bounds any tree to well
#: under a second.  An honest drive is far below: Nova's has a score of
#: directories of one 2 KiB sector each (about 40 KiB), and even 1024
#: directories (MAX_FILES) with 200-character names, one sector each as
#: genisoimage and pycdlib write them, read about 2.5 MiB.
MAX_TOTAL_DIR_BYTES = 4 * 1024 * 1024
#: Bytes of meta_data.json read for its public keys.
MAX_META_DATA = 1024 * 1024
#: Public keys taken from meta_data.json, and bytes of one.
MAX_KEYS = 64
MAX_KEY_BYTES = 16 * 1024
#: Rock Ridge continuation areas followed for one record.
_MAX_CE = 8
_JOLIET_ESCAPES = (b'%/@', b'%/C', b'%/E')
#: Where the OpenStack metadata of a config drive is.
META_DATA = 'openstack/latest/meta_data.json'
#: Nova's EC2-style metadata: the request's ``reservation-id``.
EC2_META_DATA = 'ec2/latest/meta-data.json'
#: Nova's reservation ids: ``r-`` and eight characters.
RESERVATION = re.compile(r'^r-[a-z0-9]{1,32}$')
#: Server properties read (Nova allows 128 by default).
MAX_SERVER_META = 128
USER_DATA = 'openstack/latest/user_data'

Entry = collections.namedtuple('Entry', 'path is_dir offset size')
Entry.__doc__ = """A file or directory of the image: ``path`` (relative,
``/``-separated), ``is_dir``, the byte ``offset`` and ``size`` of a
file's data (0 for a directory)."""


class ConfigDriveError(ValueError):
    """The image is not a config drive this reader accepts; says why."""


def _le32(buf, offset):
    return int.from_bytes(buf[offset:offset + 4], 'little')


def _le16(buf, offset):
    return int.from_bytes(buf[offset:offset + 2], 'little')


class Image:
    """The config drive in ``fileobj`` (``size`` bytes long)."""

    def __init__(self, fileobj, size):
        self.f = fileobj
        self.size = size
        self.label = None
        self._dir_bytes_left = MAX_TOTAL_DIR_BYTES
        self._pvd_root = None
        self._joliet_root = None
        self._read_descriptors()

    def _read(self, offset, length):
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ConfigDriveError(
                'an extent (%d bytes at %d) lies past the end of the image '
                '(%d bytes)' % (length, offset, self.size))
        self.f.seek(offset)
        data = self.f.read(length)
        if len(data) != length:
            raise ConfigDriveError('the image ends early')
        return data

    def _read_descriptors(self):
        block = 16
        while True:
            if block > 16 + 64:
                raise ConfigDriveError('no volume descriptor terminator in '
                                       'the first 64 descriptors')
            if (block + 1) * SECTOR > self.size:
                raise ConfigDriveError('not an ISO 9660 image (%d bytes, no '
                                       'volume descriptors)' % self.size)
            vd = self._read(block * SECTOR, SECTOR)
            if vd[1:6] != b'CD001':
                raise ConfigDriveError('not an ISO 9660 image (no CD001 '
                                       'volume descriptor at sector %d)'
                                       % block)
            kind = vd[0]
            if kind == 255:
                break
            if kind == 1 and self._pvd_root is None:
                if _le16(vd, 128) != SECTOR:
                    raise ConfigDriveError('logical block size %d; only %d '
                                           'is supported' % (_le16(vd, 128),
                                                             SECTOR))
                self.label = vd[40:72].decode('ascii', 'replace').rstrip(' ')
                self._pvd_root = vd[156:190]
            elif kind == 2 and vd[88:91] in _JOLIET_ESCAPES:
                if _le16(vd, 128) == SECTOR:
                    self._joliet_root = vd[156:190]
            block += 1
        if self._pvd_root is None:
            raise ConfigDriveError('not an ISO 9660 image (no primary volume '
                                   'descriptor)')

    # -- the tree --------------------------------------------------------

    def entries(self):
        """Every file and directory, parents first.

        :raises ConfigDriveError: naming what is wrong.
        """
        if self._joliet_root is not None:
            names = 'joliet'
            root = self._joliet_root
        else:
            root = self._pvd_root
            names = 'rockridge' if self._has_rock_ridge(root) else 'iso'
        found = []
        seen = set()
        budget = [self.size]
        self._dir_bytes_left = MAX_TOTAL_DIR_BYTES
        self._walk(root, '', 0, names, found, seen, budget)
        return found

    def _has_rock_ridge(self, root_record):
        location, length = _le32(root_record, 2), _le32(root_record, 10)
        if length == 0:
            return False
        first = self._read(location * SECTOR, min(length, SECTOR))
        dot_len = first[0]
        if dot_len < 34:
            return False
        su = first[34:dot_len]
        return su[:2] == b'SP' and su[4:6] == b'\xbe\xef'

    def _spend_dir_bytes(self, length):
        self._dir_bytes_left -= length
        if self._dir_bytes_left < 0:
            raise ConfigDriveError('its directories hold more than %d bytes '
                                   'of records together (directory '
                                   'extents and Rock Ridge continuation '
                                   'areas, each counted every time it is '
                                   'read)' % MAX_TOTAL_DIR_BYTES)

    def _records(self, location, length):
        if length > MAX_DIR_BYTES:
            raise ConfigDriveError('a directory of %d bytes (at most %d)'
                                   % (length, MAX_DIR_BYTES))
        self._spend_dir_bytes(length)
        data = self._read(location * SECTOR, length)
        pos = 0
        while pos < length:
            rec_len = data[pos]
            if rec_len == 0:
                # The rest of the sector is padding.
                pos = (pos // SECTOR + 1) * SECTOR
                continue
            if rec_len < 34 or pos + rec_len > length or (
                    pos // SECTOR != (pos + rec_len - 1) // SECTOR):
                raise ConfigDriveError('a malformed directory record at '
                                       'byte %d of the directory at sector '
                                       '%d' % (pos, location))
            yield data[pos:pos + rec_len]
            pos += rec_len

    def _walk(self, record, path, depth, names, found, seen, budget):
        location, length = _le32(record, 2), _le32(record, 10)
        if location in seen:
            raise ConfigDriveError('directory %s is reached twice (a loop)'
                                   % (path or '/'))
        seen.add(location)
        in_dir = set()
        dots = set()
        for rec in self._records(location, length):
            name_len = rec[32]
            ident = rec[33:33 + name_len]
            if 33 + name_len > len(rec):
                raise ConfigDriveError('a directory record of %s whose name '
                                       'runs past it' % (path or '/'))
            if ident in (b'\x00', b'\x01'):
                # . and .. (once each: not entries, but not free either)
                if ident in dots:
                    raise ConfigDriveError('directory %s has more than one '
                                           '. or .. record' % (path or '/'))
                dots.add(ident)
                continue
            flags = rec[25]
            if rec[1] or rec[26] or rec[27]:
                raise ConfigDriveError('%s: extended attributes or '
                                       'interleaving are not supported'
                                       % (path or '/'))
            if flags & 0x80:
                raise ConfigDriveError('%s: multi-extent files are not '
                                       'supported' % (path or '/'))
            su_start = 33 + name_len + (1 - name_len % 2)
            rr = self._rock_ridge(rec[su_start:]) if names == 'rockridge' \
                else {}
            if rr.get('relocated'):
                continue    # a directory moved deeper; found by its CL
            name = self._name(ident, names, rr, flags & 0x02)
            if (not name or name in ('.', '..') or '/' in name
                    or '\0' in name):
                raise ConfigDriveError('a file name %r in %s that is not a '
                                       'plain name' % (name, path or '/'))
            if name in in_dir:
                raise ConfigDriveError('%s is named twice'
                                       % posixpath.join(path, name))
            in_dir.add(name)
            child = posixpath.join(path, name) if path else name
            if len(found) >= MAX_FILES:
                raise ConfigDriveError('more than %d files and directories'
                                       % MAX_FILES)
            extent, size = _le32(rec, 2), _le32(rec, 10)
            if flags & 0x02:
                if depth + 1 > MAX_DEPTH:
                    raise ConfigDriveError('%s is more than %d directories '
                                           'deep' % (child, MAX_DEPTH))
                found.append(Entry(child, True, 0, 0))
                self._walk(rec, child, depth + 1, names, found, seen, budget)
                continue
            if rr.get('special'):
                continue    # a symlink, device, FIFO or socket: left out
            offset = extent * SECTOR
            if size and offset + size > self.size:
                raise ConfigDriveError('%s: its data (%d bytes at %d) lies '
                                       'past the end of the image'
                                       % (child, size, offset))
            budget[0] -= size
            if budget[0] < 0:
                raise ConfigDriveError('its files hold more bytes together '
                                       'than the image (%d bytes)'
                                       % self.size)
            found.append(Entry(child, False, offset, size))

    @staticmethod
    def _name(ident, names, rr, is_dir):
        if names == 'joliet':
            if len(ident) % 2:
                raise ConfigDriveError('a Joliet name of odd length')
            try:
                text = ident.decode('utf-16-be')
            except UnicodeDecodeError:
                raise ConfigDriveError('a Joliet name that is not UCS-2'
                                       ) from None
        elif 'name' in rr:
            try:
                return rr['name'].decode('utf-8')
            except UnicodeDecodeError:
                raise ConfigDriveError('a Rock Ridge name that is not '
                                       'UTF-8') from None
        else:
            text = ident.decode('ascii', 'replace')
        if not is_dir:
            text = text.split(';', 1)[0]
            if text.endswith('.'):
                text = text[:-1]
        return text

    def _rock_ridge(self, su):
        """The Rock Ridge entries of a record that matter here: ``name``
        (NM), ``special`` (PX mode not a regular file or directory, or
        SL), ``relocated`` (RE)."""
        out = {}
        name = b''
        hops = 0
        while su:
            pos = 0
            next_area = None
            while pos + 4 <= len(su):
                sig, length = su[pos:pos + 2], su[pos + 2]
                if length < 4 or pos + length > len(su):
                    break
                body = su[pos + 4:pos + length]
                if sig == b'NM' and body and not body[0] & 0x06:
                    name += body[1:]
                elif sig == b'PX' and len(body) >= 4:
                    kind = _le32(body, 0) & 0o170000
                    if kind not in (0o100000, 0o040000):
                        out['special'] = True
                elif sig == b'SL':
                    out['special'] = True
                elif sig == b'RE':
                    out['relocated'] = True
                elif sig == b'CE' and len(body) >= 24:
                    next_area = (_le32(body, 0) * SECTOR + _le32(body, 8),
                                 _le32(body, 16))
                elif sig == b'ST':
                    break
                pos += length
            su = b''
            if next_area and hops < _MAX_CE and next_area[1] <= SECTOR:
                hops += 1
                self._spend_dir_bytes(next_area[1])
                su = self._read(*next_area)
        if name:
            out['name'] = name
        return out

    def read_file(self, entry, limit=None):
        """The bytes of a file entry (at most ``limit``)."""
        size = entry.size if limit is None else min(entry.size, limit)
        return self._read(entry.offset, size) if size else b''


def check(fileobj, size):
    """The entries of a config drive, checked: an ISO 9660 image
    labelled :data:`LABEL` whose tree this reader accepts.

    :returns: ``(image, entries)``.
    :raises ConfigDriveError: naming what is wrong.
    """
    image = Image(fileobj, size)
    if image.label != LABEL:
        raise ConfigDriveError('its volume label is %r, not %r'
                               % (image.label, LABEL))
    return image, image.entries()


def _json_object(image, entries, path):
    """The JSON object of file ``path`` of the drive, or None when it has
    no such file.

    :raises ConfigDriveError: too large, not JSON, not an object.
    """
    entry = next((e for e in entries
                  if e.path == path and not e.is_dir), None)
    if entry is None:
        return None
    if entry.size > MAX_META_DATA:
        raise ConfigDriveError('%s is %d bytes (at most %d)'
                               % (path, entry.size, MAX_META_DATA))
    try:
        value = json.loads(image.read_file(entry))
    except ValueError as exc:
        raise ConfigDriveError('%s is not JSON: %s' % (path, exc)
                               ) from None
    if not isinstance(value, dict):
        raise ConfigDriveError('%s is not a JSON object' % path)
    return value


def server(image, entries):
    """What Nova says of the server in the drive: ``{"meta": {name:
    value} (the server's properties, text), "launch_index": int or None
    (its place in a multi-create request), "reservation_id": str or None
    (that request's, shared by its servers)}``.

    :raises ConfigDriveError: a file is malformed.
    """
    meta = _json_object(image, entries, META_DATA) or {}
    props = meta.get('meta') or {}
    if not isinstance(props, dict) or len(props) > MAX_SERVER_META or any(
            not isinstance(k, str) or not isinstance(v, str)
            or len(k) > 255 or len(v) > 255 for k, v in props.items()):
        raise ConfigDriveError('%s: meta is not an object of at most %d '
                               'server properties (text, at most 255 '
                               'characters each)' % (META_DATA,
                                                     MAX_SERVER_META))
    index = meta.get('launch_index')
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        index = None
    ec2 = _json_object(image, entries, EC2_META_DATA) or {}
    reservation = ec2.get('reservation-id')
    if not (isinstance(reservation, str)
            and RESERVATION.match(reservation)):
        reservation = None
    return {'meta': dict(props), 'launch_index': index,
            'reservation_id': reservation}


def public_keys(image, entries):
    """The SSH public keys of ``openstack/latest/meta_data.json``
    (``public_keys``, an object of name to key, as Nova writes it), in
    the order of their names; [] when there are none.  A key is one line
    of printable text.

    :raises ConfigDriveError: meta_data.json is not a JSON object, or a
        key is not a line of text.
    """
    meta = _json_object(image, entries, META_DATA)
    if meta is None:
        return []
    keys = meta.get('public_keys') or {}
    if isinstance(keys, list):
        keys = {str(i): k for i, k in enumerate(keys)}
    if not isinstance(keys, dict):
        raise ConfigDriveError('%s: public_keys is not an object of names '
                               'to keys' % META_DATA)
    if len(keys) > MAX_KEYS:
        raise ConfigDriveError('%s: more than %d public keys'
                               % (META_DATA, MAX_KEYS))
    out = []
    for name in sorted(keys, key=str):
        key = keys[name]
        if (not isinstance(key, str) or len(key) > MAX_KEY_BYTES
                or not key.strip()
                or any(c in key.strip() for c in '\r\n\0')):
            raise ConfigDriveError('%s: public key %r is not one line of '
                                   'text' % (META_DATA, name))
        out.append(key.strip())
    return out
