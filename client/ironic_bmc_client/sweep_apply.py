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

"""``sweep --apply-image`` / ``--apply-template``: the winning cell
becomes what the next run of the image uses, where OpenStack keeps it.

* A Glance image: its ``container_tunables`` property (the profile, or
  removed for "none") and ``kernel_id``/``ramdisk_id`` (the kernel and
  its modules initrd as Glance images; removed for the node's default
  kernel).  Every later server of that image boots that way.
* A deploy template (a flavor's trait): its one step,
  ``deploy.bmc_apply_tunables`` with the winning profile, so every
  flavor requiring the trait uses it.  Templates select tunables, not
  kernels: a winning kernel other than the default is refused there.

What could stop the winner being recorded is checked before the sweep
starts (:func:`check_image`, :func:`check_template`): every swept kernel
must be a Glance image for ``--apply-image``, only the default kernel is
swept for ``--apply-template``, and a template a sweep did not write is
never overwritten.  The change itself is one request.
"""

import json
import re
import uuid

from bmc_common import protocol

KERNEL_ID = 'kernel_id'
RAMDISK_ID = 'ramdisk_id'
PATCH_TYPE = 'application/openstack-images-v2.1-json-patch'
TRAIT_RE = re.compile(r'^CUSTOM_[A-Z0-9_]{1,248}$')
#: extra key marking a deploy template a sweep wrote (the image swept).
TEMPLATE_MARK = 'bmc_sweep_image'
STEP = {'interface': 'deploy', 'step': protocol.STEP_APPLY_TUNABLES,
        'priority': 85}
NO_TUNABLES = 'none'
DEFAULT_KERNEL = 'default'


class ApplyError(Exception):
    """The winner cannot be recorded there; nothing was changed."""


def _is_uuid(text):
    try:
        uuid.UUID(str(text))
    except ValueError:
        return False
    return True


def _tunables_value(profile):
    """The profile as a step argument (a name, or the knobs' object)."""
    if profile.lstrip().startswith('{'):
        return json.loads(profile)
    return profile


def check_image(session, endpoint, ref, kernel_urls):
    """Before the sweep: the image exists, every kernel is in Glance.

    :raises ApplyError: naming what is wrong.
    """
    for name, keys in sorted(kernel_urls.items()):
        not_glance = [v for v in (keys.get('kernel'),
                                  keys.get('kernel_modules'))
                      if v and not _is_uuid(v)]
        if not_glance:
            raise ApplyError(
                'kernel %s is %s, not a Glance image, and could win: a '
                'Glance image\'s kernel_id and ramdisk_id name Glance '
                'images. Upload the kernel (and its modules initrd) to '
                'Glance and sweep them as --kernel %s=<kernel image id>'
                '[,<modules image id>]' % (name, ', '.join(not_glance),
                                           name))
    return find_image(session, endpoint, ref)


def check_template(baremetal, trait, kernel_urls):
    """Before the sweep: a custom trait, only the default kernel swept,
    and no template of that name that a sweep did not write.

    :raises ApplyError: naming what is wrong.
    """
    if not TRAIT_RE.match(trait):
        raise ApplyError('a custom trait (CUSTOM_ followed by A-Z, 0-9 and '
                         '_) is needed, got %r' % trait)
    if kernel_urls:
        raise ApplyError(
            'a deploy template selects tunables, not a kernel, and this '
            'sweep has kernels (%s): record it on the Glance image '
            '(--apply-image), or sweep tunables only'
            % ', '.join(sorted(kernel_urls)))
    current = _template(baremetal, trait)
    if current is not None and TEMPLATE_MARK not in (current.extra or {}):
        raise ApplyError(
            'deploy template %s exists and was not written by a sweep (its '
            'flavors rely on its steps as they are): choose another trait'
            % trait)
    return current


def _template(baremetal, trait):
    try:
        return baremetal.deploy_template.get(trait)
    except Exception as exc:
        if getattr(exc, 'http_status', None) == 404:
            return None
        raise


