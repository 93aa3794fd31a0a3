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

"""What a unikernel deploy is asked for: ``instance_info``, checked.

A unikernel boot has no agent: nothing on the node applies tunables,
stages a root, starts a container or reads RAPL.  Every key that needs
one is refused by name rather than ignored, and so is a deploy on behalf
of a tenant: the interface is the operator's (its image runs on the bare
machine with nothing between it and the hardware, and its console is read
from a conductor-side file).
"""

import dataclasses
import re
import urllib.parse

from ironic.common import exception
from ironic.common.i18n import _

from bmc_common import protocol
from ironic_bmc import ownership
from ironic_bmc.conf import CONF

#: instance_info keys that need the agent (or a container), refused.
AGENT_KEYS = ('kernel', 'ramdisk', 'kernel_modules', 'configdrive')
SCHEMES = ('http', 'https', 'file')
MAX_ARGS = 512
#: The command line goes into an iPXE script: no newline, no ``${}``
#: expansion, no shell-like quoting; ``key=value`` words.
ARGS_RE = re.compile(r'^[A-Za-z0-9 =,._:/+-]*$')


@dataclasses.dataclass
class UnikernelInfo:
    image: str
    args: str
    timeout: int
    # What a run report reads of a deploy (report.new).
    rootfs: str = None
    mode: str = protocol.MODE_JOB


def _invalid(key, reason):
    return exception.InvalidParameterValue(
        _('instance_info/%(key)s: %(reason)s')
        % {'key': key, 'reason': reason})


def parse(node):
    """The node's unikernel deploy.

    :raises: MissingParameterValue without ``unikernel_image``.
    :raises: InvalidParameterValue naming the key and the reason.
    """
    info = node.instance_info or {}
    ownership.require_operator(
        node, _('The unikernel deploy interface (a tenant gets the '
                'container deploy interface)'))
    needs_agent = sorted(k for k in info
                         if k.startswith('container_') or k in AGENT_KEYS)
    if needs_agent:
        raise _invalid(needs_agent[0], _(
            'a unikernel boot has no agent, so nothing on the node can '
            'apply it (tunables, a container root, kernel modules, RAPL '
            'and configdrives need the container deploy interface); '
            'remove %s') % ', '.join(needs_agent))
    image = info.get(protocol.II_UNIKERNEL)
    if not image:
        raise exception.MissingParameterValue(
            _('instance_info/%(key)s: the URL of the multiboot image to '
              'boot is required (http://, https:// or file://)')
            % {'key': protocol.II_UNIKERNEL})
    if not isinstance(image, str) or (
            urllib.parse.urlparse(image).scheme not in SCHEMES):
        raise _invalid(protocol.II_UNIKERNEL, _(
            'must be an http://, https:// or file:// URL, got %r')
            % (image,))
    args = info.get(protocol.II_UNIKERNEL_ARGS) or ''
    if not isinstance(args, str):
        raise _invalid(protocol.II_UNIKERNEL_ARGS, _('must be a string'))
    if len(args) > MAX_ARGS:
        raise _invalid(protocol.II_UNIKERNEL_ARGS, _(
            'at most %d characters, got %d') % (MAX_ARGS, len(args)))
    if not ARGS_RE.match(args):
        raise _invalid(protocol.II_UNIKERNEL_ARGS, _(
            'only letters, digits, spaces and = , . _ : / + - are '
            'allowed (it is written into the iPXE script)'))
    timeout = info.get(protocol.II_UNIKERNEL_TIMEOUT,
                       CONF.container.unikernel_timeout)
    try:
        timeout = int(timeout)
    except (TypeError, ValueError):
        raise _invalid(protocol.II_UNIKERNEL_TIMEOUT, _(
            'must be a whole number of seconds, got %r') % (timeout,))
    if not 30 <= timeout <= 86400:
        raise _invalid(protocol.II_UNIKERNEL_TIMEOUT, _(
            'must be between 30 and 86400 seconds, got %d') % timeout)
    return UnikernelInfo(image=image, args=args.strip(), timeout=timeout)
