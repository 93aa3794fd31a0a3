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

"""The layer applier against ``umoci unpack``, on layers umoci wrote.

An image is built with umoci: a bundle's rootfs is changed and repacked
three times (``umoci repack``), then ``umoci insert --opaque`` and
``umoci insert --whiteout`` add two layers.  The layers cover whiteouts of
files and trees, a directory replaced by a file, by a symlink and a file
replaced by a directory, a directory that is a file in the second layer
and a directory again in the third, an opaque directory, hard links
(added, broken, removed), relative, absolute, dangling and long symlinks,
character and block devices, a fifo, setuid, setgid and sticky modes, a
file capability, user extended attributes on files and directories, long
names and paths, UTF-8 and non-UTF-8 names, other owners (one beyond the
tar header's octal field).  The tree the applier makes from them, and the
erofs artifact the project builds from that tree, are compared path by
path with ``umoci unpack`` of the same image (:mod:`.treediff`).

Running as root builds and compares all of it and mounts the erofs
artifact (``mount -t erofs -o loop,ro``: ``fsck.erofs --extract`` of
erofs-utils 1.5 loses hard links, extended attributes, setuid bits and
special files' modes).  Without root, umoci runs ``--rootless`` and the
image has no devices, no other owners and no capability; the erofs
comparison then skips (mounting needs root).  User extended attributes
are in the image where the temporary directory's filesystem keeps them.
"""

import errno
import json
import os
import shutil
import subprocess
import tarfile
import zlib

import pytest

from bmc_common import protocol
from ironic_bmc.image import artifact, layers
from ironic_bmc.tests.unit.image import hosttools
from ironic_bmc.tests.unit.image import treediff

ROOT = os.geteuid() == 0
pytestmark = pytest.mark.skipif(
    shutil.which('umoci') is None,
    reason='needs umoci (Debian package umoci; tools/host-setup.sh '
           'installs it)')

TAG = 'test'
#: security.capability v2, cap_net_raw+ep (what ``setcap`` writes).
CAP_NET_RAW = bytes.fromhex('0100000200200000000000000000000000000000')
LONG = 'l' * 150 + '/' + 'm' * 150
NON_UTF8 = os.fsdecode(b'caf\xe9')

#: What the applier keeps and ``umoci unpack`` (0.4.7) removes: the second
#: layer replaces the directory ``lib`` by a symlink to ``usr/lib`` (usr
#: merge), and umoci repack writes ``lib`` then ``lib/.wh.libc.so``.  The
#: whiteout names the lower layer's ``lib/libc.so``, gone with the
#: directory; umoci resolves the whiteout's parent through the new
#: symlink and removes ``usr/lib/libc.so``, a file the repacked bundle
#: had.  The applier never follows a symlink: the whiteout is a no-op.
#: (A umoci that keeps the file is fine too.)
KNOWN_DIFFERENCES = ["'usr/lib/libc.so': unexpected file"]


def user_xattrs_supported(directory):
    """Whether the filesystem keeps user.* xattrs (tmpfs before Linux
    6.6 does not): the image then has none."""
    probe = os.path.join(directory, 'xattr-probe')
    with open(probe, 'wb'):
        pass
    try:
        os.setxattr(probe, 'user.probe', b'1')
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return False
        raise
    finally:
        os.unlink(probe)
    return True


