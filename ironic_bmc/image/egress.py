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

"""Where the conductor connects for an image, and where credentials go.

A tenant names the image (a Glance property), so a tenant names the host
the conductor connects to, and the registry names further hosts (its
Bearer realm, its redirects).  Two rules, enforced on every request of a
registry session (:class:`GuardAdapter`), redirects and token requests
included:

* **Addresses.**  A host the operator did not list in
  ``[container]allowed_registries`` must resolve to global addresses
  only: never loopback, private, link-local, multicast or reserved
  ranges, nor the conductor's own ``my_ip``/``my_ipv6``.  The conductor is
  no scanner of the control plane.  The name is resolved before the
  request, and the peer of each connection is checked again before a
  byte is sent on it (a name that resolves differently the second time,
  DNS rebinding, gets nothing through).  Through an HTTP proxy only the
  first check applies: the proxy connects.
* **Credentials.**  A request that carries an ``Authorization`` header
  goes only to a host in ``[container]credential_registries`` (the
  operator's pull secret, and the tokens it buys, reach no other host).
  :func:`pull_secret_for` drops the secret at parse time for an image of
  another registry.
"""

import ipaddress
import socket
from urllib import parse

from requests import adapters
from urllib3 import connection as u3connection
from urllib3 import connectionpool as u3pool

from ironic_bmc.conf import CONF
from ironic_bmc.image import exceptions as exc
from ironic_bmc.image import reference


def _host_port(url):
    parts = parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == 'https' else 80)
    host = parts.hostname or ''
    return host, port


def host_port(netloc):
    """(host, port) of a registry's ``host[:port]`` (443 by default)."""
    parts = parse.urlsplit('//' + netloc)
    return parts.hostname or '', parts.port or 443


def _listed(host, port, entries):
    name = '[%s]' % host if ':' in host else host
    return reference.registry_in('%s:%d' % (name, port), entries)


def operator_listed(url):
    """Whether the operator listed the host of ``url`` as a registry."""
    host, port = _host_port(url)
    return _listed(host, port, CONF.container.allowed_registries)


def _own_addresses():
    own = set()
    for value in (CONF.my_ip, getattr(CONF, 'my_ipv6', None)):
        if value:
            try:
                own.add(ipaddress.ip_address(value))
            except ValueError:
                pass
    return own


def why_refused(address):
    """Why the conductor may not connect to ``address`` for a host the
    operator did not list; None when it may."""
    try:
        ip = ipaddress.ip_address(address.split('%', 1)[0])
    except ValueError:
        return 'not an IP address'
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    for test, what in ((ip.is_loopback, 'loopback'),
                       (ip.is_link_local, 'link-local'),
                       (ip.is_multicast, 'multicast'),
                       (ip.is_unspecified, 'unspecified'),
                       (ip.is_private, 'private'),
                       (ip.is_reserved, 'reserved')):
        if test:
            return '%s, a %s address' % (ip, what)
    if not ip.is_global:
        return '%s, not a global address' % ip
    if ip in _own_addresses():
        return '%s, the conductor\'s own address' % ip
    return None


def check_host(host, port):
    """Refuse a host (not listed by the operator) that resolves to an
    address the conductor may not connect to.

    :returns: None
    :raises: RegistryRefused naming the host and the address.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return      # the request itself says it cannot be reached
    for info in infos:
        why = why_refused(info[4][0])
        if why:
            raise exc.RegistryRefused(
                host='%s:%d' % (host, port),
                reason='it resolves to %s; list it in '
                       '[container]allowed_registries to pull from it' % why)


def pull_secret_for(registry, secret, tenant_image=False):
    """The operator's pull secret, if it may go to ``registry``.

    :param tenant_image: the image is named by a Glance image property
        (a tenant's choice): the registry must be listed in
        ``[container]tenant_credential_registries`` too.
    :returns: (the secret or None, the rule that withheld it or None).
    """
    if not secret:
        return None, None
    if not reference.registry_in(registry,
                                 CONF.container.credential_registries):
        return None, 'sent only to the registries of ' \
            '[container]credential_registries'
    if tenant_image and not reference.registry_in(
            registry, CONF.container.tenant_credential_registries):
        return None, 'not sent for an image a Glance image property ' \
            'names unless its registry is in ' \
            '[container]tenant_credential_registries'
    return secret, None


class GuardAdapter(adapters.BaseAdapter):
    """Wraps a session's adapter: applies the two rules to each request.

    :param with_secret: the session holds the operator's pull secret (or
        a token bought with it); without one, its Authorization headers
        carry anonymous tokens, which may go anywhere.
    """

    def __init__(self, inner, with_secret):
        super().__init__()
        self.inner = inner
        self.with_secret = with_secret
        #: Hosts whose names were checked: once per session (a blob
        #: request each is no reason to ask DNS again; every new
        #: connection's peer is checked anyway).
        self._checked = set()

    def send(self, request, **kwargs):
        host, port = _host_port(request.url)
        if (self.with_secret and request.headers.get('Authorization')
                and not _listed(host, port,
                                CONF.container.credential_registries)):
            raise exc.RegistryRefused(
                host='%s:%d' % (host, port),
                reason='the registry sends the conductor\'s credentials '
                       'there (a token realm or a redirect), and it is not '
                       'in [container]credential_registries')
        if (host, port) not in self._checked:
            if not operator_listed(request.url):
                check_host(host, port)
            self._checked.add((host, port))
        return self.inner.send(request, **kwargs)

    def close(self):
        self.inner.close()


class _PeerChecked:
    """A urllib3 connection that checks whom it connected to, before it
    sends a byte (TLS included): the name may resolve differently at the
    connection than when :func:`check_host` looked (DNS rebinding)."""

    def _new_conn(self):
        sock = super()._new_conn()
        if _listed(self.host, self.port or 443,
                   CONF.container.allowed_registries):
            return sock
        try:
            peer = sock.getpeername()[0]
        except OSError:
            return sock
        why = why_refused(peer)
        if why:
            sock.close()
            raise exc.RegistryRefused(
                host='%s:%s' % (self.host, self.port),
                reason='it connected to %s (its name resolved differently '
                       'a moment before)' % why)
        return sock


class _HTTPConnection(_PeerChecked, u3connection.HTTPConnection):
    pass


class _HTTPSConnection(_PeerChecked, u3connection.HTTPSConnection):
    pass


class _HTTPPool(u3pool.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(u3pool.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def guard(session, with_secret):
    """Put the guard in front of every adapter of a requests session, and
    check the peer of every direct connection it makes."""
    for prefix in ('https://', 'http://'):
        inner = session.get_adapter(prefix + 'registry')
        if isinstance(inner, GuardAdapter):
            inner = inner.inner
        pools = getattr(inner, 'poolmanager', None)
        if pools is not None:
            pools.clear()
            pools.pool_classes_by_scheme = {'http': _HTTPPool,
                                            'https': _HTTPSPool}
        session.mount(prefix, GuardAdapter(inner, with_secret))
    return session
