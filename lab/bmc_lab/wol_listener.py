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

"""The lab's Wake-on-LAN listener: what a NIC does with a magic packet.

One process per lab (``python -m bmc_lab.wol_listener STATE_DIR``) on
UDP 127.0.0.1:``ports.wol``, never any other address: the lab's traffic
stays on loopback.  A ``container-wol`` node's conductor sends its magic
packets there (``driver_info/wol_host=127.0.0.1``, ``wol_port``).  A
packet for the MAC of one of the lab's nodes starts that node's libvirt
domain when it is shut off, as a powered-off machine whose NIC has
Wake-on-LAN enabled does; a running domain ignores it, as a running
machine does.  Every datagram is logged, one line each::

    wol packet from=127.0.0.1:40123 mac=52:54:00:bc:00:00
        domain=bmc-lab-node-0 state=shut-off action=started

(on one line), which :func:`events` reads back for the tests.
"""

import argparse
import logging
import re
import socket
import sys
import time

from ironic_bmc import wol
from bmc_lab import nodes
from bmc_lab import procs
from bmc_lab import settings as lab_settings

LOG = logging.getLogger('bmc_lab.wol_listener')

NAME = 'wol-listener'
#: The only address the listener binds to.
ADDRESS = '127.0.0.1'
#: Bytes read of a datagram (a magic packet is 102, 108 with SecureOn).
MAX_DATAGRAM = 2048

ACTION_STARTED = 'started'
ACTION_IGNORED = 'ignored'
ACTION_FAILED = 'start-failed'

_EVENT = re.compile(r'wol packet from=(?P<sender>\S+) mac=(?P<mac>\S+) '
                    r'domain=(?P<domain>\S+) state=(?P<state>\S+) '
                    r'action=(?P<action>\S+)')


def domains_by_mac(settings):
    """{MAC: libvirt domain} of the lab's nodes."""
    return {settings.node_mac(i): settings.node_name(i)
            for i in range(settings.nodes)}


def _domain_state(domain):
    result = nodes.virsh('domstate', domain, check=False)
    if result.returncode != 0:
        return 'unknown'
    return result.stdout.strip().replace(' ', '-') or 'unknown'


def _start_domain(domain):
    result = nodes.virsh('start', domain, check=False)
    return result.returncode == 0, (result.stderr or '').strip()


class Listener:
    """Handles datagrams; ``state`` and ``start`` reach libvirt (the
    tests give their own)."""

    def __init__(self, macs, state=_domain_state, start=_start_domain):
        self.macs = {m.lower(): d for m, d in macs.items()}
        self.state = state
        self.start = start

    def handle(self, data, sender):
        """One datagram; returns the event it logged (a dict)."""
        mac = wol.parse_magic_packet(data)
        event = {'sender': '%s:%s' % sender, 'mac': mac or '-',
                 'domain': '-', 'state': '-', 'action': ACTION_IGNORED}
        if mac is None:
            event['action'] = 'not-a-magic-packet(%d-bytes)' % len(data)
        elif mac in self.macs:
            event['domain'] = domain = self.macs[mac]
            event['state'] = self.state(domain)
            if event['state'] == 'shut-off':
                started, error = self.start(domain)
                event['action'] = ACTION_STARTED if started else ACTION_FAILED
                if error:
                    LOG.warning('virsh start %s: %s', domain, error)
        LOG.info('wol packet from=%(sender)s mac=%(mac)s domain=%(domain)s '
                 'state=%(state)s action=%(action)s', event)
        return event


def events(text):
    """The events of the listener's log ``text`` (dicts, in order)."""
    return [m.groupdict() for m in _EVENT.finditer(text)]


def bind(port):
    """The listener's socket, on 127.0.0.1 only."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((ADDRESS, port))
    return sock


def serve(sock, listener):
    while True:
        data, sender = sock.recvfrom(MAX_DATAGRAM)
        try:
            listener.handle(data, sender)
        except Exception:
            LOG.exception('handling a datagram from %s:%s failed', *sender)


def log_path(settings):
    return settings.log(NAME + '.log')


def start(settings, timeout=30):
    """Start the lab's listener (idempotent), on ``ports.wol``."""
    if procs.running(settings, NAME):
        return
    proc = procs.spawn(settings, NAME, [
        sys.executable, '-m', 'bmc_lab.wol_listener', settings.state_dir])
    deadline = time.monotonic() + timeout
    while not procs.udp_port_in_use(settings.ports.wol):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise procs.LabError(
                'the Wake-on-LAN listener did not start on UDP %s:%d; see '
                '%s' % (ADDRESS, settings.ports.wol, log_path(settings)))
        time.sleep(0.2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('state_dir')
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format='%(asctime)s %(levelname)s %(message)s')
    settings = lab_settings.Settings.load(args.state_dir)
    if settings is None:
        LOG.error('no lab settings in %s', args.state_dir)
        return 1
    macs = domains_by_mac(settings)
    sock = bind(settings.ports.wol)
    LOG.info('listening for magic packets on UDP %s:%d for %s', ADDRESS,
             settings.ports.wol, ', '.join(
                 '%s (%s)' % item for item in sorted(macs.items())))
    serve(sock, Listener(macs))
    return 0


if __name__ == '__main__':
    sys.exit(main())
