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

"""A profiling run (``container_kernel_profile=gcov``): who may ask for
one, and the profile it brings back.

The node boots a kernel of the gcov build variant; its agent resets the
counters just before the workload starts and, once the workload has
exited, returns every ``.gcda`` file as a tar.  The conductor checks the
tar (:mod:`ironic_bmc.kernel.profile`) and keeps it next to the run's
report as ``<deploy id>.kernel-profile.tar``: the input of a pgo build.
"""

import hashlib
import os

from ironic.common import exception
from ironic.common.i18n import _

from bmc_common import protocol
from ironic_bmc import agent_replies
from ironic_bmc.conf import CONF
from ironic_bmc import image_properties
from ironic_bmc.kernel import profile as kernel_profile
from ironic_bmc import ownership
from ironic_bmc import run_files

SUFFIX = run_files.KERNEL_PROFILE_SUFFIX


def requested(node, info):
    """The profile a deploy asks for (``gcov``), or None.

    :param info: the effective instance_info (with the image's keys).
    :raises: InvalidParameterValue naming the key and the reason.
    """
    value = info.get(protocol.II_KERNEL_PROFILE)
    if value in (None, ''):
        return None
    where = image_properties.where(node, protocol.II_KERNEL_PROFILE)
    if image_properties.from_image(node, protocol.II_KERNEL_PROFILE):
        raise exception.InvalidParameterValue(
            _('%s: kernel profiling is the operator\'s; an image property '
              'cannot ask for it') % where)
    # (The profile counts everything the kernel did, not only the
    # tenant's work.)
    ownership.require_operator(node, _('%s: kernel profiling') % where)
    if value not in protocol.KERNEL_PROFILES:
        raise exception.InvalidParameterValue(
            _('%(where)s: %(value)r is not one of %(known)s') % {
                'where': where, 'value': value,
                'known': ', '.join(protocol.KERNEL_PROFILES)})
    return value


def path(node_uuid, deploy_id):
    """Where this conductor keeps the profile of a run."""
    return os.path.join(CONF.container.report_dir, node_uuid,
                        deploy_id + SUFFIX)


def max_bytes():
    return CONF.container.kernel_profile_max_mb * 1024 * 1024


def save(node, deploy_id, reply):
    """Check and keep the profile the node returned; the report's
    ``kernel_profile`` section.

    :raises: AgentReplyInvalid naming what is wrong; nothing is kept then.
    """
    reply = agent_replies.mapping(node, reply, _('the kernel profile'))
    # The tar's headers come on top of the files' bytes.
    data = agent_replies.unpack(node, reply.get('data') or '',
                                max_bytes() + max_bytes() // 4 + 2 ** 20,
                                _('the kernel profile'))
    digest = hashlib.sha256(data).hexdigest()
    if reply.get('sha256') != digest:
        raise agent_replies.refuse(node, _(
            'the kernel profile changed on its way from the node (sha256 '
            'mismatch)'))
    try:
        with kernel_profile.open_tar_bytes(data) as tar:
            build, files, size = kernel_profile.check(tar, max_bytes())
    except kernel_profile.ProfileError as exc:
        raise agent_replies.refuse(node, _('the kernel profile: %s') % exc)
    target = path(node.uuid, deploy_id)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target + '.tmp', 'wb') as f:
        f.write(data)
    os.replace(target + '.tmp', target)
    return {'method': 'gcov', 'files': files, 'bytes': size,
            'sha256': digest, 'kernel_build': build,
            'uname_v': str(reply.get('uname_v', ''))[:200],
            'machine': _machine(reply.get('machine'))}


def _machine(value):
    """The node's own account of what it is (display only)."""
    if not isinstance(value, dict):
        return {}
    return {'cpu_model': str(value.get('cpu_model', ''))[:200],
            'hypervisor': value.get('hypervisor') is True,
            'clocksource': str(value.get('clocksource', ''))[:50],
            'emulated': value.get('emulated') is True}


def for_build(node_uuid, deploy_id):
    """The profile of a run as a pgo build takes it: ``{"path",
    "sha256", "build", "run"}``.

    :raises: InvalidParameterValue naming the run.
    """
    target = path(node_uuid, deploy_id)
    if not os.path.isfile(target):
        raise exception.InvalidParameterValue(
            _('kernel build profile_run: run %(run)s of node %(node)s has '
              'no kernel profile on this conductor (deploy it with '
              'instance_info/%(key)s=gcov on a gcov kernel)')
            % {'run': deploy_id, 'node': node_uuid,
               'key': protocol.II_KERNEL_PROFILE})
    with open(target, 'rb') as f:
        data = f.read()
    try:
        with kernel_profile.open_tar_bytes(data) as tar:
            build, _files, _size = kernel_profile.check(tar, max_bytes())
    except kernel_profile.ProfileError as exc:
        raise exception.InvalidParameterValue(
            _('kernel build profile_run: %s') % exc)
    return {'path': target, 'sha256': hashlib.sha256(data).hexdigest(),
            'build': build, 'run': deploy_id}


def drop(node_uuid, deploy_id):
    try:
        os.remove(path(node_uuid, deploy_id))
    except FileNotFoundError:
        pass


