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

"""Build OCI images with Python only and push them to a registry.

For tests and the demo: layers are tar files written with :mod:`tarfile`
from a directory tree or from a list of :class:`Entry`, so deliberately
bad layers (``../`` names, absolute names, symlink and hard link escapes,
whiteouts) are as easy to make as good ones.  Images are pushed with the
OCI distribution API (monolithic blob upload POST + PUT, manifest PUT),
optionally with Basic auth.

CLI::

    python -m bmc_lab.ociimage build-push --src DIR \\
        --ref 127.0.0.1:PORT/demo:1 [--entrypoint '/bin/sh -c'] \\
        [--cmd 'echo hi'] [--env K=V] [--arch amd64] [--insecure]
"""

import argparse
import dataclasses
import gzip
import hashlib
import io
import json
import os
import shlex
import stat
import subprocess
import sys
import tarfile

import requests

MEDIA_MANIFEST = 'application/vnd.oci.image.manifest.v1+json'
MEDIA_INDEX = 'application/vnd.oci.image.index.v1+json'
MEDIA_CONFIG = 'application/vnd.oci.image.config.v1+json'
MEDIA_LAYER = 'application/vnd.oci.image.layer.v1.tar'
LAYER_TYPES = {None: MEDIA_LAYER, 'gzip': MEDIA_LAYER + '+gzip',
               'zstd': MEDIA_LAYER + '+zstd'}


def digest_of(data):
    return 'sha256:' + hashlib.sha256(data).hexdigest()


@dataclasses.dataclass
class Entry:
    """One tar member.  kind: file, dir, symlink, hardlink, chr, blk,
    fifo.  Whiteouts are files named ``.wh.<name>`` / ``.wh..wh..opq``
    (see :func:`whiteout` and :func:`opaque`)."""

    name: str
    kind: str = 'file'
    data: bytes = b''
    mode: int | None = None
    uid: int = 0
    gid: int = 0
    mtime: int = 1700000000
    linkname: str = ''
    devmajor: int = 0
    devminor: int = 0
    xattrs: dict | None = None

    def tarinfo(self):
        ti = tarfile.TarInfo(self.name)
        ti.uid, ti.gid, ti.mtime = self.uid, self.gid, self.mtime
        types = {'file': tarfile.REGTYPE, 'dir': tarfile.DIRTYPE,
                 'symlink': tarfile.SYMTYPE, 'hardlink': tarfile.LNKTYPE,
                 'chr': tarfile.CHRTYPE, 'blk': tarfile.BLKTYPE,
                 'fifo': tarfile.FIFOTYPE}
        ti.type = types[self.kind]
        default_mode = 0o755 if self.kind == 'dir' else (
            0o777 if self.kind == 'symlink' else 0o644)
        ti.mode = default_mode if self.mode is None else self.mode
        ti.linkname = self.linkname
        ti.devmajor, ti.devminor = self.devmajor, self.devminor
        if self.kind == 'file':
            ti.size = len(self.data)
        if self.xattrs:
            ti.pax_headers = {'SCHILY.xattr.' + k: v.decode(
                'utf-8', 'surrogateescape') for k, v in self.xattrs.items()}
        return ti


def whiteout(path):
    """An entry deleting ``path`` of the lower layers."""
    head, _, tail = path.rstrip('/').rpartition('/')
    return Entry((head + '/' if head else '') + '.wh.' + tail)


def opaque(directory):
    """An entry making ``directory`` opaque."""
    return Entry(directory.rstrip('/') + '/.wh..wh..opq')


