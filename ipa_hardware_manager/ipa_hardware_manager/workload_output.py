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

"""What a run leaves for its conductor: its output and its result files.

The output is what the keeper (:mod:`output_keeper`) kept; result files
are read from the staged root after the workload exited (the overlay
keeps what it wrote; its own /tmp and /run were mounts of the container
and are gone).  Both travel gzip-compressed and base64-encoded in the
collect step's result
(:func:`bmc_common.protocol.pack`).
"""

import hashlib
import os
import stat

from ipa_hardware_manager import container_root
from ipa_hardware_manager import oci_spec
from ipa_hardware_manager import output_keeper
from bmc_common import protocol


def tail(directory, limit=protocol.OUTPUT_TAIL_BYTES):
    """The last ``limit`` bytes of the kept output, as text."""
    chunks = []
    wanted = limit
    for path in reversed(output_keeper.files(directory)):
        try:
            with open(path, 'rb') as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - wanted))
                data = f.read(wanted)
        except OSError:
            continue
        chunks.insert(0, data)
        wanted -= len(data)
        if wanted <= 0:
            break
    return b''.join(chunks).decode('utf-8', errors='replace')


def output(directory):
    """The kept output and what the keeper counted."""
    data = b''
    for path in output_keeper.files(directory):
        try:
            with open(path, 'rb') as f:
                data += f.read()
        except OSError:
            continue
    state = output_keeper.read_state(directory) or {}
    return {'data': protocol.pack(data), 'kept': len(data),
            'bytes': state.get('bytes', len(data)),
            'dropped': state.get('dropped', 0),
            'finished': state.get('finished', False)}


def _read_result(root, path, budget):
    real = container_root.resolve_in_root(root, path)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return {'error': 'no such file in the container\'s root'}
    except OSError as exc:
        return {'error': exc.strerror or str(exc)}
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return {'error': 'not a regular file'}
    with os.fdopen(fd, 'rb') as f:
        if info.st_size > budget:
            return {'error': 'too large: %d bytes, %d left of the results '
                             'bound' % (info.st_size, budget),
                    'size': info.st_size}
        data = f.read(budget + 1)
    if len(data) > budget:
        return {'error': 'too large: grew past the results bound'}
    return {'data': protocol.pack(data), 'size': len(data),
            'sha256': hashlib.sha256(data).hexdigest()}


def results(root, paths, max_bytes):
    """The named files of the container's root, at most ``max_bytes`` in
    all; a file that cannot be returned says why instead."""
    found = {}
    budget = max_bytes
    for path in paths or ():
        try:
            entry = _read_result(root, path, budget)
        except oci_spec.SpecError as exc:
            entry = {'error': str(exc)}
        if 'data' in entry:
            budget -= entry['size']
        found[path] = entry
    return found
