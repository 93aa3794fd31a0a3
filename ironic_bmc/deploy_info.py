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

"""The instance_info contract of the ``container`` deploy interface.

Parsing and validation only: every error names the key and the reason,
so ``validate`` can answer the API call with it.
"""

import dataclasses
import json

from ironic.common import exception
from ironic.common.i18n import _
from oslo_utils import strutils

from bmc_common import oci
from bmc_common import protocol
from ironic_bmc.conf import CONF
from ironic_bmc.group import info as group_info
from ironic_bmc import image_properties
from ironic_bmc import start_args
from ironic_bmc import stream_cache
from ironic_bmc.image import egress
from ironic_bmc.image import exceptions as image_exc
from ironic_bmc.image import reference
from ironic_bmc.kernel import run_profile


#: (The start-workload step's arguments: start_args.)
WORKLOAD_ARGS_MAX = start_args.WORKLOAD_ARGS_MAX
workload_args = start_args.workload_args


@dataclasses.dataclass
class ContainerInfo:
    image: str
    rootfs: str = protocol.ROOTFS_RAMFS
    mode: str = protocol.MODE_SERVICE
    command: list = None
    #: container_args: replaces the image's CMD (None: the image's).
    args: list = None
    env: dict = dataclasses.field(default_factory=dict)
    #: Registry credentials: never in a repr, a log line or a report.
    pull_secret: str = dataclasses.field(default=None, repr=False)
    #: A pull secret is set, and not sent (egress.pull_secret_for).
    pull_secret_withheld: bool = False
    #: Why it was withheld (the rule, for the error of a refused pull).
    pull_secret_rule: str = None
    measure_link: bool = False
    #: stream mode: the bound of the node's block cache, as given (bytes,
    #: or a share of RAM), or None: as much of the image as RAM allows.
    stream_cache: str = None
    #: A knob that did not apply fails the deploy.
    tunables_strict: bool = False
    #: Seconds the workload may run, or None.
    walltime: float = None
    #: The container shares the machine (see [container]allow_privileged).
    privileged: bool = True
    #: container_rlimits as given (checked), or None: the defaults.
    rlimits: dict = None
    #: Absolute paths inside the container returned with the report.
    results: list = dataclasses.field(default_factory=list)
    #: container_kernel_profile (operator-only): "gcov", or None.
    kernel_profile: str = None
    #: The run group the deploy joins (group_info.GroupInfo), or None.
    group: object = None


def _json_value(key, value, kind, label=None):
    """Values set from the CLI (or as Glance image properties) may arrive
    as JSON strings.  ``label`` names where the value comes from."""
    label = label or 'instance_info/%s' % key
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise exception.InvalidParameterValue(
                _('%(label)s must be a JSON %(kind)s: %(err)s')
                % {'label': label, 'kind': kind, 'err': exc})
    return value


def _no_nul(value, label):
    """A NUL byte cannot reach execve(): refused here, not at the node."""
    if any('\0' in v for v in value):
        raise exception.InvalidParameterValue(
            _('%(label)s: an argument contains a NUL byte, which no '
              'program can receive') % {'label': label})
    return value


def _command(value, label):
    value = _json_value(protocol.II_COMMAND, value, 'list of strings', label)
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, str) for v in value)):
        raise exception.InvalidParameterValue(
            _('%(label)s must be a non-empty list of strings (the program '
              'and its arguments), got %(value)r')
            % {'label': label, 'value': value})
    return _no_nul(value, label)


def _args(value, label):
    value = _json_value(protocol.II_ARGS, value, 'list of strings', label)
    if (not isinstance(value, list)
            or not all(isinstance(v, str) for v in value)):
        raise exception.InvalidParameterValue(
            _('%(label)s must be a JSON list of strings (the arguments '
              'that replace the image\'s CMD after its ENTRYPOINT), got '
              '%(value)r') % {'label': label, 'value': value})
    return _no_nul(value, label)


