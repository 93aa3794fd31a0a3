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

import errno
import os
import stat

import pytest

from ironic_bmc.image import exceptions as exc
from ironic_bmc.image import layers
from bmc_lab import ociimage
from bmc_lab.ociimage import Entry

ROOT = os.geteuid() == 0


def apply(tmp_path, layer_list, compression=None, same_owner=None,
          max_size=None):
    tree = tmp_path / 'tree'
    tree.mkdir(exist_ok=True)
    with layers.LayerApplier(str(tree), same_owner=same_owner,
                             max_size=max_size) as applier:
        for i, entries in enumerate(layer_list):
            blob, _, _ = ociimage.make_layer(entries, compression)
            path = tmp_path / f'layer{i}'
            path.write_bytes(blob)
            applier.apply_file(str(path), f'sha256:layer{i}')
        info = applier.finish()
    return tree, info


@pytest.fixture
def outside(tmp_path):
    """A directory outside the tree with a secret in it."""
    d = tmp_path / 'outside'
    d.mkdir()
    (d / 'secret').write_text('secret')
    return d


def snapshot(path):
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            data = None
            if stat.S_ISREG(st.st_mode):
                with open(full, 'rb') as f:
                    data = f.read()
            out[full] = (st.st_mode, st.st_nlink, data)
    return out


def test_files_modes_mtimes(tmp_path):
    tree, info = apply(tmp_path, [[
        Entry('etc', 'dir', mode=0o750, mtime=1111),
        Entry('etc/conf', data=b'hello', mode=0o640, mtime=2222),
        Entry('bin/tool', data=b'#!/bin/sh\n', mode=0o4755, mtime=3333),
        Entry('ro', 'dir', mode=0o555),
        Entry('ro/file', data=b'x', mode=0o444),
    ]], compression='gzip')
    st = os.lstat(tree / 'etc/conf')
    assert (tree / 'etc/conf').read_bytes() == b'hello'
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_mtime == 2222
    assert stat.S_IMODE(os.lstat(tree / 'bin/tool').st_mode) == 0o4755
    # Directory metadata is applied after its content was written.
    st = os.lstat(tree / 'etc')
    assert stat.S_IMODE(st.st_mode) == 0o750
    assert st.st_mtime == 1111
    # Implicit parents are created 0755.
    assert stat.S_IMODE(os.lstat(tree / 'bin').st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(tree / 'ro').st_mode) == 0o555
    assert info.unpacked_size == len(b'hello') + len(b'#!/bin/sh\n') + 1


@pytest.mark.skipif(not ROOT, reason='needs root to chown')
def test_ownership_applied_as_root(tmp_path):
    tree, info = apply(tmp_path, [[
        Entry('home/u', 'dir', uid=1000, gid=1001),
        Entry('home/u/f', data=b'x', uid=1000, gid=1001),
        Entry('home/u/l', 'symlink', linkname='f', uid=1002, gid=1003),
    ]])
    assert os.lstat(tree / 'home/u/f')[4:6] == (1000, 1001)
    assert os.lstat(tree / 'home/u')[4:6] == (1000, 1001)
    assert os.lstat(tree / 'home/u/l')[4:6] == (1002, 1003)
    assert info.owners == {}


def test_ownership_recorded_without_same_owner(tmp_path):
    tree, info = apply(tmp_path, [[
        Entry('home/u', 'dir', uid=1000, gid=1001, mode=0o700),
        Entry('home/u/f', data=b'x', uid=1000, gid=1001, mode=0o600),
        Entry('root-file', data=b'x'),
    ]], same_owner=False)
    assert info.owners == {'home/u': (1000, 1001, 0o700),
                           'home/u/f': (1000, 1001, 0o600)}
    assert os.lstat(tree / 'home/u/f').st_uid == os.geteuid()


def test_symlinks_verbatim(tmp_path):
    tree, _ = apply(tmp_path, [[
        Entry('abs', 'symlink', linkname='/etc/passwd'),
        Entry('rel', 'symlink', linkname='../../../x', mtime=1234),
    ]])
    assert os.readlink(tree / 'abs') == '/etc/passwd'
    assert os.readlink(tree / 'rel') == '../../../x'
    assert os.lstat(tree / 'rel').st_mtime == 1234


def test_hardlinks(tmp_path):
    tree, info = apply(tmp_path, [
        [Entry('a/f', data=b'data')],
        [Entry('b/g', 'hardlink', linkname='a/f')],
    ])
    assert os.lstat(tree / 'a/f').st_ino == os.lstat(tree / 'b/g').st_ino
    assert os.lstat(tree / 'a/f').st_nlink == 2
    assert info.unpacked_size == 4


