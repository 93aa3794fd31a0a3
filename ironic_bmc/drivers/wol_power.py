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

"""The ``wol`` power interface: machines without a BMC.

* **Power on**: a Wake-on-LAN magic packet (:mod:`ironic_bmc.wol`) for
  the MAC of each of the node's ports, over UDP to
  ``driver_info/wol_host`` (default the broadcast ``255.255.255.255``)
  and ``driver_info/wol_port`` (default 9).  Nothing answers it: the
  conductor cannot tell whether the machine woke.
* **Power off and reboot**: in-band, by the agent on the node (IPA's
  ``standby.power_off`` and ``standby.run_image``), when the agent is up:
  its heartbeats are recent (Ironic's fast track test), or a container
  run still watches it.  A reboot is Ironic's ``agent`` power interface's
  (:class:`AgentPower`, which this one extends); a power-off waits until
  the agent stops answering.  Without an agent, a power-off is refused
  with what to do; a reboot sends the magic packet (it wakes a machine
  that is off, and a running one ignores it).

**The power state** is read the only ways there are: ``power on`` while
the agent is up; otherwise what Ironic recorded at the last power action
(``power off`` for a node that has none).  It is a record, not a reading:
a machine switched on or off by hand is not seen until its agent comes
up.  The power sync periodic therefore never corrects the machine
(``supports_power_sync`` is false, as for Ironic's agent power interface:
``[conductor]force_power_state_during_sync`` does not apply to these
nodes), and never sees a mismatch that would end in maintenance: it
only records ``power on`` when an agent heartbeats.

Ironic's ``node_power_action`` forgets the agent's URL and token (they do
not survive a power-off) after it asked ``get_power_state`` whether a
change is needed and before it calls ``set_power_state``: the agent found
by the first call is kept on the task for the second.  A reboot is not
preceded by that question, so through ``node_power_action`` it reaches
the agent of a container run only (the deploy keeps that agent's URL and
token); otherwise it is the magic packet.  After an in-band power-off the
agent's last heartbeat is forgotten too: it no longer says an agent is
up.
"""

import socket
import time

from ironic.common import exception
from ironic.common.i18n import _
from ironic.common import states
from ironic.common import utils as ironic_utils
from ironic.conductor import utils as cond_utils
from ironic.drivers.modules import agent_power
from oslo_log import log
from oslo_utils import netutils
import tenacity

from bmc_common import protocol
from ironic_bmc import agent_replies
from ironic_bmc import wol
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import agent_calls
from ironic_bmc import report as run_report

LOG = log.getLogger(__name__)

#: The power interface's name (setup.cfg), also how :mod:`energy` tells a
#: node without a BMC.
NAME = 'wol'
HOST_KEY = 'wol_host'
PORT_KEY = 'wol_port'
#: Copies of each packet sent: UDP may drop one, and waking twice is
#: harmless.
COPIES = 3
#: The agent's fields a call to it needs (Ironic's names).
AGENT_FIELDS = ('agent_url', 'agent_secret_token', 'agent_verify_ca')
#: Seconds between two looks at whether the agent is gone.
GONE_POLL = 2.0
#: Run report states in which the container deploy watches the agent
#: (a silent one ends the run "lost", so it is up).
_WATCHED_RUN_STATES = (protocol.RUN_RUNNING, protocol.RUN_EXITED)
_TASK_ATTR = 'bmc_wol_agent'


def parse_driver_info(node):
    """(host, port) the node's magic packets go to.

    :raises: InvalidParameterValue naming the field and the reason.
    """
    info = node.driver_info or {}
    host = info.get(HOST_KEY, wol.DEFAULT_HOST)
    if not (isinstance(host, str)
            and (netutils.is_valid_ipv4(host)
                 or (not netutils.is_valid_ipv6(host)
                     and ironic_utils.is_hostname_safe(host)))):
        raise exception.InvalidParameterValue(_(
            'driver_info/%(key)s of node %(node)s is %(value)r: expected '
            'the IPv4 broadcast address of the node\'s network (e.g. '
            '192.0.2.255; default %(default)s), or an IPv4 address or '
            'host name that reaches its NIC') % {
                'key': HOST_KEY, 'node': node.uuid, 'value': host,
                'default': wol.DEFAULT_HOST})
    port = info.get(PORT_KEY, wol.DEFAULT_PORT)
    try:
        if isinstance(port, bool) or str(port).strip() != str(int(port)):
            raise ValueError(port)
        port = int(port)
    except (TypeError, ValueError):
        port = None
    if port is None or not 1 <= port <= 65535:
        raise exception.InvalidParameterValue(_(
            'driver_info/%(key)s of node %(node)s is %(value)r: expected a '
            'UDP port number from 1 to 65535 (default %(default)s)') % {
                'key': PORT_KEY, 'node': node.uuid,
                'value': info.get(PORT_KEY), 'default': wol.DEFAULT_PORT})
    return host, port


