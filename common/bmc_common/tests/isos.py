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

"""Config drive ISO images for the tests of both sides, made with pycdlib
(Ironic's dependency, in the test environments) the way genisoimage -J -r
lays them out."""

import base64
import gzip
import io
import json

KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB0Vn7ruMyFZe8HYb1rdd5pw test'


def _iso_name(is_dir, n):
    return ('D%03d' % n) if is_dir else ('F%03d.;1' % n)


def build(files, label='config-2', joliet=True, rock_ridge=True):
    """An ISO (bytes) holding ``files`` ({'a/b/c': bytes}), labelled
    ``label``."""
    import pycdlib     # only in the test environments
    iso = pycdlib.PyCdlib()
    kwargs = {'vol_ident': label}
    if joliet:
        kwargs['joliet'] = 3
    if rock_ridge:
        kwargs['rock_ridge'] = '1.09'
    iso.new(**kwargs)
    made = {'': '/'}
    counter = [0]

    def names(path, is_dir):
        counter[0] += 1
        parent = made[path.rpartition('/')[0]]
        leaf = path.rpartition('/')[2]
        out = {'iso_path': parent.rstrip('/') + '/' + _iso_name(
            is_dir, counter[0])}
        if joliet:
            out['joliet_path'] = '/' + path
        if rock_ridge:
            out['rr_name'] = leaf
        return out

    for path in sorted(files):
        parts = path.split('/')
        for i in range(1, len(parts)):
            d = '/'.join(parts[:i])
            if d not in made:
                kw = names(d, True)
                iso.add_directory(**kw)
                made[d] = kw['iso_path']
        data = files[path]
        iso.add_fp(io.BytesIO(data), len(data), **names(path, False))
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return out.getvalue()


def config_drive(meta=None, user_data=b'#!/bin/sh\necho hi\n', extra=None,
                 **kwargs):
    """A config drive as Nova writes one."""
    if meta is None:
        meta = {'uuid': 'u-1', 'public_keys': {'mykey': KEY}}
    files = {'openstack/latest/meta_data.json': json.dumps(meta).encode(),
             'ec2/latest/meta-data.json': b'{}'}
    if user_data is not None:
        files['openstack/latest/user_data'] = user_data
    files.update(extra or {})
    return build(files, **kwargs)


def encode(data):
    """As Ironic keeps it in instance_info: gzip, then base64."""
    return base64.b64encode(gzip.compress(data)).decode()
