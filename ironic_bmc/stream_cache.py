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

"""The stream rootfs mode's bound on the node's block cache.

``container_stream_cache`` (instance_info or the Glance image): a number
of bytes, a size with a unit or a share of the node's RAM, checked
against the node's ``properties/memory_mb``.
"""

import re

from ironic.common import exception
from ironic.common.i18n import _

from bmc_common import protocol
from ironic_bmc import image_properties


_SIZE_RE = re.compile(r'^(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?$', re.I)
_PERCENT_RE = re.compile(r'^(\d+(?:\.\d+)?)\s*%$')
_UNITS = {'': 1, 'K': 1024, 'M': 1024 ** 2, 'G': 1024 ** 3, 'T': 1024 ** 4}


def for_container(node, container):
    """Bytes of the stream mode's cache bound, or None (the default)."""
    if (container.rootfs != protocol.ROOTFS_STREAM
            or container.stream_cache is None):
        return None
    return bytes_of(
        node, container.stream_cache,
        image_properties.where(node, protocol.II_STREAM_CACHE))


def bytes_of(node, value, label):
    """Bytes of ``container_stream_cache``: a number of bytes, a size
    with a unit (``512M``, ``2GiB``) or a share of the node's RAM
    (``25%``), at least 1 MiB and at most the node's RAM."""
    text = str(value).strip()
    try:
        memory_mb = int(node.properties.get('memory_mb') or 0)
    except (TypeError, ValueError):
        memory_mb = 0
    ram = memory_mb * 1024 * 1024
    percent = _PERCENT_RE.match(text)
    size = _SIZE_RE.match(text)
    if percent:
        if not ram:
            raise exception.InvalidParameterValue(
                _('%(label)s: %(value)s is a share of RAM, but node %(node)s '
                  'has no properties/memory_mb; give a size such as 512M')
                % {'label': label, 'value': text, 'node': node.uuid})
        share = float(percent.group(1))
        if not 0 < share <= 100:
            raise exception.InvalidParameterValue(
                _('%(label)s: a share of RAM must be more than 0%% and at '
                  'most 100%%, got %(value)s')
                % {'label': label, 'value': text})
        result = int(ram * share / 100)
    elif size:
        result = int(float(size.group(1)) * _UNITS[size.group(2).upper()])
    else:
        raise exception.InvalidParameterValue(
            _('%(label)s must be a size (bytes, or with a unit: 512M, '
              '2G) or a share of the node\'s RAM (25%%), got %(value)r')
            % {'label': label, 'value': value})
    if result < 1024 * 1024:
        raise exception.InvalidParameterValue(
            _('%(label)s: %(value)s is less than 1 MiB; the node\'s block '
              'cache needs at least that') % {'label': label, 'value': text})
    if ram and result > ram:
        raise exception.InvalidParameterValue(
            _('%(label)s: %(value)s (%(mib)d MiB) is more than the RAM of '
              'node %(node)s (properties/memory_mb: %(ram)d MiB)')
            % {'label': label, 'value': text, 'mib': result // 1024 // 1024,
               'node': node.uuid, 'ram': memory_mb})
    return result