def node_macs(task):
    """The MAC addresses of the node's ports, checked.

    :raises: MissingParameterValue when the node has no port,
        InvalidParameterValue naming a port whose address is no MAC.
    """
    macs = []
    for port in task.ports:
        try:
            wol.mac_bytes(port.address)
        except ValueError as exc:
            raise exception.InvalidParameterValue(_(
                'port %(port)s of node %(node)s: %(err)s; Wake-on-LAN '
                'needs the MAC address of the NIC to wake') % {
                    'port': port.uuid, 'node': task.node.uuid, 'err': exc})
        macs.append(port.address)
    if not macs:
        raise exception.MissingParameterValue(_(
            'node %s has no port: Wake-on-LAN needs the MAC address of '
            'the NIC to wake (create a port with it)') % task.node.uuid)
    return macs


def send_magic_packets(host, port, macs):
    """Send each MAC's magic packet ``COPIES`` times to host:port (UDP).

    :raises: PowerStateFailure naming the destination on a socket error.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            for mac in macs:
                packet = wol.magic_packet(mac)
                for _copy in range(COPIES):
                    sock.sendto(packet, (host, port))
    except OSError as exc:
        raise exception.PowerStateFailure(_(
            'cannot send the Wake-on-LAN magic packet to %(host)s:%(port)s '
            '(driver_info/%(hkey)s, %(pkey)s): %(err)s') % {
                'host': host, 'port': port, 'hkey': HOST_KEY,
                'pkey': PORT_KEY, 'err': exc})


class WakeOnLanPower(agent_power.AgentPower):
    """Power on by Wake-on-LAN; off and reboot through the agent."""

    def __init__(self):
        super().__init__()
        # What a node's agent answers is bounded (agent_replies): by the
        # time a run ends, its workload was root on the node.
        self._client = agent_replies.bounded_client(
            agent_calls.REPLY_SLACK, agent_replies.CONNECT_TIMEOUT * 3)

    def get_properties(self):
        return {
            HOST_KEY: _('Where the Wake-on-LAN magic packets go: the IPv4 '
                        'broadcast address of the node\'s network, or an '
                        'address or host name that reaches its NIC. '
                        'Optional; default %s.') % wol.DEFAULT_HOST,
            PORT_KEY: _('UDP port of the magic packets. Optional; '
                        'default %d.') % wol.DEFAULT_PORT,
        }

    def validate(self, task):
        """Check wol_host, wol_port and the ports' MACs (the agent is not
        needed to validate: a node that is off has none).

        :raises: InvalidParameterValue, MissingParameterValue naming the
            field.
        """
        parse_driver_info(task.node)
        node_macs(task)

    def supports_power_sync(self, task):
        """No: the state is a record (module doc), never forced."""
        return False

    def get_supported_power_states(self, task):
        return [states.POWER_ON, states.POWER_OFF, states.SOFT_POWER_OFF,
                states.REBOOT, states.SOFT_REBOOT]

    # --- what is known of the node ------------------------------------------

    def _agent(self, task):
        """The agent's connection fields when it is up, else None."""
        node = task.node
        info = node.driver_internal_info
        found = None
        if info.get('agent_url') and cond_utils.agent_is_alive(node):
            found = {k: info.get(k) for k in AGENT_FIELDS}
        else:
            kept = info.get(agent_calls.AGENT_KEY) or {}
            report = run_report.get(node) or {}
            if (kept.get('agent_url')
                    and report.get('state') in _WATCHED_RUN_STATES):
                found = {k: kept.get(k) for k in AGENT_FIELDS}
        if found is None:
            # Seen earlier in this task, before Ironic forgot it (module
            # doc).
            return getattr(task, _TASK_ATTR, None)
        setattr(task, _TASK_ATTR, found)
        return found

    def get_power_state(self, task):
        """``power on`` while the agent is up, else the recorded state
        (``power off`` when none is): see the module doc."""
        if self._agent(task):
            return states.POWER_ON
        recorded = task.node.power_state
        if recorded in (states.POWER_ON, states.POWER_OFF):
            return recorded
        return states.POWER_OFF

    # --- actions ---------------------------------------------------------

    def set_power_state(self, task, power_state, timeout=None):
        if power_state == states.POWER_ON:
            self._wake(task)
        elif power_state in (states.POWER_OFF, states.SOFT_POWER_OFF):
            self._power_off(task, timeout)
        elif power_state in (states.REBOOT, states.SOFT_REBOOT):
            self.reboot(task, timeout)
        else:
            raise exception.InvalidParameterValue(_(
                'the "%(name)s" power interface cannot set power state '
                '%(state)s of node %(node)s') % {
                    'name': NAME, 'state': power_state,
                    'node': task.node.uuid})

    def _wake(self, task):
        host, port = parse_driver_info(task.node)
        macs = node_macs(task)
        send_magic_packets(host, port, macs)
        LOG.info('Sent Wake-on-LAN magic packets for node %(node)s '
                 '(%(macs)s) to %(host)s:%(port)s',
                 {'node': task.node.uuid, 'macs': ', '.join(macs),
                  'host': host, 'port': port})

    def reboot(self, task, timeout=None):
        """In-band through the agent, as Ironic's agent power interface
        does; with no agent, a magic packet (see the module doc)."""
        agent = self._agent(task)
        if agent is None:
            LOG.warning('Node %s has no agent up to reboot it in-band: '
                        'sending it a Wake-on-LAN magic packet instead. '
                        'That wakes it if it is off; a machine that is on '
                        'without an agent cannot be reset without a BMC.',
                        task.node.uuid)
            self._wake(task)
            return
        for key, value in agent.items():
            if value is not None:
                task.node.set_driver_internal_info(key, value)
        setattr(task, _TASK_ATTR, None)
        super().reboot(task, timeout=timeout)

    def _power_off(self, task, timeout):
        node = task.node
        agent = self._agent(task)
        if agent is None:
            if node.maintenance:
                LOG.warning('Node %s is in maintenance and has no agent up: '
                            'recording it powered off on the operator\'s '
                            'word, without any action', node.uuid)
                return
            raise exception.PowerStateFailure(_(
                'node %(node)s has no BMC (power interface "%(name)s") and '
                'no agent up on it (no heartbeat within '
                '[deploy]fast_track_timeout, %(secs)s s), so it cannot be '
                'powered off in-band. If the machine is on, switch it off '
                'at the machine; then, for Ironic to record it, set the '
                'node in maintenance, power it off again (recorded without '
                'any action) and unset the maintenance') % {
                    'node': node.uuid, 'name': NAME,
                    'secs': CONF.deploy.fast_track_timeout})
        agent_node = agent_calls.with_agent(node, agent)
        try:
            tenacity.retry(
                retry=tenacity.retry_if_exception_type(
                    exception.AgentInProgress),
                stop=tenacity.stop_after_delay(agent_calls.BUSY_WAIT),
                wait=tenacity.wait_fixed(1),
                reraise=True)(self._client.power_off)(agent_node)
        except exception.IronicException as exc:
            raise exception.PowerStateFailure(_(
                'the agent of node %(node)s (no BMC: power interface '
                '"%(name)s") did not take the power-off request: %(err)s')
                % {'node': node.uuid, 'name': NAME, 'err': exc})
        setattr(task, _TASK_ATTR, None)
        self._wait_until_gone(agent_node, timeout
                              or CONF.conductor.power_state_change_timeout)
        # Its last heartbeat no longer says that an agent is up.
        node.del_driver_internal_info('agent_last_heartbeat')
        LOG.info('Node %s powered off in-band by its agent', node.uuid)

    def _wait_until_gone(self, agent_node, timeout):
        """Wait until the agent stops answering (the machine went off)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._client.get_commands_status(
                    agent_node, retry_connection=False, expect_errors=True)
            except exception.AgentConnectionFailed:
                return
            except (exception.IronicException, ValueError, KeyError,
                    TypeError) as exc:
                # It answers, if not well: not gone.
                LOG.debug('Agent of node %(node)s still answers: %(err)s',
                          {'node': agent_node.uuid, 'err': exc})
            if time.monotonic() >= deadline:
                raise exception.PowerStateFailure(_(
                    'the agent of node %(node)s took the power-off request '
                    'but still answers after %(secs)s s: the machine may '
                    'still be on (no BMC: power interface "%(name)s"); '
                    'switch it off at the machine if it is') % {
                        'node': agent_node.uuid, 'secs': timeout,
                        'name': NAME})
            time.sleep(GONE_POLL)
