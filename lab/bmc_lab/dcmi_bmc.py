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

"""A virtual BMC for lab nodes that also answers DCMI power readings.

virtualbmc maps IPMI chassis and boot-device commands to a libvirt domain
but answers no DCMI (netfn 0x2C gets completion code 0xC1), so a lab node
has no BMC power reading.  :class:`DCMIVirtualBMC` subclasses virtualbmc's
``VirtualBMC`` -- power on/off/status/reset and boot-device get/set stay
exactly virtualbmc's, driving libvirt -- and answers DCMI Get Power
Reading and Get Capabilities Info (:mod:`bmc_lab.dcmi_commands`) with
the watts a :class:`~bmc_lab.dcmi_power_meter.CpuPowerMeter` models from
the domain's CPU use, sampled from libvirt (:func:`libvirt_probe`).

Run one process per node, in place of ``vbmcd``::

    python -m bmc_lab.dcmi_bmc --domain NAME --port 6230 \\
        --address 127.0.0.1 --username admin --password password \\
        --libvirt-uri qemu:///system

It serves until SIGTERM (or SIGINT) and then exits 0.
"""

import argparse
import logging
import signal
import sys
import time

import libvirt
from pyghmi.ipmi.private import serversession
from virtualbmc import vbmc

from bmc_lab import dcmi_commands
from bmc_lab import dcmi_power_meter

LOG = logging.getLogger(__name__)

#: Libvirt domain states that mean "no power to the server board".
_OFF_STATES = (libvirt.VIR_DOMAIN_NOSTATE, libvirt.VIR_DOMAIN_SHUTOFF,
               libvirt.VIR_DOMAIN_CRASHED)


def libvirt_probe(uri, domain_name, clock=time.monotonic):
    """A probe for :class:`~bmc_lab.dcmi_power_meter.CpuPowerMeter`
    over a read-only connection.

    The connection is kept and reopened after an error; a domain that does
    not exist (e.g. while the lab redefines it) reads as powered off.
    """
    state = {'conn': None}

    def probe():
        conn = state['conn']
        if conn is None:
            conn = state['conn'] = libvirt.openReadOnly(uri)
        try:
            try:
                dom = conn.lookupByName(domain_name)
            except libvirt.libvirtError as exc:
                if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                    return dcmi_power_meter.CpuSample(clock(), 0, 0, False)
                raise
            t0 = clock()
            info = dom.info()
            t = (t0 + clock()) / 2.0
            return dcmi_power_meter.CpuSample(
                t=t, cpu_ns=int(info[4]), vcpus=int(info[3]),
                running=info[0] not in _OFF_STATES)
        except libvirt.libvirtError:
            state['conn'] = None
            try:
                conn.close()
            except libvirt.libvirtError:
                pass
            raise

    return probe


def _drop_stray_session_packet(session, data, sockaddr):
    """Stands in for the ``sessionless_data`` pyghmi's ServerSession lacks.

    pyghmi (1.6.19) never expires a ServerSession, so every earlier
    client's session stays registered under its (address, UDP port), and
    each ipmitool run is a new client.  A new ipmitool that gets a used
    source port opens with a sessionless IPMI 1.5 request (Get Channel
    Authentication Capabilities, sequence number and session id 0); the
    io thread queues it to the stale session.  If a second packet from
    that port (the client's retransmission, when a slow libvirt call held
    the main loop) is queued there too before the loop runs,
    ``Session.process_pktqueue`` (session.py:1351-1363) hands the first
    to the IpmiServer, unregistering the stale session
    (``_handle_ipmi_packet``, session.py:1377-1386), then finds the sender
    unregistered and calls ``self.sessionless_data`` on the ServerSession:
    AttributeError, which ends ``listen`` and with it the BMC.

    Drop that packet: the first copy was answered, and whatever the client
    sends next reaches the IpmiServer, the sender being unregistered now.
    """
    LOG.warning('dropped a packet from %s queued to a stale IPMI session '
                '(the client retries)', sockaddr)


# Narrow: only that call, and only while pyghmi has no such method itself.
if not hasattr(serversession.ServerSession, 'sessionless_data'):
    serversession.ServerSession.sessionless_data = _drop_stray_session_packet


