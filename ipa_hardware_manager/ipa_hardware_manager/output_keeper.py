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

"""Keep the workload's output in RAM, bounded: the output keeper.

The workload's stdout and stderr are a pipe; this small process (its own
session, so it outlives an agent restart, as the workload does) reads it
and writes ``output.log``.  When that file holds half of ``max_bytes``
it becomes ``output.log.1`` (replacing the older one) and a new one
starts: the two hold at most ``max_bytes``, the most recent output, and a
job that prints faster than the node can keep waits on the pipe instead
of filling RAM.  ``output.json`` says how many bytes came and how many
were dropped; it is written at each rotation and at the end.

Run as ``python3 -m ipa_hardware_manager.output_keeper DIR MAX_BYTES``,
the output on its standard input.  Standard library only.
"""

import json
import os
import sys

OUTPUT_FILE = 'output.log'
ROTATED_FILE = OUTPUT_FILE + '.1'
STATE_FILE = 'output.json'
CHUNK = 65536
MIN_BYTES = 2 * CHUNK


def files(directory):
    """The kept output files, oldest first."""
    return [os.path.join(directory, name)
            for name in (ROTATED_FILE, OUTPUT_FILE)
            if os.path.exists(os.path.join(directory, name))]


def read_state(directory):
    try:
        with open(os.path.join(directory, STATE_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_state(directory, state):
    tmp = os.path.join(directory, STATE_FILE + '.tmp')
    with open(tmp, 'w') as f:
        json.dump(state, f)
    os.replace(tmp, os.path.join(directory, STATE_FILE))


def keep(source_fd, directory, max_bytes):
    """Copy ``source_fd`` to the rotating files until its end."""
    # A file never grows past half (each read is at most CHUNK): the two
    # hold at most max_bytes when it is at least MIN_BYTES.
    half = max(CHUNK, max_bytes // 2)
    path = os.path.join(directory, OUTPUT_FILE)
    state = {'bytes': 0, 'dropped': 0, 'max_bytes': max_bytes,
             'finished': False}
    _write_state(directory, state)
    out = open(path, 'ab', buffering=0)
    written = out.tell()
    try:
        while True:
            data = os.read(source_fd, CHUNK)
            if not data:
                break
            if written + len(data) > half and written:
                out.close()
                rotated = os.path.join(directory, ROTATED_FILE)
                if os.path.exists(rotated):
                    state['dropped'] += os.path.getsize(rotated)
                os.replace(path, rotated)
                out = open(path, 'ab', buffering=0)
                written = 0
                _write_state(directory, state)
            out.write(data)
            written += len(data)
            state['bytes'] += len(data)
    finally:
        out.close()
        state['finished'] = True
        _write_state(directory, state)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print('usage: output_keeper DIR MAX_BYTES', file=sys.stderr)
        return 2
    keep(sys.stdin.fileno(), args[0], int(args[1]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
