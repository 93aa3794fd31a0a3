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

"""Which kernel tunables a container deploy asks for, and in what form.

Sources, later ones override earlier ones knob by knob:

1. ``instance_info/container_tunables``: a profile name, or a JSON object
   of knobs that may name a ``"profile"``;
2. the ``tunables`` argument of the ``bmc_apply_tunables`` deploy step,
   as a deploy template (selected by a flavor trait) or the user's
   ``--deploy-steps`` give it.

Boot-time knobs (isolcpus, nohz_full, rcu_nocbs, ``smt: force-off``,
...) become kernel arguments; the agent gets every knob, applies the
run-time ones and checks the boot-time ones against /proc/cmdline.
"""

import json

from ironic.common import exception
from ironic.common.i18n import _
from ironic import objects

from bmc_common import protocol
from ironic_bmc import image_properties
from ironic_bmc.conf import CONF
from bmc_common.tunables import profiles
from bmc_common.tunables import schema

STEP = protocol.STEP_APPLY_TUNABLES


def _resolve(spec, where):
    try:
        return profiles.resolve(spec, CONF.container.tunables_profile_dirs)
    except schema.TunableError as exc:
        raise exception.InvalidParameterValue(
            _('%(where)s: %(err)s') % {'where': where, 'err': exc})


def _template_args(node):
    """Args of our step in this deployment's step list (deploy templates,
    user deploy steps), if any."""
    for step in node.driver_internal_info.get('deploy_steps') or []:
        if step.get('interface') == 'deploy' and step.get('step') == STEP:
            return (step.get('args') or {}).get('tunables')
    return None


def requested(node, step_args=None):
    """The validated knobs of this deploy (see the module docstring)."""
    knobs = _resolve(image_properties.effective(node).get(
        protocol.II_TUNABLES),
        image_properties.where(node, protocol.II_TUNABLES))
    extra = step_args if step_args is not None else _template_args(node)
    if extra:
        overrides = _resolve(extra, 'deploy step %s, argument tunables'
                             % STEP)
        knobs = profiles.merge(knobs, overrides)
    return knobs


#: Knobs that act on the whole node's kernel, beyond any container
#: (``kernel.core_pattern`` and ``kernel.modprobe`` name programs the
#: kernel runs as the node's root; a module is kernel code).  A confined
#: run's image may not set them itself; an operator profile may.
NODE_WIDE_KNOBS = ('sysctl', 'kernel_modules')


def check_confined(node, container):
    """A confined run (``container_privileged`` false) takes from its
    Glance image (a tenant's) no knob that reaches beyond the container.

    :raises: InvalidParameterValue naming the property and the knobs.
    """
    if (container.privileged
            or not image_properties.from_image(node, protocol.II_TUNABLES)):
        return
    spec = image_properties.effective(node).get(protocol.II_TUNABLES)
    if isinstance(spec, str):
        if not spec.strip().startswith('{'):
            return      # a profile name: the operator's file
        try:
            spec = json.loads(spec)
        except ValueError:
            return      # requested() says why
    found = sorted(k for k in (spec if isinstance(spec, dict) else ())
                   if k in NODE_WIDE_KNOBS and spec[k] is not None)
    if found:
        raise exception.InvalidParameterValue(
            _('%(where)s: a confined run (%(key)s false) may not set '
              '%(knobs)s itself: they act on the whole node\'s kernel, '
              'beyond the container (kernel.core_pattern and '
              'kernel.modprobe name programs run as the node\'s root); '
              'name an operator profile that sets them instead') % {
                'where': image_properties.where(node, protocol.II_TUNABLES),
                'key': protocol.II_PRIVILEGED, 'knobs': ', '.join(found)})


def check_templates(task):
    """Every trait of ours the deploy asks for has its deploy template.

    Ironic ignores a trait without a template of its name; a tenant whose
    flavor asks for ``CUSTOM_BMC_TUNABLES_<PROFILE>`` would get a run
    without the tunables it chose.
    """
    ours = sorted({t for t in task.node.instance_info.get('traits') or []
                   if isinstance(t, str)
                   and t.startswith(protocol.TUNABLES_TRAIT_PREFIX)})
    if not ours:
        return
    found = {t.name for t in objects.DeployTemplate.list_by_names(
        task.context, ours)}
    missing = [t for t in ours if t not in found]
    if missing:
        raise exception.InvalidParameterValue(
            _('instance_info/traits: %(traits)s select(s) a tunables '
              'profile through a deploy template of the same name, and '
              'there is none; the operator creates them with '
              'ironic-bmc-deploy-templates') % {'traits': ', '.join(missing)})


def split(knobs):
    """(run-time knobs for the agent, kernel arguments)."""
    return schema.split(knobs)


def runtime_only(spec, where):
    """Knobs for a service step on a running node; refuse boot-time ones."""
    knobs = _resolve(spec, where)
    runtime, kernel_args = schema.split(knobs)
    if kernel_args:
        boot = sorted(set(knobs) - set(runtime))
        raise exception.InvalidParameterValue(
            _('%(where)s: %(knobs)s need a reboot (kernel arguments '
              '%(args)s); ask for them when deploying, not on a running '
              'node') % {'where': where, 'knobs': ', '.join(boot),
                                 'args': ' '.join(kernel_args)})
    return runtime