class DCMIVirtualBMC(vbmc.VirtualBMC):
    """virtualbmc's VirtualBMC plus DCMI power readings.

    Takes virtualbmc's constructor arguments, plus ``power_model`` and the
    :class:`~bmc_lab.dcmi_power_meter.CpuPowerMeter` timing knobs.
    ``meter`` replaces the libvirt probe (tests).
    """

    def __init__(self, username, password, port, address, domain_name,
                 libvirt_uri, libvirt_sasl_username=None,
                 libvirt_sasl_password=None, power_model=None,
                 window=1.0, stats_period=60.0, sample_interval=0.25,
                 meter=None, **kwargs):
        super().__init__(username, password, port, address, domain_name,
                         libvirt_uri,
                         libvirt_sasl_username=libvirt_sasl_username,
                         libvirt_sasl_password=libvirt_sasl_password,
                         **kwargs)
        self.meter = meter or dcmi_power_meter.CpuPowerMeter(
            libvirt_probe(libvirt_uri, domain_name), model=power_model,
            window=window, stats_period=stats_period,
            sample_interval=sample_interval)

    def handle_raw_request(self, request, session):
        if request['netfn'] != dcmi_commands.NETFN_DCMI:
            return super().handle_raw_request(request, session)
        try:
            code, data = dcmi_commands.handle_dcmi(
                request['command'], list(request['data']), self.meter)
        except Exception:
            LOG.exception('DCMI request %s failed', request)
            code, data = dcmi_commands.CC_UNSPECIFIED, []
        session.send_ipmi_response(data=data, code=code)


def _parse_args(argv):
    p = argparse.ArgumentParser(
        prog='python -m bmc_lab.dcmi_bmc',
        description='A virtualbmc BMC for one libvirt domain that also '
                    'answers DCMI power readings (watts modelled from '
                    'the domain\'s CPU use).')
    p.add_argument('--domain', required=True, help='libvirt domain name')
    p.add_argument('--port', type=int, default=623, help='UDP port')
    p.add_argument('--address', default='127.0.0.1',
                   help='address to bind (default 127.0.0.1)')
    p.add_argument('--username', default='admin')
    p.add_argument('--password', default='password')
    p.add_argument('--libvirt-uri', default='qemu:///system')
    p.add_argument('--libvirt-sasl-username')
    p.add_argument('--libvirt-sasl-password')
    p.add_argument('--idle-watts', type=float,
                   default=dcmi_power_meter.PowerModel.idle_w)
    p.add_argument('--max-watts', type=float,
                   default=dcmi_power_meter.PowerModel.max_w)
    p.add_argument('--standby-watts', type=float,
                   default=dcmi_power_meter.PowerModel.standby_w)
    p.add_argument('--window', type=float, default=1.0,
                   help='seconds the current reading averages over')
    p.add_argument('--stats-period', type=float, default=60.0,
                   help='seconds the min/max/average cover (mode 01h)')
    p.add_argument('--sample-interval', type=float, default=0.25,
                   help='seconds between CPU-time samples')
    p.add_argument('--session-timeout', type=float, default=1.0,
                   help='IPMI loop timeout (as vbmcd\'s session_timeout)')
    p.add_argument('--debug', action='store_true')
    return p.parse_args(argv)


def _stop_on_signal(signum, frame):
    raise SystemExit(0)


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    try:
        model = dcmi_power_meter.PowerModel(
            idle_w=args.idle_watts, max_w=args.max_watts,
            standby_w=args.standby_watts)
    except ValueError as exc:
        sys.exit('dcmi_bmc: %s' % exc)
    # Fail early, with a clear message, when libvirt or the domain is
    # missing (vbmc add checks the same).
    try:
        conn = libvirt.openReadOnly(args.libvirt_uri)
        try:
            conn.lookupByName(args.domain)
        finally:
            conn.close()
    except libvirt.libvirtError as exc:
        sys.exit('dcmi_bmc: domain %s on %s: %s'
                 % (args.domain, args.libvirt_uri, exc))
    try:
        bmc = DCMIVirtualBMC(
            username=args.username, password=args.password, port=args.port,
            address=args.address, domain_name=args.domain,
            libvirt_uri=args.libvirt_uri,
            libvirt_sasl_username=args.libvirt_sasl_username,
            libvirt_sasl_password=args.libvirt_sasl_password,
            power_model=model, window=args.window,
            stats_period=args.stats_period,
            sample_interval=args.sample_interval)
    except OSError as exc:
        sys.exit('dcmi_bmc: cannot listen on %s:%d/udp: %s'
                 % (args.address, args.port, exc))
    signal.signal(signal.SIGTERM, _stop_on_signal)
    signal.signal(signal.SIGINT, _stop_on_signal)
    bmc.meter.start()
    LOG.info('DCMI virtual BMC for domain %s listening on %s:%d/udp '
             '(idle %s W, max %s W, standby %s W)', args.domain,
             args.address, args.port, model.idle_w, model.max_w,
             model.standby_w)
    try:
        bmc.listen(timeout=args.session_timeout)
    finally:
        bmc.meter.stop()
        LOG.info('DCMI virtual BMC for domain %s stopped', args.domain)
    return 0


if __name__ == '__main__':
    sys.exit(main())
