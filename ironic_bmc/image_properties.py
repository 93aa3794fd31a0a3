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

"""Container keys from the Glance image a deploy names: the tenant path.

Nova's ironic driver sets ``instance_info/image_source`` to the Glance
image's UUID and copies none of the image's properties.  A container
image for tenants is a (tiny) Glance image whose properties name what to
run: the keys of :data:`TENANT_KEYS`, plus ``kernel_id``/``ramdisk_id``
(Glance images of the kernel to boot and of that kernel's modules).

* ``instance_info`` wins over the image: what the operator set stays.
* A property can only set what a tenant may choose.  URLs of boot files
  (``kernel``, ``ramdisk``, ``kernel_modules``: a ``file://`` URL reads
  the conductor's disk), registry credentials and the diagnostics keys
  stay operator-only, in ``instance_info``: an image that sets one is
  refused, naming it, so that a tenant never believes a setting was
  applied; ``kernel_id``/``ramdisk_id`` must be Glance image UUIDs.
* The agent ramdisk is the operator's, always: a tenant's ``ramdisk_id``
  is the modules initrd of its kernel (``kernel_modules``), unpacked
  over the agent's, and only with a ``kernel_id`` (the default kernel's
  modules are the operator's too).  A ramdisk of the tenant's booted as
  the agent would receive the node's agent token at lookup and speak for
  the node during the deploy.
* What the image said is snapshotted in ``driver_internal_info`` when
  the deploy starts (:func:`snapshot`), so every later step and a
  rebuild's report see the values the run used even if the image
  changes; the snapshot goes at tear down (:func:`forget`).
"""

from ironic.common import exception
from ironic.common.glance_service import service_utils
from ironic.common.i18n import _
from ironic.drivers.modules import deploy_utils
from oslo_utils import uuidutils

from bmc_common import protocol

#: Image properties a tenant may set (named as in instance_info).
TENANT_KEYS = (protocol.II_IMAGE, protocol.II_COMMAND, protocol.II_ARGS,
               protocol.II_ENV,
               protocol.II_MODE, protocol.II_ROOTFS, protocol.II_TUNABLES,
               protocol.II_STREAM_CACHE, protocol.II_TUNABLES_STRICT,
               protocol.II_WALLTIME, protocol.II_PRIVILEGED,
               protocol.II_RLIMITS, protocol.II_RESULTS)
#: Glance image properties naming boot files -> the instance_info key.
#: (A tenant's ramdisk holds its kernel's modules, never the agent.)
BOOT_IMAGE_KEYS = {'kernel_id': 'kernel', 'ramdisk_id': 'kernel_modules'}
#: The Glance disk_format of a kernel / ramdisk a tenant names (Glance's
#: and Ironic's convention for partition images' boot files).
BOOT_IMAGE_FORMATS = {'kernel': 'aki', 'kernel_modules': 'ari'}
#: Keys only the operator may set (in instance_info), refused as image
#: properties.
OPERATOR_KEYS = ('kernel', 'ramdisk', 'kernel_modules', 'image_pull_secret',
                 protocol.II_MEASURE_LINK, protocol.II_NOISE_PROBE,
                 protocol.II_CONFIGDRIVE_OPTIONAL)
#: driver_internal_info key of the snapshot.
SNAPSHOT_KEY = 'bmc_image_properties'


def glance_image(node):
    """The Glance image the deploy names, or None."""
    source = (node.instance_info or {}).get('image_source')
    if source and service_utils.is_glance_image(source):
        return source
    return None


def fetch(task):
    """The container keys the node's Glance image sets ({} without one).

    :raises: InvalidParameterValue if Glance cannot show the image (not
        found, not visible to the caller) or a property is unusable.
    """
    source = glance_image(task.node)
    if not source:
        return {}
    # Once per task: validate and the deploy step run in one conductor
    # task (one lock), and ask for the same image.
    memo = getattr(task, '_bmc_image_properties', None)
    if memo and memo[0] == source:
        return dict(memo[1])
    keys = _read(task, source)
    task._bmc_image_properties = (source, keys)
    return dict(keys)