def _env(value, label):
    value = _json_value(protocol.II_ENV, value, 'object', label)
    if not isinstance(value, dict):
        raise exception.InvalidParameterValue(
            _('%(label)s must be an object of variable names to string '
              'values, got %(value)r') % {'label': label, 'value': value})
    for name, val in value.items():
        if not name or '=' in name or '\0' in name:
            raise exception.InvalidParameterValue(
                _('%(label)s: %(name)r is not a valid environment variable '
                  'name') % {'label': label, 'name': name})
        if not isinstance(val, (str, int, float)) or isinstance(val, bool):
            raise exception.InvalidParameterValue(
                _('%(label)s: the value of %(name)s must be a string, got '
                  '%(value)r') % {'label': label, 'name': name,
                                  'value': val})
        if '\0' in str(val):
            raise exception.InvalidParameterValue(
                _('%(label)s: the value of %(name)s contains a NUL byte, '
                  'which no environment can hold')
                % {'label': label, 'name': name})
    return {k: str(v) for k, v in value.items()}


def _bool(value, label):
    try:
        return strutils.bool_from_string(value, strict=True)
    except ValueError:
        raise exception.InvalidParameterValue(
            _('%(label)s must be true or false, got %(value)r')
            % {'label': label, 'value': value}) from None


def _choice(info, key, label, choices, default, supported=None):
    value = info.get(key) or default
    if value not in choices:
        raise exception.InvalidParameterValue(
            _('%(label)s: unknown value %(value)r; expected one of '
              '%(choices)s') % {'label': label, 'value': value,
                                'choices': ', '.join(choices)})
    if supported is not None and value not in supported:
        raise exception.InvalidParameterValue(
            _('%(label)s: %(value)r is not supported yet; supported: '
              '%(supported)s') % {'label': label, 'value': value,
                                  'supported': ', '.join(supported)})
    return value


def _check_registry_allowed(ref, label):
    """Whoever deploys chooses the host the conductor connects to: only a
    listed registry, or (none listed) one on global addresses."""
    allowed = CONF.container.allowed_registries
    if reference.registry_in(ref.registry, allowed):
        return
    if allowed:
        raise exception.InvalidParameterValue(
            _('%(label)s: registry %(reg)s is not in '
              '[container]allowed_registries (%(allowed)s)')
            % {'label': label, 'reg': ref.registry,
               'allowed': ', '.join(allowed)})
    host, port = egress.host_port(ref.api_host)
    try:
        egress.check_host(host, port)
    except image_exc.RegistryRefused as exc:
        raise exception.InvalidParameterValue(
            _('%(label)s: %(err)s') % {'label': label, 'err': exc})


def for_task(task):
    """:func:`parse` of the task's node, once per task while the inputs
    stay the same (validate, then the deploy step, in one conductor
    task: the registry's name is resolved once)."""
    node = task.node
    key = json.dumps([node.instance_info,
                      node.driver_internal_info.get(
                          image_properties.SNAPSHOT_KEY),
                      node.driver_info.get('image_pull_secret')],
                     sort_keys=True, default=str)
    memo = getattr(task, '_bmc_container_info', None)
    if memo and memo[0] == key:
        return memo[1]
    container = parse(node)
    task._bmc_container_info = (key, container)
    return container