def test_whiteout(tmp_path):
    tree, _ = apply(tmp_path, [
        [Entry('d/keep', data=b'1'), Entry('d/gone', data=b'2'),
         Entry('d/sub/x', data=b'3'), Entry('top', data=b'4')],
        [ociimage.whiteout('d/gone'), ociimage.whiteout('d/sub'),
         ociimage.whiteout('top'), ociimage.whiteout('never-existed')],
    ])
    assert sorted(os.listdir(tree / 'd')) == ['keep']
    assert sorted(os.listdir(tree)) == ['d']


def test_whiteout_applies_to_lower_layers_only(tmp_path):
    tree, _ = apply(tmp_path, [
        [Entry('f', data=b'old')],
        [Entry('f', data=b'new'), ociimage.whiteout('f')],
    ])
    assert (tree / 'f').read_bytes() == b'new'


# A directory the upper layer replaces by a non-directory, with whiteouts
# of the directory's former children below the new entry.  umoci repack
# (0.4.7) writes the entry, then one whiteout per former child (sorted by
# path: the entry always comes first); older umoci wrote a whiteout for
# every path below; whiteouts before the entry work as ever.
LOWER_DIR = [Entry('d/inner', data=b'1'), Entry('d/sub/z', data=b'2'),
             Entry('keep', data=b'k')]
DIR_REPLACED = {
    'file-then-whiteouts': [
        Entry('d', data=b'now a file'), ociimage.whiteout('d/inner'),
        ociimage.whiteout('d/sub')],
    'file-then-nested-whiteouts': [
        Entry('d', data=b'now a file'), ociimage.whiteout('d/inner'),
        ociimage.whiteout('d/sub'), ociimage.whiteout('d/sub/z')],
    'whiteouts-then-file': [
        ociimage.whiteout('d/inner'), ociimage.whiteout('d/sub'),
        Entry('d', data=b'now a file')],
    'file-then-opaque': [
        Entry('d', data=b'now a file'), ociimage.opaque('d'),
        ociimage.opaque('d/sub')],
    'hardlink-then-whiteouts': [
        Entry('d', 'hardlink', linkname='keep'),
        ociimage.whiteout('d/inner')],
    'fifo-then-whiteouts': [
        Entry('d', 'fifo'), ociimage.whiteout('d/sub')],
}


@pytest.mark.parametrize('case', sorted(DIR_REPLACED))
def test_whiteout_below_a_non_directory_of_the_same_layer(tmp_path, case):
    tree, _ = apply(tmp_path, [LOWER_DIR, DIR_REPLACED[case]])
    st = os.lstat(tree / 'd')
    assert not stat.S_ISDIR(st.st_mode)
    if stat.S_ISREG(st.st_mode):
        assert (tree / 'd').read_bytes() in (b'now a file', b'k')
    assert (tree / 'keep').read_bytes() == b'k'
    assert sorted(os.listdir(tree)) == ['d', 'keep']


def test_whiteout_below_a_symlink_of_the_same_layer(tmp_path, outside):
    """usr merge as umoci writes it: ``lib`` becomes a symlink to
    ``usr/lib`` and ``lib/.wh.libc.so`` names the lower ``lib/libc.so``.
    The whiteout is a no-op: it neither follows the symlink (``usr/lib``
    keeps its file) nor errs; one to a directory outside the tree touches
    nothing there."""
    before = snapshot(outside)
    tree, _ = apply(tmp_path, [
        [Entry('lib/libc.so', data=b'old'), Entry('usr/lib/libc.so',
                                                  data=b'new'),
         Entry('etc/x/secret', data=b'lower')],
        [Entry('lib', 'symlink', linkname='usr/lib'),
         ociimage.whiteout('lib/libc.so'),
         Entry('etc/x', 'symlink', linkname=str(outside)),
         ociimage.whiteout('etc/x/secret'), ociimage.opaque('etc/x')],
    ])
    assert os.readlink(tree / 'lib') == 'usr/lib'
    assert (tree / 'usr/lib/libc.so').read_bytes() == b'new'
    assert os.readlink(tree / 'etc/x') == str(outside)
    assert snapshot(outside) == before


def test_whiteouts_of_lower_paths_still_remove_them(tmp_path):
    """In a layer that replaced a directory by a file, whiteouts of other
    paths of the lower layers remove them."""
    tree, _ = apply(tmp_path, [
        LOWER_DIR + [Entry('other/x', data=b'x'), Entry('other/y',
                                                        data=b'y'),
                     Entry('gone', 'dir'), Entry('gone/z', data=b'z')],
        DIR_REPLACED['file-then-whiteouts'] + [
            ociimage.whiteout('other/x'), ociimage.whiteout('gone'),
            ociimage.whiteout('gone/z')],
    ])
    assert (tree / 'd').read_bytes() == b'now a file'
    assert os.listdir(tree / 'other') == ['y']
    assert sorted(os.listdir(tree)) == ['d', 'keep', 'other']


