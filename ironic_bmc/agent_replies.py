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

"""What the agent of a running node sends back, bounded before it is read.

Once a workload runs, it is root next to the agent and may have replaced
it (the trust model in the README): nothing the node sends is trusted.
Ironic's ``AgentClient`` reads a reply whole (``response.json()``), for as
long as the node keeps sending; the in-band calls of a running node go
through a client whose HTTP adapters stop reading at a size and a
deadline (:class:`BoundedAdapter`), and the gzip fields of the collect
step are unpacked with a bound on what they expand to
(:func:`unpack`).  Whatever breaks a bound raises
:class:`AgentReplyInvalid`, which ends the run ``failed`` with the
reason; the conductor keeps what it had.
"""

import base64
import binascii
import json
import time
import zlib

from ironic.common import exception
from ironic.common.i18n import _
from ironic.drivers.modules import agent_client
import requests
from requests import adapters

from bmc_common import protocol

#: Bytes of one HTTP reply read at a time.
CHUNK = 64 * 1024
#: Seconds to connect to an agent (its node is on the provisioning
#: network: it answers within milliseconds, or is gone).
CONNECT_TIMEOUT = 10


class AgentReplyInvalid(exception.IronicException):
    _msg_fmt = _('The agent of node %(node)s sent a reply the conductor '
                 'refuses: %(reason)s')


#: How a refused reply's error begins, also once Ironic's client has
#: wrapped it in its own error.
REFUSED = 'reply refused: '


class ReplyRefused(requests.RequestException):
    """A reply body past a bound (neither a timeout nor a connection
    error, which Ironic's client retries)."""


def refused(exc):
    """Whether ``exc`` (ours, or Ironic's wrapping of it) is a refusal."""
    return REFUSED in str(exc)


class BoundedAdapter(adapters.BaseAdapter):
    """A requests adapter that reads at most ``max_bytes`` of a reply
    body (decoded) and gives up ``deadline`` seconds after the request.

    Wraps the session's own adapter (TLS settings and all), and reads
    the body itself, as ``Session.send`` would when not streaming.
    """

    def __init__(self, inner, max_bytes, deadline):
        super().__init__()
        self.inner = inner
        self.max_bytes = max_bytes
        self.deadline = deadline

    def send(self, request, stream=False, timeout=None, **kwargs):
        start = time.monotonic()
        # A node that is gone (no answer to the SYN) costs at most
        # CONNECT_TIMEOUT per attempt, not [agent]command_timeout: the
        # periodic watch polls the running nodes one after the other.
        if isinstance(timeout, tuple):
            timeout = (min(timeout[0] or CONNECT_TIMEOUT, CONNECT_TIMEOUT),
                       timeout[1])
        elif timeout is not None:
            timeout = (min(timeout, CONNECT_TIMEOUT), timeout)
        resp = self.inner.send(request, stream=True, timeout=timeout,
                               **kwargs)
        if stream:
            return resp
        data = bytearray()
        try:
            while True:
                # read1: what has arrived, so that a trickle cannot hold
                # the read past the deadline.
                chunk = resp.raw.read1(CHUNK, decode_content=True)
                if not chunk:
                    break
                data += chunk
                if len(data) > self.max_bytes:
                    raise ReplyRefused('%sbody larger than %d bytes' % (
                        REFUSED, self.max_bytes))
                if time.monotonic() - start > self.deadline:
                    raise ReplyRefused('%sbody still arriving after %d s'
                                       % (REFUSED, self.deadline))
        finally:
            resp.close()
        resp._content = bytes(data)
        resp._content_consumed = True
        return resp

    def close(self):
        self.inner.close()


class BoundedClient(agent_client.AgentClient):
    """Ironic's ``AgentClient``, its session's adapters bounded."""


def bounded_client(max_bytes, deadline):
    """An Ironic ``AgentClient`` whose replies are bounded."""
    client = BoundedClient()
    for prefix in ('https://', 'http://'):
        inner = client.session.get_adapter(prefix + 'agent')
        client.session.mount(prefix, BoundedAdapter(inner, max_bytes,
                                                    deadline))
    return client


def refuse(node, reason):
    return AgentReplyInvalid(node=node.uuid, reason=reason)


def unpack(node, text, max_bytes, what):
    """The bytes of a ``data`` field (gzip, then base64) of the collect
    step, refused when they are not that or expand past ``max_bytes``.

    :raises: AgentReplyInvalid naming ``what`` and the reason.
    """
    if not isinstance(text, str):
        raise refuse(node, _('%(what)s: "data" is a %(type)s, not a '
                             'string') % {'what': what,
                                          'type': type(text).__name__})
    # base64 is 4/3 of what it encodes; gzip adds its header.
    if len(text) > (max_bytes + 1024) * 4 // 3 + 4:
        raise refuse(node, _('%(what)s: %(n)d bytes of base64, more than '
                             '%(max)d bytes could need') % {
            'what': what, 'n': len(text), 'max': max_bytes})
    try:
        packed = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise refuse(node, _('%(what)s: not base64 (%(err)s)')
                     % {'what': what, 'err': exc}) from None
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(packed, max_bytes + 1)
    except zlib.error as exc:
        raise refuse(node, _('%(what)s: not gzip (%(err)s)')
                     % {'what': what, 'err': exc}) from None
    if len(data) > max_bytes or inflater.unconsumed_tail:
        raise refuse(node, _('%(what)s: expands to more than %(max)d '
                             'bytes') % {'what': what, 'max': max_bytes})
    if not inflater.eof:
        raise refuse(node, _('%(what)s: truncated gzip data') % {
            'what': what})
    return data


