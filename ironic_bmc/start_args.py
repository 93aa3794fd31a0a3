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

"""The arguments of the agent's start-workload step.

What the node runs: the deploy's keys (:mod:`ironic_bmc.deploy_info`)
over the image's config (ENTRYPOINT, CMD, Env, WorkingDir, User,
StopSignal), bounded in size: they stay in ``driver_internal_info`` for
the whole run, and the image (a tenant's) sets most of them.
"""

import json

from ironic.common import exception
from ironic.common.i18n import _

from bmc_common import oci
from bmc_common import protocol
from ironic_bmc.conf import CONF


#: Bytes (as JSON) the workload's arguments may take: command, env, user,
#: working directory and limits.  ARG_MAX-like room for a real command
#: line and environment, and a small part of driver_internal_info.
WORKLOAD_ARGS_MAX = 16 * 1024


def workload_args(container, image_config):
    """Arguments of the agent's start-workload step.

    ``container_command`` replaces ENTRYPOINT and CMD as a whole (like
    ``docker run --entrypoint`` with arguments); ``container_args``
    replaces CMD and keeps ENTRYPOINT (``docker run IMAGE ARGS``);
    ``container_env`` is laid over the image's Env.
    """
    if container.command:
        command = container.command
    elif container.args is not None:
        command = image_config.entrypoint + container.args
    else:
        command = image_config.command
    if not command:
        raise exception.InvalidParameterValue(
            _('The image %(image)s defines neither ENTRYPOINT nor CMD; set '
              'instance_info/%(key)s') % {'image': container.image,
                                          'key': protocol.II_COMMAND})
    if any('\0' in c for c in command):
        raise exception.InvalidParameterValue(
            _('The ENTRYPOINT or CMD of image %(image)s contains a NUL '
              'byte, which no program can receive')
            % {'image': container.image})
    env = dict(image_config.env_dict)
    env.update(container.env)
    if any('\0' in k or '\0' in v for k, v in env.items()):
        raise exception.InvalidParameterValue(
            _('The Env of image %(image)s contains a NUL byte, which no '
              'environment can hold') % {'image': container.image})
    args = {
        'command': list(command),
        'env': env,
        'workdir': image_config.working_dir or '/',
        'user': image_config.user or '',
        'mode': container.mode,
        'privileged': container.privileged,
        'output_max': CONF.container.output_max_mb * 1024 * 1024,
    }
    if image_config.stop_signal:
        try:
            oci.parse_signal(image_config.stop_signal)
        except ValueError as exc:
            raise exception.InvalidParameterValue(
                _('The image %(image)s has a StopSignal in its config that '
                  'cannot be sent: %(err)s')
                % {'image': container.image, 'err': exc})
        args['stop_signal'] = image_config.stop_signal
    if container.walltime:
        args['walltime'] = container.walltime
        args['stop_grace'] = CONF.container.stop_grace_period
    if container.rlimits:
        args['rlimits'] = container.rlimits
    size = len(json.dumps(args))
    if size > WORKLOAD_ARGS_MAX:
        # They live in driver_internal_info (64 KiB on MariaDB) for the
        # whole run, and the image (a tenant's) sets most of them.
        raise exception.InvalidParameterValue(
            _('The command and environment of image %(image)s (its '
              'config, %(cmd)s and %(env)s) take %(size)d bytes; at most '
              '%(max)d are accepted') % {
                'image': container.image, 'cmd': protocol.II_COMMAND,
                'env': protocol.II_ENV, 'size': size,
                'max': WORKLOAD_ARGS_MAX})
    return args