def parse(node):
    """Parse and validate the container keys of the deploy.

    ``instance_info`` over the keys of the Glance image it names (see
    :mod:`ironic_bmc.image_properties`); errors name where the bad value
    comes from.

    :raises: MissingParameterValue if no image is named.
    :raises: InvalidParameterValue naming the key and the reason.
    """
    info = image_properties.effective(node)

    def label(key):
        return image_properties.where(node, key)

    image = info.get(protocol.II_IMAGE)
    if not image:
        glance = image_properties.glance_image(node)
        raise exception.MissingParameterValue(
            (_('Glance image %(glance)s has no %(key)s property, and '
               'instance_info/%(key)s is not set: ') % {
                'glance': glance, 'key': protocol.II_IMAGE}
             if glance else
             _('instance_info/%s is required: ') % protocol.II_IMAGE)
            + _('the OCI reference of the container image to run, e.g. '
                'registry.example:5000/app:1 or '
                'registry.example:5000/app@sha256:<digest>'))
    try:
        ref = reference.parse(image)
    except image_exc.ImagePipelineError as exc:
        raise exception.InvalidParameterValue(
            _('%(label)s: %(err)s')
            % {'label': label(protocol.II_IMAGE), 'err': exc})
    _check_registry_allowed(ref, label(protocol.II_IMAGE))
    secret = (node.instance_info.get('image_pull_secret')
              or node.driver_info.get('image_pull_secret'))
    sent, withheld_by = egress.pull_secret_for(
        ref.registry, secret,
        tenant_image=image_properties.from_image(node, protocol.II_IMAGE))
    result = ContainerInfo(
        image=image,
        rootfs=_choice(info, protocol.II_ROOTFS, label(protocol.II_ROOTFS),
                       protocol.ROOTFS_MODES, protocol.ROOTFS_RAMFS,
                       supported=protocol.ROOTFS_MODES_SUPPORTED),
        mode=_choice(info, protocol.II_MODE, label(protocol.II_MODE),
                     protocol.WORKLOAD_MODES, protocol.MODE_SERVICE),
        # Operator-only (never from the image), and only for the
        # registries the operator lists for it.
        pull_secret=sent,
        pull_secret_withheld=withheld_by is not None,
        pull_secret_rule=withheld_by,
        measure_link=strutils.bool_from_string(
            node.instance_info.get(protocol.II_MEASURE_LINK, False),
            strict=False),
    )
    if info.get(protocol.II_TUNABLES_STRICT) not in (None, ''):
        result.tunables_strict = _bool(info[protocol.II_TUNABLES_STRICT],
                                       label(protocol.II_TUNABLES_STRICT))
    if info.get(protocol.II_STREAM_CACHE) not in (None, ''):
        result.stream_cache = str(info[protocol.II_STREAM_CACHE]).strip()
        stream_cache.bytes_of(node, result.stream_cache,
                           label(protocol.II_STREAM_CACHE))
    _run_limits(info, label, result)
    result.kernel_profile = run_profile.requested(node, info)
    result.group = group_info.requested(node, info)
    if (result.group and not result.privileged
            and result.group.launcher == protocol.GROUP_LAUNCHER_SSH):
        raise exception.InvalidParameterValue(
            _('instance_info/%(launcher)s=ssh runs the image\'s sshd, which '
              'needs a privileged container (its privilege separation '
              'chroots); the container is confined (%(where)s or '
              '[container]allow_privileged): use %(launcher)s=none')
            % {'launcher': protocol.II_GROUP_LAUNCHER,
               'where': label(protocol.II_PRIVILEGED)})
    if info.get(protocol.II_RESULTS) not in (None, ''):
        result.results = _results(info[protocol.II_RESULTS],
                                  label(protocol.II_RESULTS))
    if info.get(protocol.II_COMMAND) is not None:
        result.command = _command(info[protocol.II_COMMAND],
                                  label(protocol.II_COMMAND))
    if info.get(protocol.II_ARGS) not in (None, ''):
        result.args = _args(info[protocol.II_ARGS], label(protocol.II_ARGS))
        if result.command is not None:
            raise exception.InvalidParameterValue(
                _('%(args)s and %(cmd)s are both set: %(cmd)s is the whole '
                  'command (it replaces ENTRYPOINT and CMD), %(args)s '
                  'replaces CMD after the image\'s ENTRYPOINT; set one')
                % {'args': label(protocol.II_ARGS),
                   'cmd': label(protocol.II_COMMAND)})
    if info.get(protocol.II_ENV) is not None:
        result.env = _env(info[protocol.II_ENV], label(protocol.II_ENV))
    for key, value in ((protocol.II_COMMAND, result.command),
                       (protocol.II_ARGS, result.args),
                       (protocol.II_ENV, result.env)):
        size = len(json.dumps(value)) if value else 0
        if size > WORKLOAD_ARGS_MAX:
            raise exception.InvalidParameterValue(
                _('%(label)s: %(size)d bytes as JSON; the command and the '
                  'environment of a workload take at most %(max)d together')
                % {'label': label(key), 'size': size,
                   'max': WORKLOAD_ARGS_MAX})
    return result


#: At most this many result files per run.
MAX_RESULTS = 64