class Bundle:
    """An OCI layout and a bundle whose rootfs becomes its layers."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.rootless = [] if ROOT else ['--rootless']
        self.umoci('init', '--layout', 'image')
        self.umoci('new', '--image', f'image:{TAG}')
        self.umoci('unpack', *self.rootless, '--image', f'image:{TAG}',
                   'bundle')
        self.rootfs = os.path.join(workdir, 'bundle', 'rootfs')
        self.user_xattrs = user_xattrs_supported(workdir)
        #: Paths changed since the last repack (and their parents).
        self.touched = set()

    def umoci(self, *args):
        proc = subprocess.run(['umoci', *args], cwd=self.workdir,
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, (args, proc.stderr)

    def repack(self):
        """A layer of what changed; each path changed gets an mtime of
        its own, in the past (a tree that ignored mtimes would show)."""
        for rel in self.touched:
            if os.path.lexists(self.path(rel)):
                when = 1000000000 + zlib.crc32(os.fsencode(rel)) % 10**8
                os.utime(self.path(rel), (when, when),
                         follow_symlinks=False)
        self.touched = set()
        self.umoci('repack', '--refresh-bundle', '--image', f'image:{TAG}',
                   'bundle')

    def insert(self, *args):
        self.umoci('insert', *self.rootless, '--image', f'image:{TAG}',
                   *args)

    def path(self, rel):
        """The bundle's path of ``rel``, which (and whose parents) the
        next layer holds."""
        parent = rel
        while parent not in self.touched:
            self.touched.add(parent)
            parent = os.path.dirname(parent)
        return os.path.join(self.rootfs, rel)

    def _meta(self, rel, mode, owner, xattrs):
        full = self.path(rel)
        if owner and ROOT:
            os.chown(full, *owner)
        os.chmod(full, mode)
        for key, value in (xattrs or {}).items():
            if self.user_xattrs if key.startswith('user.') else ROOT:
                os.setxattr(full, key, value)

    def file(self, rel, data, mode=0o644, owner=None, xattrs=None):
        os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
        with open(self.path(rel), 'wb') as f:
            f.write(data)
        self._meta(rel, mode, owner, xattrs)

    def dir(self, rel, mode=0o755, owner=None, xattrs=None):
        os.makedirs(self.path(rel), exist_ok=True)
        self._meta(rel, mode, owner, xattrs)

    def symlink(self, rel, target, owner=None):
        os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
        os.symlink(target, self.path(rel))
        if owner and ROOT:
            os.lchown(self.path(rel), *owner)

    def link(self, rel, target):
        os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
        os.link(self.path(target), self.path(rel))

    def node(self, rel, kind, mode, dev=(0, 0), owner=None):
        if kind != 'fifo' and not ROOT:
            return
        fmt = {'chr': 0o020000, 'blk': 0o060000, 'fifo': 0o010000}[kind]
        os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
        os.mknod(self.path(rel), fmt | mode, os.makedev(*dev))
        self._meta(rel, mode, owner, None)

    def remove(self, rel):
        full = self.path(rel)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)

    def layers(self):
        blobs = os.path.join(self.workdir, 'image', 'blobs', 'sha256')
        with open(os.path.join(self.workdir, 'image', 'index.json')) as f:
            index = json.load(f)
        desc, = [m for m in index['manifests'] if m['annotations'][
            'org.opencontainers.image.ref.name'] == TAG]
        with open(os.path.join(blobs, desc['digest'].split(':')[1])) as f:
            manifest = json.load(f)
        return [(layer['digest'],
                 os.path.join(blobs, layer['digest'].split(':')[1]))
                for layer in manifest['layers']]


def build_image(workdir):
    b = Bundle(workdir)
    # Layer 1: the base.
    b.file('etc/hostname', b'host\n')
    b.file('etc/old', b'removed in layer 2')
    b.dir('tmp', 0o1777)
    b.dir('srv/shared', 0o2775, owner=(0, 50))
    b.file('bin/su', b'su', 0o4755)
    b.file('usr/bin/passwd', b'passwd', 0o4755)
    b.file('usr/bin/chage', b'chage', 0o2755, owner=(0, 42))
    b.file('usr/bin/both', b'both', 0o6750, owner=(1000, 1000))
    b.file('bin/wall', b'wall', 0o2755, owner=(0, 5))
    b.file('usr/bin/ping', b'ping', 0o755,
           xattrs={'security.capability': CAP_NET_RAW})
    b.file('home/user/notes', b'notes', 0o600, owner=(1000, 1000),
           xattrs={'user.comment': b'hello', 'user.other': b'\x00\xff'})
    b.dir('home/user', 0o700, owner=(1000, 1000),
          xattrs={'user.dir': b'one'})
    b.file('home/big', b'big ids', owner=(3000000, 3000001))
    b.file('bin/a', b'hard', 0o755)
    b.link('bin/b', 'bin/a')
    b.link('usr/sbin/c', 'bin/a')
    b.link('usr/bin/a2', 'bin/a')
    b.file('usr/share/doc/1', b'three links', 0o444, owner=(1000, 1000))
    b.link('usr/share/doc/2', 'usr/share/doc/1')
    b.link('usr/share/doc/3', 'usr/share/doc/1')
    b.symlink('bin/sh', 'dash')
    b.symlink('etc/localtime', '/usr/share/zoneinfo/UTC')
    b.symlink('etc/dangling', '../nowhere', owner=(1000, 1000))
    b.symlink('longlink', '/' + 't' * 200)
    b.node('dev/null', 'chr', 0o666, (1, 3))
    b.node('dev/sda', 'blk', 0o660, (8, 0), owner=(0, 6))
    b.node('dev/nvme0n1', 'blk', 0o600, (259, 65537))
    b.node('run/fifo', 'fifo', 0o620, owner=(1000, 1000))
    b.file(LONG + '/' + 'f' * 120, b'long path')
    b.link(LONG + '/' + 'h' * 120, LONG + '/' + 'f' * 120)
    b.file('données/été.txt', b'utf-8')
    b.file('日本語/ファイル', b'utf-8 too')
    b.file(NON_UTF8, b'latin-1 name')
    b.file('ro/f', b'read-only', 0o444)
    b.dir('ro', 0o555)
    b.file('opt/app/conf', b'conf')
    b.file('opt/app/sub/z', b'z')
    b.file('lib/libc.so', b'old libc')
    b.file('usr/lib/libc.so', b'new libc')
    b.file('etc/conf.d', b'a file in layer 1')
    b.file('x/dfd/one', b'1')
    b.file('var/cache/junk/deep/j', b'j')
    b.file('etc/opq/a', b'a')
    b.file('etc/opq/sub/b', b'b')
    b.repack()
    # Layer 2: removals, type changes, new and broken hard links, metadata.
    b.remove('etc/old')
    b.remove('var/cache/junk')
    b.remove('opt/app')
    b.file('opt/app', b'a directory in layer 1', 0o755)
    b.remove('lib')
    b.symlink('lib', 'usr/lib')
    b.remove('etc/conf.d')
    b.file('etc/conf.d/x.conf', b'x')
    b.remove('x/dfd')
    b.file('x/dfd', b'a file in layer 2')
    b.link('etc/hostname2', 'etc/hostname')
    b.remove('usr/sbin/c')
    b.file('usr/sbin/c', b'its own inode now')
    os.chmod(b.path('bin/wall'), 0o755)
    if ROOT:
        os.chown(b.path('home/user/notes'), 1001, 1002)
        os.chmod(b.path('home/user/notes'), 0o600)
    if b.user_xattrs:
        os.setxattr(b.path('home/user'), 'user.dir', b'two')
        os.removexattr(b.path('home/user/notes'), 'user.comment')
    b.repack()
    # Layer 3: a directory again; a hard link removed.
    b.remove('x/dfd')
    b.file('x/dfd/two', b'2')
    b.remove('bin/b')
    b.repack()
    # Layers 4 and 5: an opaque directory, a whiteout.
    src = os.path.join(workdir, 'insert')
    os.makedirs(os.path.join(src, 'new'))
    with open(os.path.join(src, 'n'), 'wb') as f:
        f.write(b'n')
    for rel in ('n', 'new', ''):
        os.utime(os.path.join(src, rel), (1200000000, 1200000000))
    b.insert('--opaque', src, '/etc/opq')
    b.insert('--whiteout', '/bin/su')
    b.umoci('unpack', *b.rootless, '--image', f'image:{TAG}', 'reference')
    return b


@pytest.fixture(scope='module')
def image(tmp_path_factory):
    return build_image(str(tmp_path_factory.mktemp('umoci')))


@pytest.fixture(scope='module')
def reference(image):
    """``umoci unpack``'s rootfs, described (umoci.json, config.json and
    the mtree file beside it are umoci's, not the image's)."""
    return treediff.describe(
        os.path.join(image.workdir, 'reference', 'rootfs'))


@pytest.fixture(scope='module')
def applied(image):
    tree = os.path.join(image.workdir, 'applied')
    os.mkdir(tree)
    with layers.LayerApplier(tree) as applier:
        for digest, path in image.layers():
            applier.apply_file(path, digest)
        info = applier.finish()
    return tree, info


def check(reference, root, what):
    diffs = treediff.differences(reference, root)
    unexpected = [d for d in diffs if d not in KNOWN_DIFFERENCES]
    assert not unexpected, (
        f'{what} differs from umoci unpack (besides {KNOWN_DIFFERENCES}):'
        '\n  ' + '\n  '.join(unexpected))
    with open(os.path.join(root, 'usr', 'lib', 'libc.so'), 'rb') as f:
        assert f.read() == b'new libc'


def test_the_layers_are_what_umoci_writes(image):
    """The image holds the cases this test is about (a newer umoci that
    writes them differently shows here, not as a silent pass)."""
    names = []
    for _digest, path in image.layers():
        with tarfile.open(path) as tar:
            names.append([(m.name, m.type) for m in tar])
    assert len(names) == 5
    second = [n for n, _ in names[1]]
    # A directory replaced by a file or a symlink: the entry, then a
    # whiteout of each former child below it.
    assert second.index('opt/app') < second.index('opt/app/.wh.conf')
    assert second.index('opt/app') < second.index('opt/app/.wh.sub')
    assert second.index('lib') < second.index('lib/.wh.libc.so')
    assert 'x/dfd/.wh.one' in second
    # A removed tree: one whiteout for its top.
    assert 'var/cache/.wh.junk' in second
    assert not [n for n in second if n.startswith('var/cache/junk/')]
    # A file replaced by a directory: no whiteout at all.
    assert 'etc/conf.d' in second and 'etc/.wh.conf.d' not in second
    # The hard link made in layer 2 to a file of layer 1 re-adds the file.
    assert second.index('etc/hostname') < second.index('etc/hostname2')
    assert ('etc/hostname2', tarfile.LNKTYPE) in names[1]
    assert [n for n, _ in names[3]][0] == 'etc/opq/.wh..wh..opq'
    assert [n for n, _ in names[4]] == ['bin/.wh.su']


def test_applied_tree_matches_umoci_unpack(reference, applied):
    tree, info = applied
    check(reference, tree, 'the applied tree')
    assert info.owners == {} and info.devices == {}


def test_erofs_artifact_matches_umoci_unpack(reference, applied, tmp_path):
    hosttools.require('erofs')
    if not ROOT:
        pytest.skip('mounting the erofs artifact needs root (fsck.erofs '
                    '--extract of erofs-utils 1.5 loses hard links and '
                    'extended attributes)')
    tree, info = applied
    out = str(tmp_path / 'rootfs.erofs')
    artifact.build(tree, out, protocol.FORMAT_EROFS, info=info)
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    proc = subprocess.run(['mount', '-t', 'erofs', '-o', 'loop,ro', out,
                           str(mnt)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        pytest.skip('cannot mount the erofs artifact here (mount -t erofs '
                    f'-o loop,ro): {proc.stderr.strip()}')
    try:
        check(reference, str(mnt), 'the erofs artifact')
    finally:
        subprocess.run(['umount', str(mnt)], check=True)
