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

"""The deploy's configdrive: read, checked, published for the agent.

Ironic keeps the configdrive of ``openstack baremetal node deploy
--config-drive`` (or Nova's) in ``instance_info/configdrive``: a gzipped,
base64-encoded ISO 9660 image, a JSON object Ironic turns into one
(``configdrive_utils.get_configdrive_image``, which needs genisoimage,
mkisofs or xorrisofs on the conductor host), or, with
``[deploy]configdrive_use_object_store``, the Swift temporary URL Ironic
uploaded it to.  Only that URL is fetched: whoever may patch
``instance_info`` could put any URL there, and the conductor would reach
a host of their choosing (and say in ``last_error`` whether it answered),
so a URL that is not Swift's for this node's object is refused before
any request.  Its bytes are the tenant's, so they are read with bounds
(``[container]configdrive_max_kb`` on the text, the download and what
the gzip stream unpacks to) and checked by the reader the agent uses
(:mod:`bmc_common.configdrive`): an ISO 9660 image labelled ``config-2``
whose tree and meta_data.json it accepts.

The checked ISO is published like the rootfs artifact, under the
conductor's HTTP root at a per-node, per-deploy random path, and the
start step gets its URL, sha256 and size (a few hundred bytes in
``driver_internal_info``, whatever the drive's size; inline in the step
it would also come back in every reply of the agent that lists its
commands).  The agent checks the digest.  The URL stops existing once
the workload has started.
"""

import base64
import binascii
import gzip
import hashlib
import os
import re
import tempfile
from urllib import parse as urlparse
import zlib

from ironic.common import exception
from ironic.common.i18n import _
from ironic.common import keystone
from ironic.common import swift
from ironic.conductor import configdrive_utils
from oslo_log import log
from oslo_utils import strutils
import requests

from bmc_common import configdrive as reader
from bmc_common import protocol
from ironic_bmc.conf import CONF
from ironic_bmc.drivers import boot_files

LOG = log.getLogger(__name__)

#: driver_internal_info key of the published ISO's directory.
DIR_KEY = 'bmc_configdrive_token_dir'
#: Where its URL is kept (a "token" key: Ironic's API masks it for
#: whoever may not see the node's secrets).
URL_KEY = 'token_url'
#: The ISO's name under it.
NAME = 'config-2.iso'
#: Bytes read at a time.
CHUNK = 1024 * 1024
#: Seconds a configdrive URL (Swift) may take to answer, and to send all.
FETCH_TIMEOUT = 60
#: Paths of files the report lists, and characters they may take
#: together (the report lives in driver_internal_info).
REPORT_FILES = 32
REPORT_FILES_CHARS = 2048

LABEL = 'instance_info/%s' % protocol.CONFIGDRIVE_KEY


class Refused(exception.InvalidParameterValue):
    """The configdrive is malformed or too large; the message says why."""


def _malformed(reason):
    return Refused(
        _('%(label)s is not a gzipped base64 ISO 9660 image labelled '
          '%(cd)s: %(reason)s')
        % {'label': LABEL, 'cd': reader.LABEL, 'reason': reason})


def _mib(size):
    return '%.1f MiB' % (size / 1024 / 1024)


def _too_large(what):
    return Refused(
        _('%(label)s is %(what)s, more than [container]configdrive_max_kb '
          '(%(max)d KiB)') % {'label': LABEL, 'what': what,
                              'max': CONF.container.configdrive_max_kb})


def max_bytes():
    return CONF.container.configdrive_max_kb * 1024