def test_whiteout_below_a_lower_non_directory_is_refused(tmp_path):
    """Only a non-directory of the same layer makes a whiteout below it a
    no-op; below a lower layer's file it is a malformed layer."""
    with pytest.raises(exc.UnsafeLayer,
                       match='"f/.wh.x" has a parent "f" that is not a '
                             'directory'):
        apply(tmp_path, [[Entry('f', data=b'f')],
                         [ociimage.whiteout('f/x')]])


def test_directory_replaced_by_a_file_and_a_directory_again(tmp_path):
    """Three layers, as umoci writes them: a directory, a file with the
    whiteouts of the directory's children, a directory again."""
    tree, _ = apply(tmp_path, [
        [Entry('x/dfd', 'dir'), Entry('x/dfd/one', data=b'1')],
        [Entry('x/dfd', data=b'file'), ociimage.whiteout('x/dfd/one')],
        [Entry('x/dfd', 'dir', mode=0o750), Entry('x/dfd/two', data=b'2')],
    ])
    assert os.listdir(tree / 'x/dfd') == ['two']
    assert stat.S_IMODE(os.lstat(tree / 'x/dfd').st_mode) == 0o750


@pytest.mark.parametrize('marker_first', [True, False])
def test_opaque_directory(tmp_path, marker_first):
    upper = [Entry('d/new', data=b'n'), Entry('d/sub', 'dir'),
             Entry('d/sub/z', data=b'z')]
    marker = [ociimage.opaque('d')]
    tree, _ = apply(tmp_path, [
        [Entry('d/x', data=b'x'), Entry('d/sub/y', data=b'y'),
         Entry('other/keep', data=b'k')],
        marker + upper if marker_first else upper + marker,
    ])
    assert sorted(os.listdir(tree / 'd')) == ['new', 'sub']
    assert os.listdir(tree / 'd/sub') == ['z']
    assert os.listdir(tree / 'other') == ['keep']


def test_replace_types(tmp_path):
    tree, _ = apply(tmp_path, [
        [Entry('a/inner', data=b'1'), Entry('b', data=b'2'),
         Entry('c', 'symlink', linkname='/nowhere')],
        [Entry('a', data=b'file now'), Entry('b', 'dir'),
         Entry('b/x', data=b'3'), Entry('c', data=b'plain')],
    ])
    assert (tree / 'a').read_bytes() == b'file now'
    assert (tree / 'b/x').read_bytes() == b'3'
    assert not os.path.islink(tree / 'c')


def test_replacing_symlink_does_not_follow_it(tmp_path, outside):
    before = snapshot(outside)
    tree, _ = apply(tmp_path, [
        [Entry('f', 'symlink', linkname=str(outside / 'secret'))],
        [Entry('f', data=b'mine', mode=0o600)],
    ])
    assert snapshot(outside) == before
    assert (tree / 'f').read_bytes() == b'mine'


@pytest.mark.skipif(not ROOT, reason='needs root for mknod')
def test_device_nodes_as_root(tmp_path):
    tree, info = apply(tmp_path, [[
        Entry('dev/null', 'chr', devmajor=1, devminor=3, mode=0o666),
        Entry('dev/loop0', 'blk', devmajor=7, devminor=0, mode=0o660,
              gid=6),
        Entry('run/fifo', 'fifo', mode=0o600),
    ]])
    st = os.lstat(tree / 'dev/null')
    assert stat.S_ISCHR(st.st_mode)
    assert os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3
    assert stat.S_IMODE(st.st_mode) == 0o666
    st = os.lstat(tree / 'dev/loop0')
    assert stat.S_ISBLK(st.st_mode) and st.st_gid == 6
    assert stat.S_ISFIFO(os.lstat(tree / 'run/fifo').st_mode)
    assert info.devices == {}


def test_device_nodes_recorded_without_same_owner(tmp_path):
    tree, info = apply(tmp_path, [
        [Entry('dev/null', 'chr', devmajor=1, devminor=3, mode=0o666),
         Entry('dev/gone', 'chr', devmajor=1, devminor=5)],
        [ociimage.whiteout('dev/gone')],
    ], same_owner=False)
    assert not os.path.lexists(tree / 'dev/null')
    assert set(info.devices) == {'dev/null'}
    dev = info.devices['dev/null']
    assert (dev.kind, dev.major, dev.minor, dev.mode) == ('c', 1, 3, 0o666)


