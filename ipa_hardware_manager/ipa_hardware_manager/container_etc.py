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

"""The container's ``/etc/resolv.conf``, ``/etc/hosts`` and
``/etc/hostname``, as a container engine writes them.

Docker gives every container these three files (bind mounts of its own
copies over the image's).  Here they are written into the run's root,
which is the run's own copy (a tree in RAM, or an overlay's upper
layer): ``resolv.conf`` when the root is staged, the other two when the
workload starts, when its hostname is known.  ``/etc/hosts`` names the
hostname with the node's address, so that what resolves its own name
(MPI/PMIx, Java's ``InetAddress.getLocalHost()``, many daemons) works
without DNS.

Paths are resolved inside the root (the image's symlinks never lead to
the agent's files); an image whose ``/etc`` is not a directory gets
nothing, with a warning.
"""

import ipaddress
import json
import os
import shutil
import subprocess

from oslo_log import log

from ipa_hardware_manager import container_root
from ipa_hardware_manager import oci_spec

LOG = log.getLogger(__name__)

#: The address /etc/hosts gives the hostname when the node has no route
#: out (Debian's convention for a host without a fixed address).
FALLBACK_ADDRESS = '127.0.1.1'
LOCALHOST_LINES = ('127.0.0.1\tlocalhost',
                   '::1\tlocalhost ip6-localhost ip6-loopback')


def _destination(root, path):
    """Where ``path`` of the image is on the node, or None when it cannot
    be written (its directory is missing or not a directory)."""
    if os.path.realpath(root) == '/':
        # Never the agent's own files (a root that is the node's).
        LOG.warning('Not writing %s: the root given is the node\'s', path)
        return None
    try:
        # The directory's links are followed inside the root; the file's
        # own link (if the image has one) is replaced, never followed.
        parent = container_root.resolve_in_root(root, os.path.dirname(path))
    except oci_spec.SpecError as exc:
        LOG.warning('Not writing %s into the container: %s', path, exc)
        return None
    dst = os.path.join(parent, os.path.basename(path))
    if not os.path.lexists(parent) and os.path.dirname(parent) == root:
        # An image without /etc (FROM scratch): Docker's bind mounts
        # create it too.
        os.mkdir(parent, 0o755)
    if not os.path.isdir(parent) or os.path.islink(parent):
        LOG.warning('Not writing %s into the container: its directory '
                    'is not a directory in the image', path)
        return None
    return dst


def _replace(dst, write):
    if os.path.islink(dst) or os.path.lexists(dst):
        if os.path.isdir(dst) and not os.path.islink(dst):
            shutil.rmtree(dst)
        else:
            os.unlink(dst)
    write(dst)
    os.chmod(dst, 0o644)


def write_file(root, path, text):
    """``text`` as the file ``path`` of the container (0644, root's);
    whether it was written."""
    dst = _destination(root, path)
    if dst is None:
        return False

    def write(name):
        with open(name, 'w') as f:
            f.write(text)
    try:
        _replace(dst, write)
    except OSError as exc:
        LOG.warning('Could not write %s into the container: %s', path, exc)
        return False
    return True


def copy_resolv_conf(root, src='/etc/resolv.conf'):
    """The agent's resolver configuration as the container's."""
    if not os.path.isfile(src):
        return False
    dst = _destination(root, '/etc/resolv.conf')
    if dst is None:
        return False
    try:
        _replace(dst, lambda name: shutil.copyfile(src, name))
    except OSError as exc:
        LOG.warning('Could not copy resolv.conf into the root: %s', exc)
        return False
    return True


def _ip_json(*args):
    cmd = ['ip', '-j', *args]
    try:
        # argv list, no shell: iproute2 with fixed arguments.
        done = subprocess.run(  # noqa: S603
            cmd, stdin=subprocess.DEVNULL,
            capture_output=True, timeout=10, check=True)
        return json.loads(done.stdout or b'[]')
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        LOG.warning('ip %s failed: %s', ' '.join(args), exc)
        return []


def node_addresses():
    """The global addresses of the interface that carries the default
    route (IPv4 first), or [] when the node has none."""
    devices = []
    for family in ('-4', '-6'):
        for route in _ip_json(family, 'route', 'show', 'default'):
            if route.get('dev') and route['dev'] not in devices:
                devices.append(route['dev'])
    found = []
    for dev in devices:
        for link in _ip_json('addr', 'show', 'dev', dev):
            for addr in link.get('addr_info') or ():
                local = addr.get('local')
                if addr.get('scope') != 'global' or not local:
                    continue
                try:
                    ipaddress.ip_address(local)
                except ValueError:
                    continue
                if local not in found:
                    found.append(local)
    return sorted(found, key=lambda a: ipaddress.ip_address(a).version)


def hosts_text(hostname, addresses):
    """``/etc/hosts``: localhost, and the hostname at the node's first
    address of each family (the fallback without one)."""
    lines = list(LOCALHOST_LINES)
    short = hostname.split('.', 1)[0]
    names = hostname if short == hostname else '%s %s' % (hostname, short)
    seen = set()
    for address in addresses or (FALLBACK_ADDRESS,):
        version = ipaddress.ip_address(address).version
        if version not in seen:
            seen.add(version)
            lines.append('%s\t%s' % (address, names))
    return '\n'.join(lines) + '\n'


def write_identity(root, hostname, addresses=None, extra_hosts=()):
    """The container's /etc/hosts and /etc/hostname for ``hostname``;
    ``addresses`` default to :func:`node_addresses`; ``extra_hosts``
    (lines, a run group's members) end /etc/hosts."""
    if addresses is None:
        addresses = node_addresses()
    text = hosts_text(hostname, addresses)
    text += ''.join(line + '\n' for line in extra_hosts)
    write_file(root, '/etc/hosts', text)
    write_file(root, '/etc/hostname', hostname + '\n')
