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

"""The report's ``boot`` section: where agent-up went.

The conductor knows when it powered the node on, when the agent's first
heartbeat came, and when the first step ran (agent-up).  The node knows,
in seconds since its kernel started, when the kernel began and finished
unpacking the initramfs, ran init and started the agent (the agent reads
them with the first in-band step it runs, ``boot_times``).  The node's
boot clock at that call, set against the time the conductor sent it,
places the kernel's start on the conductor's clock, to within the call's
latency; no clock of the node's is trusted.
"""

import datetime

from oslo_log import log

from bmc_common import protocol

LOG = log.getLogger(__name__)

#: driver_internal_info (container deploy) keys this module uses.
SENT_KEY = 'boot_times_sent'
HEARTBEAT_KEY = 'first_heartbeat'
#: How the agent came up: ``warm``, ``kexec`` or ``cold`` (node_boot).
KIND_KEY = 'boot_kind'
KIND_KEXEC = 'kexec'

#: (phase, from mark, to mark), in boot order.
PHASES = protocol.BOOT_PHASES
_NODE_MARKS = (('initramfs_unpack_start', 'unpack_start'),
               ('initramfs_unpacked', 'unpack_end'),
               ('init_start', 'init_start'))


def heartbeat_time(node):
    """The node's last heartbeat (Ironic's ``agent_last_heartbeat``) as
    seconds since the epoch, or None."""
    text = node.driver_internal_info.get('agent_last_heartbeat')
    if not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:     # Ironic stores naive UTC
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()


def breakdown(powered_on, agent_up, sent, times, first_heartbeat=None,
              kexec=False):
    """The ``boot`` section from the conductor's times (seconds since the
    epoch) and the node's ``times`` (see ipa_hardware_manager.boot_times).

    ``kexec``: the node did not boot through its firmware but kexec'd
    from the agent; the first phase (from the kexec's start to the new
    kernel's) is ``kexec_s``, not ``firmware_ipxe_s``.
    """
    try:
        kernel_start = sent - float(times['uptime'])
    except (KeyError, TypeError, ValueError):
        return {'error': 'the agent sent no boot clock'}
    kernel = times.get('kernel') or {}
    marks = {'power_on': powered_on, 'kernel_start': kernel_start,
             'first_heartbeat': first_heartbeat, 'agent_up': agent_up}
    for mark, key in _NODE_MARKS:
        if kernel.get(key) is not None:
            marks[mark] = kernel_start + kernel[key]
    if times.get('agent_start') is not None:
        marks['agent_start'] = kernel_start + times['agent_start']
    phases = {}
    for phase, begin, end in PHASES:
        if kexec and phase == 'firmware_ipxe_s':
            phase = protocol.BOOT_PHASE_KEXEC
        if marks.get(begin) is not None and marks.get(end) is not None:
            phases[phase] = round(marks[end] - marks[begin], 2)
        else:
            phases[phase] = None
    out = {'agent_up_s': round(agent_up - powered_on, 2),
           'phases': phases,
           'marks': {k: round(v, 3) for k, v in marks.items()
                     if v is not None},
           'aligned_by': 'the node boot clock at the first in-band step',
           'via': 'kexec' if kexec else 'firmware'}
    if times.get('initrd_kib'):
        out['initramfs_bytes'] = times['initrd_kib'] * 1024
    uname = times.get('uname')
    if isinstance(uname, dict):
        # The node's word (display only): which kernel it booted.
        out['kernel_booted'] = {'release': str(uname.get('release'))[:100],
                                'version': str(uname.get('version'))[:200]}
    missing = sorted(p for p, v in phases.items() if v is None)
    if missing:
        out['not_measured'] = missing
    return out