def test_zstd_and_plain_layers(tmp_path):
    tree, _ = apply(tmp_path, [[Entry('z', data=b'zstd')]],
                    compression='zstd')
    assert (tree / 'z').read_bytes() == b'zstd'


def test_xattrs(tmp_path):
    # Whether this filesystem keeps user xattrs at all, asked before the
    # applier runs: after it, a missing xattr is the applier's fault.
    probe = tmp_path / 'probe'
    probe.write_bytes(b'')
    try:
        os.setxattr(probe, 'user.test', b'probe')
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            pytest.skip('no user xattrs on this filesystem')
        raise
    tree, _ = apply(tmp_path, [
        [Entry('f', data=b'x', xattrs={'user.test': b'value'}),
         Entry('d', 'dir', xattrs={'user.a': b'1', 'user.b': b'2'}),
         Entry('.', 'dir', xattrs={'user.root': b'r'})],
        # A directory's later entry replaces its xattrs whole.
        [Entry('d', 'dir', mode=0o700, xattrs={'user.a': b'3'})],
    ])
    assert os.getxattr(tree / 'f', 'user.test') == b'value'
    assert os.listxattr(tree / 'd') == ['user.a']
    assert os.getxattr(tree / 'd', 'user.a') == b'3'
    assert os.getxattr(tree, 'user.root') == b'r'


def test_max_size(tmp_path):
    with pytest.raises(exc.ImageTooLarge):
        apply(tmp_path, [[Entry('big', data=b'x' * 5000)]], max_size=4096)


def test_empty_entries_count_against_the_size(tmp_path):
    """Directories, symlinks and empty files are not free: 64 of them at
    512 bytes each pass a 16 KiB bound with no byte of content."""
    entries = ([Entry('d%d' % i, 'dir') for i in range(32)]
               + [Entry('e%d' % i, data=b'') for i in range(32)])
    (tmp_path / 'a').mkdir()
    (tmp_path / 'b').mkdir()
    with pytest.raises(exc.ImageTooLarge, match='512 bytes per entry'):
        apply(tmp_path / 'a', [entries], max_size=16 * 1024)
    apply(tmp_path / 'b', [entries[:16]], max_size=16 * 1024)


def test_garbage_is_refused(tmp_path):
    tree = tmp_path / 'tree'
    tree.mkdir()
    blob = tmp_path / 'blob'
    blob.write_bytes(b'\x1f\x8b' + b'not gzip at all' * 10)
    with (layers.LayerApplier(str(tree)) as applier,
          pytest.raises(exc.UnsafeLayer, match='sha256:bad')):
        applier.apply_file(str(blob), 'sha256:bad')


ESCAPES = {
    'dotdot': ([[Entry('../outside/evil', data=b'x')]], '../outside/evil'),
    'dotdot-inner': ([[Entry('a/../../outside/evil', data=b'x')]],
                     'a/../../outside/evil'),
    'absolute': ([[Entry('{outside}/evil', data=b'x')]], '{outside}/evil'),
    'symlink-abs': ([[Entry('a', 'symlink', linkname='{outside}'),
                      Entry('a/secret', data=b'owned')]], 'a/secret'),
    'symlink-rel': ([[Entry('a', 'symlink', linkname='../../..'),
                      Entry('a/evil', data=b'x')]], 'a/evil'),
    'symlink-next-layer': ([[Entry('etc', 'symlink', linkname='{outside}')],
                            [Entry('etc/secret', data=b'owned')]],
                           'etc/secret'),
    'symlink-dir-entry': ([[Entry('a', 'symlink', linkname='{outside}'),
                            Entry('a/sub', 'dir')]], 'a/sub'),
    'hardlink-dotdot': ([[Entry('h', 'hardlink',
                                linkname='../outside/secret')]], 'h'),
    'hardlink-abs': ([[Entry('h', 'hardlink',
                             linkname='{outside}/secret')]], 'h'),
    'hardlink-via-symlink': ([[Entry('a', 'symlink', linkname='{outside}'),
                               Entry('h', 'hardlink',
                                     linkname='a/secret')]], 'h'),
    'hardlink-missing': ([[Entry('h', 'hardlink', linkname='nope')]], 'h'),
    'whiteout-via-symlink': ([[Entry('a', 'symlink', linkname='{outside}')],
                              [ociimage.whiteout('a/secret')]],
                             'a/.wh.secret'),
    'opaque-via-symlink': ([[Entry('a', 'symlink', linkname='{outside}')],
                            [ociimage.opaque('a')]], 'a/.wh..wh..opq'),
}


