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

"""The ``openstack baremetal container sweep`` of a recipe.

:func:`sweep_args` composes the command (what an operator would type);
:func:`shell_line` prints it with the lab's clouds.yaml, ready to paste.
``bmc-lab recipe sweep`` (:mod:`bmc_lab.cli`) builds and pushes the image
first, then runs it on the lab with :func:`bmc_lab.osc.openstack`.
"""

import os
import shlex

from bmc_lab.cloud import profile as cloud_profile
from bmc_lab import osc
from bmc_lab import recipes

#: Runs per cell unless told (the sweep's own default).
DEFAULT_REPEAT = 3


def kernel_arg(text):
    """``NAME=KERNEL_URL[,MODULES_URL]``, checked as the sweep will."""
    name, sep, urls = text.partition('=')
    if not sep or not name or not urls:
        raise recipes.RecipeError('--kernel takes NAME=KERNEL_URL'
                                  '[,MODULES_URL], got %r' % text)
    return text


def sweep_args(recipe, image, nodes, sizes=None, tunables=None, kernels=(),
               repeat=DEFAULT_REPEAT, output_dir=None, timeout=None,
               hardware=False, apply_template=None, apply_image=None):
    """The arguments of ``openstack`` (after ``--os-cloud``) that sweep
    ``recipe``'s image ``image`` on ``nodes``: its tunables cells (the
    baseline first) unless ``tunables``, its lab sizes (``hardware``:
    those for a real machine) unless ``sizes``, ``--metric-json`` of its
    metric; the winner recorded where ``apply_template`` / ``apply_image``
    say."""
    if not nodes:
        raise recipes.RecipeError('no node to sweep on')
    if repeat < 1:
        raise recipes.RecipeError('--repeat must be 1 or more, got %d'
                                  % repeat)
    if sizes:
        sizes = [recipe.check_size(s) for s in sizes]
    else:
        sizes = list(recipe.hardware_sizes if hardware
                     else recipe.lab_sizes)
    args = ['baremetal', 'container', 'sweep'] + list(nodes) + [
        '--image', image]
    for kernel in kernels:
        args += ['--kernel', kernel_arg(kernel)]
    for cell in tunables or recipe.tunables:
        args += ['--tunables', cell]
    for size in sizes:
        args += ['--size', str(size)]
    args += ['--repeat', str(repeat), '--metric-json', recipe.metric]
    if recipe.lower_is_better:
        args.append('--lower-is-better')
    args += ['--timeout', str(timeout or recipe.run_timeout)]
    if output_dir:
        args += ['--output-dir', output_dir]
    if apply_template:
        args += ['--apply-template', apply_template]
    if apply_image:
        args += ['--apply-image', apply_image]
    return args


def run_count(args):
    """How many runs the sweep of ``args`` makes."""
    def count(flag):
        return max(1, sum(1 for a in args if a == flag))
    repeat = int(args[args.index('--repeat') + 1])
    return count('--kernel') * count('--tunables') * count('--size') * repeat


def shell_line(settings, args, cloud=osc.NOAUTH_CLOUD):
    """The command as a shell line, with the lab's clouds.yaml."""
    clouds = os.path.join(settings.state_dir, cloud_profile.CLOUDS_YAML)
    return 'OS_CLIENT_CONFIG_FILE=%s openstack --os-cloud %s %s' % (
        shlex.quote(clouds), cloud, shlex.join(args))


def output_dir(settings, recipe):
    """Where a lab sweep of ``recipe`` writes (one per recipe: the sweep
    resumes there, and refuses a state file of another sweep)."""
    return os.path.join(settings.state_dir, 'sweeps', recipe.name)