def _results(value, label):
    """container_results: absolute paths, normalized, outside the
    container's own mounts (gone once it exits)."""
    value = _json_value(protocol.II_RESULTS, value, 'list of paths', label)
    if (not isinstance(value, list) or not value
            or len(value) > MAX_RESULTS
            or not all(isinstance(p, str) for p in value)):
        raise exception.InvalidParameterValue(
            _('%(label)s must be a list of 1 to %(max)d absolute paths '
              'inside the container, got %(value)r')
            % {'label': label, 'max': MAX_RESULTS, 'value': value})
    paths = []
    for path in value:
        parts = path.split('/')
        if (not path.startswith('/') or '..' in parts or '\0' in path
                or path.rstrip('/') == ''):
            raise exception.InvalidParameterValue(
                _('%(label)s: %(path)r is not an absolute path to a file '
                  'without ".." inside the container')
                % {'label': label, 'path': path})
        clean = '/' + '/'.join(p for p in parts if p not in ('', '.'))
        mount = [m for m in protocol.CONTAINER_MOUNTS
                 if clean == m or clean.startswith(m + '/')]
        if mount:
            raise exception.InvalidParameterValue(
                _('%(label)s: %(path)s is under %(mount)s, a mount of the '
                  'container that is gone once it exits; write results '
                  'into the image\'s own directories (e.g. /results)')
                % {'label': label, 'path': path, 'mount': mount[0]})
        if clean not in paths:
            paths.append(clean)
    return paths


def _run_limits(info, label, result):
    """container_walltime, container_privileged, container_rlimits."""
    if info.get(protocol.II_WALLTIME) not in (None, ''):
        try:
            result.walltime = oci.parse_walltime(info[protocol.II_WALLTIME])
        except ValueError as exc:
            raise exception.InvalidParameterValue(
                _('%(label)s: %(err)s')
                % {'label': label(protocol.II_WALLTIME), 'err': exc})
    result.privileged = CONF.container.allow_privileged
    if info.get(protocol.II_PRIVILEGED) not in (None, ''):
        result.privileged = _bool(info[protocol.II_PRIVILEGED],
                                  label(protocol.II_PRIVILEGED))
        if result.privileged and not CONF.container.allow_privileged:
            raise exception.InvalidParameterValue(
                _('%(label)s: privileged workloads are not allowed on '
                  'conductor %(host)s ([container]allow_privileged = '
                  'false); remove the key or set it to false')
                % {'label': label(protocol.II_PRIVILEGED),
                   'host': CONF.host})
    if info.get(protocol.II_RLIMITS) not in (None, ''):
        value = _json_value(protocol.II_RLIMITS, info[protocol.II_RLIMITS],
                            'object', label(protocol.II_RLIMITS))
        try:
            oci.parse_rlimits(value)
        except ValueError as exc:
            raise exception.InvalidParameterValue(
                _('%(label)s: %(err)s')
                % {'label': label(protocol.II_RLIMITS), 'err': exc})
        result.rlimits = value


def noise_probe_args(node):
    """Args of the noise probe asked for by instance_info, or None.

    ``container_noise_probe``: seconds per CPU (1-30), or an object with
    ``duration``, ``cpus`` and ``threshold_us``.
    """
    key = protocol.II_NOISE_PROBE
    value = node.instance_info.get(key)
    if value in (None, '', False, 'false', 0, '0'):
        return None
    value = _json_value(key, value, 'number or object')
    args = value if isinstance(value, dict) else {'duration': value}
    try:
        duration = float(args.get('duration', 5))
    except (TypeError, ValueError):
        duration = -1
    if not 0 < duration <= 30:
        raise exception.InvalidParameterValue(
            _('instance_info/%(key)s: duration must be 1 to 30 seconds, got '
              '%(value)r') % {'key': key, 'value': args.get('duration')})
    unknown = set(args) - {'duration', 'cpus', 'threshold_us'}
    if unknown:
        raise exception.InvalidParameterValue(
            _('instance_info/%(key)s: unknown keys %(keys)s') % {
                'key': key, 'keys': ', '.join(sorted(unknown))})
    return dict(args, duration=duration)