def _encoded_max():
    # base64 of a gzip stream of at most max_bytes (gzip adds a little
    # to what does not compress).
    return (max_bytes() + max_bytes() // 100 + 1024) * 4 // 3 + 4


def optional(node):
    """Whether a refused configdrive is left out rather than failing."""
    value = node.instance_info.get(protocol.II_CONFIGDRIVE_OPTIONAL)
    if value in (None, ''):
        return CONF.container.configdrive_optional
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError:
        raise exception.InvalidParameterValue(
            _('instance_info/%(key)s must be true or false, got %(value)r')
            % {'key': protocol.II_CONFIGDRIVE_OPTIONAL,
               'value': value}) from None


def _text(node):
    """The configdrive as Ironic hands it to a deploy interface: base64
    text or a URL; None without one."""
    value = node.instance_info.get(protocol.CONFIGDRIVE_KEY)
    if value in (None, '', {}):
        return None
    if isinstance(value, dict):
        try:
            value = configdrive_utils.get_configdrive_image(node)
        except Exception as exc:
            raise _malformed(_('Ironic could not build the ISO from its '
                               'JSON (it needs genisoimage, mkisofs or '
                               'xorrisofs on the conductor host): %s')
                             % exc) from None
    if not isinstance(value, str):
        raise _malformed(_('a %s, not a string') % type(value).__name__)
    return value


def _not_stored_by_ironic():
    # One message whatever the URL names: nothing is fetched, so nothing
    # of a host or port the URL names can show in last_error.
    return Refused(
        _('%(label)s is a URL that is not the configdrive Ironic stored '
          'for this node (the Swift temporary URL of object '
          'configdrive-<node UUID> that [deploy]'
          'configdrive_use_object_store makes): refused, not fetched')
        % {'label': LABEL})


def _check_stored_by_ironic(node, url):
    """Refuse ``url`` unless it is the Swift temporary URL Ironic makes
    for ``node``'s configdrive, before any request to it.

    Ironic (``deployments._store_configdrive``, ``SwiftAPI.get_temp_url``)
    uploads the drive as object ``configdrive-<node UUID>`` of container
    ``[conductor]configdrive_swift_container`` and stores Swift's endpoint
    (scheme, host and port) with the path ``<endpoint path>/<container>/
    <object>`` and the ``temp_url_*`` query of the signature.  The same
    are recomputed here and must match exactly.
    """
    parts = urlparse.urlsplit(url)
    try:
        # As SwiftAPI.get_temp_url parses it (urlparse: without ;params).
        endpoint = urlparse.urlparse(keystone.get_endpoint(
            'swift', session=swift.get_swift_session()))
    except Exception as exc:
        LOG.warning('Node %(node)s: cannot find Swift\'s endpoint to check '
                    'its configdrive URL against: %(err)s',
                    {'node': node.uuid, 'err': exc})
        raise Refused(
            _('%s is a URL, and the conductor cannot find Swift\'s '
              'endpoint to check that it is the configdrive Ironic stored '
              'for this node: refused, not fetched') % LABEL) from None
    path = '/'.join((endpoint.path,
                     CONF.conductor.configdrive_swift_container,
                     'configdrive-%s' % node.uuid))
    try:
        query = urlparse.parse_qsl(parts.query, keep_blank_values=True,
                                   strict_parsing=bool(parts.query))
    except ValueError:
        query = None
    if ((parts.scheme, parts.netloc, parts.path)
            != (endpoint.scheme, endpoint.netloc, path)
            # (urlsplit drops tabs and newlines; requests may not)
            or any(c <= ' ' or c == '\x7f' for c in url)
            or parts.fragment or query is None
            or not all(key.startswith('temp_url_') for key, _v in query)):
        raise _not_stored_by_ironic()


def _fetch(node, url):
    """The text at a configdrive URL, bounded: only the Swift temporary
    URL Ironic stored for ``node``."""
    if not CONF.deploy.configdrive_use_object_store:
        # Ironic puts a URL there itself only when it uploaded the
        # drive; any other URL names a host for the conductor to reach.
        raise _malformed(_('a URL, and the conductor fetches only the '
                           'Swift URL Ironic makes with '
                           '[deploy]configdrive_use_object_store'))
    if not url.startswith(('http://', 'https://')):
        raise _malformed(_('a URL that is not http(s)'))
    _check_stored_by_ironic(node, url)
    limit = _encoded_max()
    try:
        with requests.get(url, stream=True, timeout=FETCH_TIMEOUT,
                          allow_redirects=False) as resp:
            resp.raise_for_status()
            data = bytearray()
            for chunk in resp.iter_content(CHUNK):
                data += chunk
                if len(data) > limit:
                    raise _too_large(_('more than %s at its URL')
                                     % _mib(limit))
    except requests.RequestException as exc:
        raise _malformed(_('its URL could not be read: %s') % exc) from None
    return bytes(data)


def _unpack(encoded, out):
    """base64 text -> gzip -> ``out``, at most max_bytes; returns the
    bytes written and their sha256."""
    if len(encoded) > _encoded_max():
        raise _too_large(_('%s of base64 text') % _mib(len(encoded)))
    try:
        packed = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _malformed(_('not base64: %s') % exc) from None
    limit = max_bytes()
    digest = hashlib.sha256()
    total = 0
    try:
        with gzip.GzipFile(fileobj=_Bytes(packed), mode='rb') as gz:
            while True:
                chunk = gz.read(CHUNK)
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise _too_large(_('more than %s unpacked')
                                     % _mib(limit))
                digest.update(chunk)
                out.write(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise _malformed(_('not gzip: %s') % exc) from None
    return total, digest.hexdigest()


class _Bytes:
    """A read-only file over bytes, without a copy."""

    def __init__(self, data):
        self.view = memoryview(data)
        self.pos = 0

    def read(self, size=-1):
        end = len(self.view) if size < 0 else self.pos + size
        chunk = bytes(self.view[self.pos:end])
        self.pos += len(chunk)
        return chunk


class Drive:
    """A checked configdrive in a temporary file (``path``)."""

    def __init__(self, path, size, sha256, entries, keys, server=None):
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.entries = entries
        self.keys = keys
        #: What Nova says of the server (bmc_common.configdrive.server).
        self.server = server

    def report(self):
        files = [e.path for e in self.entries if not e.is_dir]
        listed, chars = [], 0
        for path in files[:REPORT_FILES]:
            chars += len(path)
            if chars > REPORT_FILES_CHARS:
                break
            listed.append(path)
        return {'used': True, 'bytes': self.size, 'sha256': self.sha256,
                'file_count': len(files), 'files': listed,
                'public_keys': self.keys}

    def discard(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


def read(node):
    """The node's configdrive, checked, in a temporary file; None when
    the deploy has none.

    :raises Refused: naming the key and the reason.
    """
    text = _text(node)
    if text is None:
        return None
    if '://' in text[:16]:
        encoded = _fetch(node, text)
    elif len(text) > _encoded_max():
        raise _too_large(_('%s of base64 text') % _mib(len(text)))
    else:
        encoded = text.encode('ascii', 'replace')
    fd, path = tempfile.mkstemp(prefix='bmc-configdrive-',
                                dir=CONF.tempdir)
    try:
        with os.fdopen(fd, 'w+b') as out:
            size, sha256 = _unpack(encoded, out)
            out.flush()
            try:
                image, entries = reader.check(out, size)
                keys = len(reader.public_keys(image, entries))
                server = reader.server(image, entries)
            except reader.ConfigDriveError as exc:
                raise _malformed(str(exc)) from None
    except BaseException:
        os.unlink(path)
        raise
    return Drive(path, size, sha256, entries, keys, server)


def prepare(task):
    """Check the deploy's configdrive and publish it for the agent.

    :returns: ``(what the start step needs, for driver_internal_info
        (see :func:`step_arg`), or None; report section or None; what
        Nova says of the server (``bmc_common.configdrive.server``) or
        None)``.
    :raises Refused: a configdrive that is malformed or too large, unless
        the operator lets the run go on without it.
    """
    node = task.node
    unpublish(task)
    go_on = optional(node)
    try:
        drive = read(node)
    except Refused as exc:
        if not go_on:
            raise
        LOG.warning('Node %(node)s deploys without its configdrive '
                    '(%(key)s): %(err)s',
                    {'node': node.uuid,
                     'key': protocol.II_CONFIGDRIVE_OPTIONAL, 'err': exc})
        return None, {'used': False, 'reason': str(exc)}, None
    if drive is None:
        return None, None, None
    try:
        url = boot_files.publish_files(task, 'configdrive', DIR_KEY,
                                       [(drive.path, NAME)])
    finally:
        drive.discard()
    return ({URL_KEY: url, 'sha256': drive.sha256, 'size': drive.size,
             'authorized_keys': CONF.container.configdrive_authorized_keys},
            drive.report(), drive.server)


def step_arg(info):
    """The start step's ``configdrive`` argument from what
    :func:`prepare` returned (kept in driver_internal_info), or None."""
    if not info:
        return None
    arg = dict(info)
    arg['url'] = arg.pop(URL_KEY)
    return arg


def unpublish(task):
    boot_files.unpublish(task, DIR_KEY)


_LOOP = re.compile(r'^/dev/loop[0-9]{1,5}$')


def node_facts(given):
    """What the agent says it did with the configdrive (the start step's
    ``configdrive``), checked: it answers once the workload, root next
    to it, has started.  Only counts, seconds and a loop device's name
    are kept."""
    if not isinstance(given, dict):
        return None
    out = {}
    for key in ('files', 'authorized_keys'):
        value = given.get(key)
        if (isinstance(value, int) and not isinstance(value, bool)
                and 0 <= value <= reader.MAX_FILES):
            out[key] = value
    seconds = given.get('seconds')
    if (isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
            and 0 <= seconds < 86400):
        out['seconds'] = round(float(seconds), 3)
    device = given.get('device')
    out['device'] = (device if isinstance(device, str)
                     and _LOOP.match(device) else None)
    return out
