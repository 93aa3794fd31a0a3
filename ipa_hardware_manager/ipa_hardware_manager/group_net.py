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

"""A run group member on the node: its network, its host name, its peers.

The conductor names the group network's NIC by MAC and gives this member
its address there; the agent finds the NIC in sysfs and configures it
with iproute2 (argv lists, no shell, a timeout each).  Doing it again is
harmless: an address already configured alone is left as it is (not
flushed and added back under a running workload's connections).

The NIC must not be the one the agent talks to the conductor through:
flushing its addresses would cut the agent off.  The interface of the
node's default route is refused.

Rank 0 of the ``ssh`` launcher waits until every other member's sshd
accepts a connection before its command (an ``mpirun``) starts: members
boot at their own pace.
"""

import concurrent.futures
import json
import os
import socket
import subprocess
import time

from oslo_log import log

from ipa_hardware_manager import group_args

LOG = log.getLogger(__name__)

GroupError = group_args.GroupError

SYS_CLASS_NET = '/sys/class/net'
IP = 'ip'
IP_TIMEOUT = 10
#: How often rank 0 tries the members not ready yet.
POLL = 0.5
#: A member whose group address does not answer ARP yet would hold a
#: connect for the kernel's SYN retries; the next round tries again.
CONNECT_TIMEOUT = 0.5
#: Members tried at once (a member not up yet costs CONNECT_TIMEOUT).
CONNECT_WORKERS = 32


def run_ip(args):
    """``ip`` with ``args``; its stdout.

    :raises GroupError: it failed, naming the command and its error.
    """
    cmd = [IP, *args]
    try:
        # argv list, no shell: iproute2 with checked arguments.
        done = subprocess.run(  # noqa: S603
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=IP_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise GroupError('ip %s: %s' % (' '.join(args), exc)) from None
    if done.returncode != 0:
        raise GroupError('ip %s failed (exit %d): %s' % (
            ' '.join(args), done.returncode, done.stderr.strip()[-300:]))
    return done.stdout


def find_interface(mac, sysfs=SYS_CLASS_NET):
    """The name of the interface whose MAC is ``mac`` (lowercase).

    A VLAN on the NIC carries its MAC too: with several, the physical
    one (a ``device`` link in sysfs) is the NIC.

    :raises GroupError: none has it (naming the interfaces seen), or
        several NICs do.
    """
    seen = {}
    try:
        names = sorted(os.listdir(sysfs))
    except OSError as exc:
        raise GroupError('cannot list the interfaces in %s: %s'
                         % (sysfs, exc)) from None
    for name in names:
        if name == 'lo':
            continue
        try:
            with open(os.path.join(sysfs, name, 'address')) as f:
                seen[name] = f.read().strip().lower()
        except OSError:
            continue
    found = [n for n, a in seen.items() if a == mac.lower()]
    if len(found) > 1:
        found = [n for n in found if os.path.lexists(
            os.path.join(sysfs, n, 'device'))] or found
    if len(found) == 1:
        return found[0]
    if found:
        raise GroupError('several interfaces have the group network\'s '
                         'MAC %s: %s' % (mac, ', '.join(found)))
    raise GroupError('no interface has the group network\'s MAC %s; seen: '
                     '%s' % (mac, ', '.join('%s (%s)' % kv for kv in
                                            seen.items()) or 'none'))


def _json(run, args):
    try:
        return json.loads(run(['-j', *args]) or '[]')
    except ValueError as exc:
        raise GroupError('ip -j %s: not JSON: %s'
                         % (' '.join(args), exc)) from None


def configure(name, interface, run=None):
    """``interface`` (an ``ipaddress`` interface) alone on ``name``,
    which is up.  The commands issued are returned (for the log).

    :raises GroupError: ``name`` carries the default route, or ``ip``
        failed.
    """
    run = run or run_ip
    for family in ('-4', '-6'):
        for route in _json(run, [family, 'route', 'show', 'default']):
            if route.get('dev') == name:
                raise GroupError(
                    'the group network\'s interface %s carries the node\'s '
                    'default route: it is not a network of its own (its '
                    'addresses are not flushed under the agent)' % name)
    have = set()
    for link in _json(run, ['addr', 'show', 'dev', name]):
        for addr in link.get('addr_info') or ():
            if addr.get('scope') == 'global':
                have.add('%s/%s' % (addr.get('local'), addr.get('prefixlen')))
    issued = []
    if have != {str(interface)}:
        add = ['addr', 'add', str(interface), 'dev', name]
        if interface.version == 6:
            # No duplicate address detection: the conductor allots the
            # addresses, and a tentative one would not answer rank 0.
            add.append('nodad')
        issued += [['addr', 'flush', 'dev', name, 'scope', 'global'], add]
    issued.append(['link', 'set', 'dev', name, 'up'])
    for args in issued:
        run(args)
    LOG.info('Group network on %s: %s%s', name, interface,
             '' if len(issued) > 1 else ' (already configured)')
    return issued


def set_hostname(hostname, sethostname=None, gethostname=None):
    """The node's host name (a privileged container shares its UTS
    namespace, so the workload's too)."""
    sethostname = sethostname or socket.sethostname
    gethostname = gethostname or socket.gethostname
    if gethostname() == hostname:
        return
    try:
        sethostname(hostname)
    except OSError as exc:
        raise GroupError('cannot set the host name %s: %s'
                         % (hostname, exc)) from None


def accepts(address, port, timeout=CONNECT_TIMEOUT):
    """Whether ``address`` accepts a TCP connection on ``port``."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_peers(peers, port, timeout, connect=None, clock=None,
                   sleep=None):
    """Wait until each of ``peers`` (dicts with ``rank``, ``hostname``,
    ``address``) accepts a connection on ``port``, trying every
    :data:`POLL` seconds for up to ``timeout`` seconds; the seconds it
    took.

    :param connect: ``connect(address, port)`` -> bool (:func:`accepts`).
    :raises GroupError: naming the members not ready in time.
    """
    connect = connect or accepts
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    start = clock()
    waiting = list(peers)
    if not waiting:
        return 0.0
    workers = min(CONNECT_WORKERS, len(waiting))
    with concurrent.futures.ThreadPoolExecutor(
            workers, thread_name_prefix='bmc-group-peers') as pool:
        while True:
            ready = list(pool.map(lambda p: connect(p['address'], port),
                                  waiting))
            waiting = [p for p, ok in zip(waiting, ready, strict=True)
                       if not ok]
            elapsed = clock() - start
            if not waiting:
                return elapsed
            if elapsed >= timeout:
                raise GroupError(
                    'rank 0 waited %g s (peer_wait) for the sshd of every '
                    'other member; not ready on port %d: %s' % (
                        timeout, port, _named(waiting)))
            sleep(min(POLL, timeout - elapsed))


def _named(peers, most=10):
    """The members, ``rank N (hostname, address)``, the first ``most``."""
    text = ', '.join('rank %d (%s, %s)' % (p['rank'], p['hostname'],
                                          p['address'])
                     for p in peers[:most])
    if len(peers) > most:
        text += ' and %d more' % (len(peers) - most)
    return text