@pytest.mark.parametrize('case', sorted(ESCAPES))
def test_escape_refused(tmp_path, outside, case):
    layer_list, bad = ESCAPES[case]
    layer_list = [[Entry(**{**e.__dict__,
                            'name': e.name.format(outside=outside),
                            'linkname': e.linkname.format(outside=outside)})
                   for e in layer] for layer in layer_list]
    bad = bad.format(outside=outside)
    before = snapshot(outside)
    with pytest.raises(exc.UnsafeLayer) as raised:
        apply(tmp_path, layer_list)
    message = str(raised.value)
    assert f'sha256:layer{len(layer_list) - 1}' in message
    assert bad in message
    assert snapshot(outside) == before
    assert os.listdir(tmp_path) != []
    # Nothing was created next to the tree either.
    assert sorted(p for p in os.listdir(tmp_path)
                  if not p.startswith('layer')) == ['outside', 'tree']


# --- hard limits on what a layer may make the conductor do ----------------

def _apply_with(tmp_path, entries, limits, fmt=None):
    """Apply one uncompressed layer, built by tarfile, under ``limits``."""
    import io
    import tarfile
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode='w',
                      format=fmt or tarfile.PAX_FORMAT) as t:
        for entry in entries:
            ti = entry.tarinfo()
            t.addfile(ti, io.BytesIO(entry.data) if ti.isreg() else None)
    raw.seek(0)
    tree = tmp_path / 'tree'
    tree.mkdir(exist_ok=True)
    with layers.LayerApplier(str(tree), limits=limits) as applier:
        applier.apply_stream(raw, 'sha256:layer')
        applier.finish()
    return tree, applier


def test_long_pax_header_refused_before_it_is_read(tmp_path):
    # A PAX header of 64 KiB: fine by default, refused above the bound
    # (Python's tarfile would read it into memory whole).
    long_name = 'd/' + 'n' * (64 * 1024)
    entries = [Entry(long_name, data=b'x')]
    with pytest.raises(exc.UnsafeLayer, match='extended header'):
        _apply_with(tmp_path, entries,
                    layers.Limits(max_header_bytes=16 * 1024))


def test_long_gnu_name_refused(tmp_path):
    import tarfile
    entries = [Entry('g/' + 'n' * 8000, data=b'x')]
    with pytest.raises(exc.UnsafeLayer, match='extended header'):
        _apply_with(tmp_path, entries, layers.Limits(max_header_bytes=4096),
                    fmt=tarfile.GNU_FORMAT)


def test_huge_declared_header_is_not_allocated(tmp_path):
    """A header that declares 4 GiB of PAX data and carries none."""
    import io
    import tarfile
    ti = tarfile.TarInfo('././@PaxHeader')
    ti.type = tarfile.XHDTYPE
    ti.size = 4 << 30
    raw = io.BytesIO(ti.tobuf(tarfile.USTAR_FORMAT) + b'\0' * 1024)
    tree = tmp_path / 'tree'
    tree.mkdir()
    with layers.LayerApplier(str(tree)) as applier:
        with pytest.raises(exc.UnsafeLayer, match='4294967296-byte'):
            applier.apply_stream(raw, 'sha256:bomb')


def test_entries_per_layer_bounded(tmp_path):
    entries = [Entry(f'f{i}', data=b'x') for i in range(5)]
    with pytest.raises(exc.UnsafeLayer, match='limit of 3 entries'):
        _apply_with(tmp_path, entries, layers.Limits(max_entries=3))
    (tmp_path / 'ok').mkdir()
    tree, _ = _apply_with(tmp_path / 'ok', entries,
                          layers.Limits(max_entries=5))
    assert sorted(os.listdir(tree)) == [f'f{i}' for i in range(5)]


def test_xattrs_outside_the_allow_list_are_dropped(tmp_path, monkeypatch):
    applied = []
    monkeypatch.setattr(layers.os, 'setxattr',
                        lambda fd, key, value: applied.append((key, value)))
    entries = [Entry('f', data=b'x', xattrs={
        'user.keep': b'1', 'security.capability': b'\x01',
        'trusted.overlay.opaque': b'y', 'trusted.overlay.redirect': b'/etc',
        'security.selinux': b'unconfined_u'})]
    _tree, applier = _apply_with(tmp_path, entries, layers.Limits())
    assert sorted(k for k, _ in applied) == ['security.capability',
                                             'user.keep']
    assert set(applier.dropped_xattrs) == {
        'trusted.overlay.opaque', 'trusted.overlay.redirect',
        'security.selinux'}