def _read(task, source):
    props = deploy_utils.get_image_properties(task.context, source)
    forbidden = sorted(k for k in OPERATOR_KEYS
                       if props.get(k) not in (None, ''))
    if forbidden:
        raise exception.InvalidParameterValue(
            _('Glance image %(image)s: property %(props)s may only be set '
              'by the operator, in the node\'s instance_info; a tenant '
              'names boot files with kernel_id/ramdisk_id (Glance images)')
            % {'image': source, 'props': ', '.join(forbidden)})
    keys = {k: props[k] for k in TENANT_KEYS
            if props.get(k) not in (None, '')}
    for prop, key in BOOT_IMAGE_KEYS.items():
        value = props.get(prop)
        if value in (None, ''):
            continue
        if not uuidutils.is_uuid_like(value):
            raise exception.InvalidParameterValue(
                _('Glance image %(image)s: property %(prop)s must be the '
                  'UUID of a Glance image, got %(value)r') % {
                    'image': source, 'prop': prop, 'value': value})
        keys[key] = value
    if 'kernel_modules' in keys and 'kernel' not in keys:
        raise exception.InvalidParameterValue(
            _('Glance image %(image)s: property ramdisk_id names the '
              'modules initrd of the kernel the image boots (kernel_id), '
              'and kernel_id is not set; the agent ramdisk and the default '
              'kernel\'s modules are the operator\'s') % {'image': source})
    return keys


def snapshot(task, props=None):
    """Keep what the image says for this deploy; returns it."""
    props = fetch(task) if props is None else props
    if props:
        task.node.set_driver_internal_info(SNAPSHOT_KEY, props)
    else:
        task.node.del_driver_internal_info(SNAPSHOT_KEY)
    return props


def forget(node):
    node.del_driver_internal_info(SNAPSHOT_KEY)


def effective(node):
    """The container keys in force: instance_info over the snapshot."""
    merged = dict(node.driver_internal_info.get(SNAPSHOT_KEY) or {})
    merged.update({k: v for k, v in (node.instance_info or {}).items()
                   if v not in (None, '')})
    return merged


def where(node, key):
    """Name where ``key`` comes from, for an error message."""
    if from_image(node, key):
        prop = {v: k for k, v in BOOT_IMAGE_KEYS.items()}.get(key, key)
        return _('property %(prop)s of Glance image %(image)s') % {
            'prop': prop, 'image': glance_image(node)}
    return 'instance_info/%s' % key


def from_image(node, key):
    """True if ``key`` is in force from the Glance image (the tenant's),
    not from instance_info (the operator's)."""
    info = node.instance_info or {}
    snap = node.driver_internal_info.get(SNAPSHOT_KEY) or {}
    return info.get(key) in (None, '') and key in snap


def check_boot_image(node, key, image_info):
    """A tenant's kernel_id / ramdisk_id names a kernel / ramdisk.

    ``image_info``: what Glance shows of that image.  Pointing kernel_id
    at the container's own image (a common slip) would otherwise boot the
    node into iPXE's "Exec format error".

    :raises: InvalidParameterValue naming the property and both images.
    """
    wanted = BOOT_IMAGE_FORMATS[key]
    found = image_info.get('disk_format')
    if found != wanted:
        noun = {'kernel': 'kernel', 'kernel_modules': 'ramdisk'}[key]
        raise exception.InvalidParameterValue(
            _('%(where)s: image %(id)s is not a %(noun)s (disk_format '
              '%(found)s); upload the %(noun)s with --disk-format '
              '%(wanted)s --container-format %(wanted)s') % {
                'where': where(node, key), 'id': image_info.get('id'),
                'noun': noun, 'found': found, 'wanted': wanted})