def entries_from_dir(src):
    """Entries of a directory tree (sorted, symlinks not followed, hard
    links kept)."""
    out = []
    seen = {}
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        rel = os.path.relpath(dirpath, src)
        if rel != '.':
            st = os.lstat(dirpath)
            out.append(Entry(rel, 'dir', mode=stat.S_IMODE(st.st_mode),
                             uid=st.st_uid, gid=st.st_gid,
                             mtime=int(st.st_mtime)))
        names = sorted(filenames) + [
            d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in names:
            full = os.path.join(dirpath, name)
            relname = os.path.normpath(os.path.join(rel, name))
            st = os.lstat(full)
            common = {'mode': stat.S_IMODE(st.st_mode), 'uid': st.st_uid,
                      'gid': st.st_gid, 'mtime': int(st.st_mtime)}
            if stat.S_ISLNK(st.st_mode):
                out.append(Entry(relname, 'symlink',
                                 linkname=os.readlink(full), **common))
            elif stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1 and (st.st_dev, st.st_ino) in seen:
                    out.append(Entry(relname, 'hardlink',
                                     linkname=seen[(st.st_dev, st.st_ino)],
                                     **common))
                    continue
                seen[(st.st_dev, st.st_ino)] = relname
                with open(full, 'rb') as f:
                    out.append(Entry(relname, 'file', data=f.read(),
                                     **common))
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                out.append(Entry(
                    relname, 'chr' if stat.S_ISCHR(st.st_mode) else 'blk',
                    devmajor=os.major(st.st_rdev),
                    devminor=os.minor(st.st_rdev), **common))
            elif stat.S_ISFIFO(st.st_mode):
                out.append(Entry(relname, 'fifo', **common))
    return out


def make_layer(entries, compression='gzip'):
    """Tar (and compress) entries.  Returns (blob, diff_id, media_type)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode='w', format=tarfile.PAX_FORMAT) as t:
        for entry in entries:
            ti = entry.tarinfo()
            t.addfile(ti, io.BytesIO(entry.data) if ti.isreg() else None)
    tar_bytes = raw.getvalue()
    if compression == 'gzip':
        blob = gzip.compress(tar_bytes, mtime=0)
    elif compression == 'zstd':
        blob = subprocess.run(['zstd', '-q', '-c'], input=tar_bytes,
                              stdout=subprocess.PIPE, check=True).stdout
    elif compression is None:
        blob = tar_bytes
    else:
        raise ValueError(f'unknown compression {compression!r}')
    return blob, digest_of(tar_bytes), LAYER_TYPES[compression]


@dataclasses.dataclass
class Image:
    manifest: bytes
    blobs: dict
    config: dict

    @property
    def digest(self):
        return digest_of(self.manifest)

    @property
    def manifest_json(self):
        return json.loads(self.manifest)

    @property
    def layer_digests(self):
        return [layer['digest'] for layer in self.manifest_json['layers']]


@dataclasses.dataclass
class Index:
    manifest: bytes
    images: list

    @property
    def digest(self):
        return digest_of(self.manifest)


def build_image(layers, entrypoint=None, cmd=None, env=None, workdir=None,
                user=None, arch='amd64', compression='gzip',
                stop_signal=None):
    """Build an image from a list of layers (each a list of Entry)."""
    blobs = {}
    descriptors = []
    diff_ids = []
    for entries in layers:
        blob, diff_id, media_type = make_layer(entries, compression)
        blobs[digest_of(blob)] = blob
        diff_ids.append(diff_id)
        descriptors.append({'mediaType': media_type,
                            'digest': digest_of(blob), 'size': len(blob)})
    default_path = ('PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:'
                    '/usr/bin:/sbin:/bin')
    runtime = {'Env': list(env or [default_path])}
    if entrypoint:
        runtime['Entrypoint'] = list(entrypoint)
    if cmd:
        runtime['Cmd'] = list(cmd)
    if workdir:
        runtime['WorkingDir'] = workdir
    if user:
        runtime['User'] = user
    if stop_signal:
        runtime['StopSignal'] = stop_signal
    config = {'architecture': arch, 'os': 'linux', 'config': runtime,
              'rootfs': {'type': 'layers', 'diff_ids': diff_ids},
              'created': '2024-01-01T00:00:00Z'}
    config_bytes = json.dumps(config, sort_keys=True).encode()
    blobs[digest_of(config_bytes)] = config_bytes
    manifest = {'schemaVersion': 2, 'mediaType': MEDIA_MANIFEST,
                'config': {'mediaType': MEDIA_CONFIG,
                           'digest': digest_of(config_bytes),
                           'size': len(config_bytes)},
                'layers': descriptors}
    return Image(manifest=json.dumps(manifest, sort_keys=True).encode(),
                 blobs=blobs, config=config)


def build_index(images):
    """A multi-arch index of images (their config architecture)."""
    manifests = [{'mediaType': MEDIA_MANIFEST, 'digest': img.digest,
                  'size': len(img.manifest),
                  'platform': {'architecture': img.config['architecture'],
                               'os': 'linux'}} for img in images]
    doc = {'schemaVersion': 2, 'mediaType': MEDIA_INDEX,
           'manifests': manifests}
    return Index(manifest=json.dumps(doc, sort_keys=True).encode(),
                 images=list(images))


def with_wrong_layer_digest(image, layer=0):
    """A copy of ``image`` whose manifest claims a wrong digest (and size)
    for one layer: the blob under the claimed digest has other content.

    A real registry refuses such a blob on upload, so this image is for
    registries that serve whatever they are given (the test server) or
    for pushing first and then corrupting the storage.
    """
    doc = json.loads(image.manifest)
    desc = doc['layers'][layer]
    real = image.blobs[desc['digest']]
    fake_digest = digest_of(b'not the layer' + real[:16])
    blobs = dict(image.blobs)
    blobs[fake_digest] = real
    desc['digest'] = fake_digest
    return Image(manifest=json.dumps(doc, sort_keys=True).encode(),
                 blobs=blobs, config=image.config)


class Pusher:
    """Push images with the OCI distribution API.

    :param registry: ``host:port``.
    :param auth: (user, password) for Basic auth, or None.
    """

    def __init__(self, registry, auth=None, insecure=True, timeout=60):
        scheme = 'http' if insecure else 'https'
        self.base = f'{scheme}://{registry}/v2'
        self.session = requests.Session()
        if auth:
            self.session.auth = tuple(auth)
        self.timeout = timeout

    def _check(self, resp, what):
        if resp.status_code >= 300:
            raise RuntimeError(f'{what}: HTTP {resp.status_code} '
                               f'{resp.text[:500]}')
        return resp

    def blob_exists(self, repo, digest):
        resp = self.session.head(f'{self.base}/{repo}/blobs/{digest}',
                                 timeout=self.timeout)
        return resp.status_code == 200

    def push_blob(self, repo, data, digest=None):
        digest = digest or digest_of(data)
        if self.blob_exists(repo, digest):
            return digest
        resp = self._check(self.session.post(
            f'{self.base}/{repo}/blobs/uploads/', timeout=self.timeout),
            f'start upload of {digest}')
        location = resp.headers['Location']
        if location.startswith('/'):
            location = self.base[:-3] + location
        sep = '&' if '?' in location else '?'
        self._check(self.session.put(
            f'{location}{sep}digest={digest}', data=data,
            headers={'Content-Type': 'application/octet-stream'},
            timeout=self.timeout), f'upload of {digest}')
        return digest

    def push_manifest(self, repo, reference, data, media_type):
        self._check(self.session.put(
            f'{self.base}/{repo}/manifests/{reference}', data=data,
            headers={'Content-Type': media_type}, timeout=self.timeout),
            f'manifest {repo}:{reference}')
        return digest_of(data)

    def push_image(self, repo, tag, image):
        """Push blobs then the manifest (under ``tag`` or its digest)."""
        for digest, data in image.blobs.items():
            self.push_blob(repo, data, digest)
        return self.push_manifest(repo, tag or image.digest, image.manifest,
                                  MEDIA_MANIFEST)

    def push_index(self, repo, tag, index):
        for image in index.images:
            self.push_image(repo, None, image)
        return self.push_manifest(repo, tag, index.manifest, MEDIA_INDEX)


def split_ref(ref):
    """``[oci://]host:port/repo[:tag]`` -> (host:port, repo, tag)."""
    ref = ref.split('://', 1)[-1]
    host, _, rest = ref.partition('/')
    repo, _, tag = rest.partition(':')
    return host, repo, tag or 'latest'


def _words(value):
    if value is None:
        return None
    value = value.strip()
    if value.startswith('['):
        return json.loads(value)
    return shlex.split(value)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m bmc_lab.ociimage')
    sub = parser.add_subparsers(dest='command', required=True)
    bp = sub.add_parser('build-push', help='build an image from a '
                        'directory and push it')
    bp.add_argument('--src', required=True, help='root filesystem tree')
    bp.add_argument('--ref', required=True, help='host:port/repo:tag')
    bp.add_argument('--entrypoint', help='shell words or a JSON list')
    bp.add_argument('--cmd', help='shell words or a JSON list')
    bp.add_argument('--env', action='append', help='KEY=VALUE')
    bp.add_argument('--workdir')
    bp.add_argument('--user')
    bp.add_argument('--arch', default='amd64')
    bp.add_argument('--compression', default='gzip',
                    choices=('gzip', 'zstd', 'none'))
    bp.add_argument('--auth', help='user:password for Basic auth')
    bp.add_argument('--https', action='store_true',
                    help='talk HTTPS to the registry (default: HTTP)')
    args = parser.parse_args(argv)

    image = build_image(
        [entries_from_dir(args.src)], entrypoint=_words(args.entrypoint),
        cmd=_words(args.cmd), env=args.env, workdir=args.workdir,
        user=args.user, arch=args.arch,
        compression=None if args.compression == 'none' else args.compression)
    host, repo, tag = split_ref(args.ref)
    auth = tuple(args.auth.split(':', 1)) if args.auth else None
    pusher = Pusher(host, auth=auth, insecure=not args.https)
    digest = pusher.push_image(repo, tag, image)
    print(json.dumps({'ref': f'{host}/{repo}:{tag}', 'digest': digest,
                      'pinned': f'{host}/{repo}@{digest}'}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
