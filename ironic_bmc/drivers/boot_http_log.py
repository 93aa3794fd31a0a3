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

"""A node's boot-file downloads, from the HTTP server's access log.

Ironic publishes a node's iPXE boot files under ``http_root/<node
uuid>/``; the requests for them between the power-on and the kernel's
start split the report's ``firmware_ipxe_s`` into firmware (power-on to
the first request) and the downloads.  Two line formats are read:

* ``$msec $request_time $status $body_bytes_sent "$request" ...``: the
  end of the request in milliseconds and its duration (nginx);
* the "combined" format: the end of the request, to the second.
"""

import datetime
import os
import re

#: How much of the log's end is read.
TAIL_BYTES = 4 * 1024 * 1024

_TIMED = re.compile(r'^(?P<end>\d+\.\d+) (?P<took>\d+(?:\.\d+)?) '
                    r'(?P<status>\d{3}) (?P<bytes>\d+|-) '
                    r'"(?:GET|HEAD) (?P<path>\S+)')
_COMBINED = re.compile(r'^\S+ \S+ \S+ \[(?P<when>[^\]]+)\] '
                       r'"(?:GET|HEAD) (?P<path>\S+)[^"]*" '
                       r'(?P<status>\d{3}) (?P<bytes>\d+|-)')


def _tail(path):
    size = TAIL_BYTES
    with open(path, 'rb') as f:
        f.seek(0, os.SEEK_END)
        end = f.tell()
        f.seek(max(0, end - size))
        data = f.read()
    if end > size:
        data = data.split(b'\n', 1)[-1]     # a partial first line
    return data.decode(errors='replace').splitlines()


def parse(line):
    """``(start, end, status, bytes, path)`` of one request, or None;
    ``start`` is None when the line holds no duration."""
    match = _TIMED.match(line)
    if match:
        end = float(match['end'])
        start = end - float(match['took'])
    else:
        match = _COMBINED.match(line)
        if not match:
            return None
        try:
            end = datetime.datetime.strptime(
                match['when'], '%d/%b/%Y:%H:%M:%S %z').timestamp()
        except ValueError:
            return None
        start = None
    size = 0 if match['bytes'] == '-' else int(match['bytes'])
    return start, end, int(match['status']), size, match['path']


def downloads(path, node_uuid, since, until):
    """The node's boot-file requests that ended in ``[since, until]``,
    summed up: ``{'requests', 'bytes', 'first_end', 'last_end',
    'first_start' (or None), 'resolution_s'}``, or None if there were
    none."""
    prefix = '/%s/' % node_uuid
    found = []
    resolution = 0.001
    for line in _tail(path):
        if prefix not in line:
            continue        # another node's (most lines, at scale)
        request = parse(line)
        if not request or not request[4].startswith(prefix):
            continue
        start, end, status, size, _path = request
        # One-second timestamps are truncated: the request ended within
        # the second after.
        slack = 1.0 if start is None else 0.0
        if since - slack <= end <= until and status < 400:
            found.append(request)
            if start is None:
                resolution = 1.0
    if not found:
        return None
    starts = [r[0] for r in found]
    return {'requests': len(found),
            'bytes': sum(r[3] for r in found),
            'first_start': None if None in starts else min(starts),
            'first_end': min(r[1] for r in found),
            'last_end': max(r[1] for r in found),
            'resolution_s': resolution}


def split(path, node_uuid, power_on, kernel_start):
    """The ``http`` part of the boot section: firmware (power-on to the
    first boot-file request) and the downloads, or why not."""
    try:
        got = downloads(path, node_uuid, power_on, kernel_start)
    except OSError as exc:
        return {'error': 'cannot read %s: %s' % (path, exc.strerror or exc)}
    if not got:
        return {'error': 'no request for /%s/ in %s between the power-on '
                         'and the kernel start' % (node_uuid, path)}
    first = (got['first_start'] if got['first_start'] is not None
             else got['first_end'])
    return {
        'firmware_s': round(first - power_on, 2),
        'downloads_s': round(got['last_end'] - first, 2),
        'downloads_to_kernel_s': round(kernel_start - got['last_end'], 2),
        'requests': got['requests'],
        'bytes': got['bytes'],
        'resolution_s': got['resolution_s'],
    }