def image_patch(image, winner, kernel_urls):
    """JSON-patch operations turning Glance ``image`` (its current
    representation) into one whose runs use ``winner``.

    :raises ApplyError: the winning kernel is not a Glance image.
    """
    wanted = {protocol.II_TUNABLES: None if winner['profile'] == NO_TUNABLES
              else winner['profile'],
              KERNEL_ID: None, RAMDISK_ID: None}
    if winner['kernel'] != DEFAULT_KERNEL:
        keys = kernel_urls.get(winner['kernel']) or {}
        kernel, modules = keys.get('kernel'), keys.get('kernel_modules')
        not_glance = [v for v in (kernel, modules) if v and not _is_uuid(v)]
        if not_glance:
            raise ApplyError(
                'the winning kernel %s is %s, not a Glance image: a Glance '
                'image\'s kernel_id and ramdisk_id name Glance images. '
                'Upload the kernel (and its modules initrd) to Glance and '
                'sweep them as --kernel %s=<kernel image id>[,<modules '
                'image id>]' % (winner['kernel'], ', '.join(not_glance),
                                winner['kernel']))
        wanted[KERNEL_ID] = kernel
        wanted[RAMDISK_ID] = modules
    ops = []
    for key, value in sorted(wanted.items()):
        if value is None:
            if key in image:
                ops.append({'op': 'remove', 'path': '/' + key})
        elif image.get(key) != value:
            ops.append({'op': 'replace' if key in image else 'add',
                        'path': '/' + key, 'value': value})
    return ops


def find_image(session, endpoint, ref):
    """The Glance image named or identified by ``ref``.

    :raises ApplyError: none, or several of that name.
    """
    if _is_uuid(ref):
        resp = session.get('%s/v2/images/%s' % (endpoint, ref),
                           raise_exc=False)
        if resp.status_code == 200:
            return resp.json()
        if resp.status_code != 404:
            raise ApplyError('Glance answered %d for image %s: %s'
                             % (resp.status_code, ref, resp.text[:200]))
    resp = session.get('%s/v2/images' % endpoint, params={'name': ref},
                       raise_exc=False)
    if resp.status_code != 200:
        raise ApplyError('Glance answered %d listing images named %s: %s'
                         % (resp.status_code, ref, resp.text[:200]))
    found = resp.json().get('images') or []
    if len(found) != 1:
        raise ApplyError('%s Glance image is named %s%s' % (
            'no' if not found else 'more than one', ref,
            '' if not found else ': give its ID'))
    return found[0]


def apply_to_image(session, endpoint, ref, winner, kernel_urls):
    """Record ``winner`` on Glance image ``ref``; the changes made."""
    image = find_image(session, endpoint, ref)
    ops = image_patch(image, winner, kernel_urls)
    if ops:
        resp = session.patch('%s/v2/images/%s' % (endpoint, image['id']),
                             json=ops, headers={'Content-Type': PATCH_TYPE},
                             raise_exc=False)
        if resp.status_code != 200:
            raise ApplyError('Glance refused the change of image %s (%d): '
                             '%s' % (image['id'], resp.status_code,
                                     resp.text[:300]))
    return {'glance_image': image['id'], 'changes': ops}


def apply_to_template(baremetal, trait, winner, image):
    """Record ``winner`` as deploy template ``trait``; what was done.

    :raises ApplyError: as :func:`check_template`.
    """
    if winner['kernel'] != DEFAULT_KERNEL:
        raise ApplyError('the winning kernel is %s: a deploy template '
                         'selects tunables, not a kernel' % winner['kernel'])
    current = check_template(baremetal, trait, {})
    profile = winner['profile']
    steps = [dict(STEP, args={'tunables': {} if profile == NO_TUNABLES
                              else _tunables_value(profile)})]
    if current is None:
        baremetal.deploy_template.create(name=trait, steps=steps,
                                         extra={TEMPLATE_MARK: image})
        return {'deploy_template': trait, 'created': True, 'steps': steps}
    baremetal.deploy_template.update(trait, [
        {'op': 'replace', 'path': '/steps', 'value': steps},
        {'op': 'add', 'path': '/extra/%s' % TEMPLATE_MARK, 'value': image}])
    return {'deploy_template': trait, 'created': False, 'steps': steps}