def mapping(node, value, what):
    """``value`` if it is a JSON object, else AgentReplyInvalid."""
    if not isinstance(value, dict):
        raise refuse(node, _('%(what)s is a %(type)s, not an object')
                     % {'what': what, 'type': type(value).__name__})
    return value


def integer(node, value, what, minimum=0):
    """``value`` if it is an integer of at least ``minimum``."""
    if (isinstance(value, bool) or not isinstance(value, int)
            or value < minimum):
        raise refuse(node, _('%(what)s is %(value).40r, not an integer of '
                             'at least %(min)d') % {
            'what': what, 'value': value, 'min': minimum})
    return value


#: The most a workload status may hold, as JSON (the agent's own is
#: about 6 KiB: a 4 KiB output tail, the RAPL and stream sections).
STATUS_MAX_BYTES = 64 * 1024
#: Characters of a free-text field of a status (errors, reasons).
TEXT_MAX = 2000
WORKLOAD_STATES = protocol.WORKLOAD_STATES


def _number(node, value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise refuse(node, _('%(what)s is %(value).40r, not a number')
                     % {'what': what, 'value': value})
    return value


def _text(node, value, what, limit=TEXT_MAX):
    if not isinstance(value, str) or len(value) > limit:
        raise refuse(node, _('%(what)s is not a string of at most %(n)d '
                             'characters') % {'what': what, 'n': limit})
    return value


def workload_status(node, status, what):
    """A workload status (``bmc_workload_status``, ``bmc_stop_workload``)
    of the protocol's shape and size, or AgentReplyInvalid.

    Checks every field the conductor reads or keeps in the run report;
    the whole status is bounded (:data:`STATUS_MAX_BYTES`), so what it
    adds to ``driver_internal_info`` is too.
    """
    status = mapping(node, status, what)
    size = len(json.dumps(status))
    if size > STATUS_MAX_BYTES:
        raise refuse(node, _('%(what)s holds %(n)d bytes, more than '
                             '%(max)d') % {'what': what, 'n': size,
                                           'max': STATUS_MAX_BYTES})
    if status.get('state') not in WORKLOAD_STATES:
        raise refuse(node, _('%(what)s: unknown state %(state).40r')
                     % {'what': what, 'state': status.get('state')})
    if status.get('exit_code') is not None:
        integer(node, status['exit_code'], _('%s: exit_code') % what,
                minimum=-255)
    _text(node, status.get('output_tail', ''), _('%s: output_tail') % what,
          limit=protocol.OUTPUT_TAIL_BYTES)
    stages = status.get('stages') or []
    if not isinstance(stages, list):
        raise refuse(node, _('%s: stages is not a list') % what)
    for stage in stages:
        stage = mapping(node, stage, _('%s: a stage') % what)
        if stage.get('name') not in protocol.STAGES:
            raise refuse(node, _('%(what)s: unknown stage %(name).40r')
                         % {'what': what, 'name': stage.get('name')})
        for key in ('start', 'end'):
            _number(node, stage.get(key), _('%(what)s: stage %(name)s '
                                            '%(key)s') % {
                'what': what, 'name': stage['name'], 'key': key})
    stop = status.get('stop')
    if stop is not None:
        stop = mapping(node, stop, _('%s: stop') % what)
        if stop.get('reason') not in protocol.STOP_REASONS:
            raise refuse(node, _('%(what)s: unknown stop reason %(r).40r')
                         % {'what': what, 'r': stop.get('reason')})
        _text(node, stop.get('signal', ''), _('%s: stop signal') % what,
              limit=16)
    for key in ('integrity',):
        if status.get(key) is not None:
            _text(node, status[key], '%s: %s' % (what, key))
    for key in ('stream', 'rapl', 'output'):
        if status.get(key) is not None:
            mapping(node, status[key], '%s: %s' % (what, key))
    stream = status.get('stream') or {}
    if stream.get('error') is not None:
        _text(node, stream['error'], _('%s: stream error') % what)
    for key in ('fully_local_at', 'started', 'cached_bytes', 'bytes'):
        if stream.get(key) is not None:
            _number(node, stream[key], '%s: stream %s' % (what, key))
    if status.get('walltime') is not None:
        _number(node, status['walltime'], _('%s: walltime') % what)
    return status
