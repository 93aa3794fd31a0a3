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

"""A node's serial console, as a unikernel run reads it.

The conductor reads the file a console logger keeps for the node
(``[container]console_log_template``: conserver, ipmiconsole, libvirt's
file console), from the byte it had reached when the node was powered on,
and parses the unikernel's protocol lines (``bmc_common.protocol``,
``UNIKERNEL_*``).  What the node prints is untrusted: lines are bounded,
JSON is parsed defensively, and a line that breaks the protocol is
counted, never acted on.
"""

import dataclasses
import json
import os
import re

from ironic.common import exception
from ironic.common.i18n import _

from bmc_common import noise_cycles
from bmc_common import protocol

from ironic_bmc.conf import CONF

#: What a node name may be to be put into a path.
SAFE_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')
MAX_LINE = 64 * 1024
#: Most results and error lines a run keeps (they go into the report,
#: which Ironic stores with the node); the rest count as bad lines.
MAX_RESULTS = 64
MAX_ERRORS = 16
END_RE = re.compile(r'^rc=(-?\d{1,4})$')


def path(node):
    """The node's console file.

    :raises: InvalidParameterValue when this conductor reads no consoles
        or the node's name cannot name a file.
    """
    template = CONF.container.console_log_template
    if not template:
        raise exception.InvalidParameterValue(
            _('The unikernel deploy interface reads the node\'s serial '
              'console, and this conductor reads none: set '
              '[container]console_log_template to the file a console '
              'logger (conserver, ipmiconsole, libvirt) keeps per node.'))
    name = node.name or ''
    if '{node_name}' in template and not SAFE_NAME.match(name):
        raise exception.InvalidParameterValue(
            _('[container]console_log_template names the console file by '
              'node name, and node %(node)s has %(name)s (letters, '
              'digits, ".", "_" and "-" only)')
            % {'node': node.uuid, 'name': repr(name) if name else 'none'})
    return template.format(node_uuid=node.uuid, node_name=name)


def mark(file_path):
    """Where the console file ends now: what follows is the new run's."""
    try:
        return os.stat(file_path).st_size
    except FileNotFoundError:
        return 0


def read(file_path, offset):
    """The console text from ``offset`` on (bounded), and whether the file
    was rotated or truncated meanwhile (then it is read from its start)."""
    limit = CONF.container.console_read_max_kb * 1024
    try:
        with open(file_path, 'rb') as f:
            size = os.fstat(f.fileno()).st_size
            restarted = size < offset
            f.seek(0 if restarted else offset)
            data = f.read(limit)
    except FileNotFoundError:
        return '', False
    return data.decode('utf-8', errors='replace'), restarted


@dataclasses.dataclass
class Console:
    """The protocol lines of one run, parsed."""
    booted: bool = False
    results: list = dataclasses.field(default_factory=list)
    errors: list = dataclasses.field(default_factory=list)
    exit_code: int = None
    bad_lines: int = 0

    @property
    def ended(self):
        return self.exit_code is not None


def parse(text):
    """The :class:`Console` of a console text; lines after the end line
    belong to nothing (the node may boot again) and are ignored."""
    console = Console()
    for raw in text.splitlines():
        line = raw.strip('\r\x00 ')
        where = line.find(protocol.UNIKERNEL_PREFIX)
        if where < 0:
            continue
        word, _sep, rest = line[where + len(
            protocol.UNIKERNEL_PREFIX):].partition(' ')
        if len(line) > MAX_LINE:
            console.bad_lines += 1
        elif word == protocol.UNIKERNEL_BOOTED:
            console.booted = True
        elif word == protocol.UNIKERNEL_RESULT and (
                len(console.results) < MAX_RESULTS):
            _result(console, rest)
        elif word == protocol.UNIKERNEL_ERROR and (
                len(console.errors) < MAX_ERRORS):
            console.errors.append(rest[:500])
        elif word == protocol.UNIKERNEL_END and END_RE.match(rest):
            console.exit_code = int(END_RE.match(rest).group(1))
            break
        else:
            console.bad_lines += 1
    return console


def _result(console, text):
    try:
        raw = json.loads(text)
        console.results.append(noise_cycles.convert(raw))
    except (ValueError, TypeError, KeyError, AttributeError,
            ZeroDivisionError):
        console.bad_lines += 1
