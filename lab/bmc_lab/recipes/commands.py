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

"""``bmc-lab recipe``: the BMC paper's experiments on the lab.

    bmc-lab recipe list
    bmc-lab recipe build [NAME ...] [--registry HOST:PORT] [--rebuild]
    bmc-lab recipe run NAME [--size N] [--env K=V ...]
    bmc-lab recipe sweep NAME [--node NODE ...] [--size N ...]
                         [--tunables T ...] [--kernel NAME=URL ...]
                         [--repeat N] [--hardware] [--dry-run]

``build`` builds (or finds in its cache) the images and pushes them to
``--registry``, else to the registry of the lab that is up, else nowhere.
``run`` runs an image's entrypoint on this machine, in its root, with a
private loopback network: the check that needs no lab.  ``sweep``
builds and pushes the image, prints the ``openstack baremetal container
sweep`` for the recipe and runs it on the lab (``--dry-run``: prints it
only).
"""

import json
import sys

from bmc_lab import agent
from bmc_lab import container_job
from bmc_lab import osc
from bmc_lab import procs
from bmc_lab import recipes
from bmc_lab.recipes import build as recipe_build
from bmc_lab.recipes import sweep as recipe_sweep
from bmc_lab import settings as lab_settings

#: The identity a sweep runs as, in the cloud profile (it needs nodes).
CLOUD_ADMIN = 'bmc-lab-admin'


def add_parser(sub):
    r = sub.add_parser(
        'recipe', help="the BMC paper's experiments: images built from "
        'Debian packages, run here or swept on the lab',
        description=__doc__, formatter_class=_raw())
    rsub = r.add_subparsers(dest='recipe_command', required=True)
    rsub.add_parser('list', help='the recipes, their metric and cells')
    b = rsub.add_parser('build', help='build (or reuse) images and push '
                        'them')
    b.add_argument('names', nargs='*', metavar='NAME',
                   help='recipes (default: all)')
    b.add_argument('--registry', metavar='HOST:PORT',
                   help='push there, over HTTP (default: the registry of '
                        'the lab that is up; none: no push)')
    b.add_argument('--rebuild', action='store_true',
                   help='build the base root and the images afresh (the '
                        "mirror's current packages)")
    _cache_arg(b)
    t = rsub.add_parser('run', help="run an image's entrypoint on this "
                        'machine, in its root (private network)')
    t.add_argument('name', metavar='NAME')
    t.add_argument('--size', help='BMC_SWEEP_SIZE (default: the '
                   "entrypoint's)")
    t.add_argument('--env', action='append', default=[],
                   metavar='KEY=VALUE', help='more environment')
    t.add_argument('--timeout', type=int, default=600,
                   help='seconds (default: %(default)s)')
    _cache_arg(t)
    s = rsub.add_parser('sweep', help='push the image and run its sweep '
                        'on the lab')
    s.add_argument('name', metavar='NAME')
    s.add_argument('--node', action='append', default=[],
                   help='node to run on (repeatable; default: node 0)')
    s.add_argument('--size', action='append', default=[],
                   help="sizes (default: the recipe's for the lab)")
    s.add_argument('--hardware', action='store_true',
                   help="the recipe's sizes for a real machine")
    s.add_argument('--tunables', action='append', default=[],
                   help="cells, baseline first (default: the recipe's)")
    s.add_argument('--kernel', action='append', default=[],
                   metavar='NAME=URL[,MODULES_URL]',
                   help='kernels to sweep (default: the node\'s)')
    s.add_argument('--repeat', type=int, default=recipe_sweep.DEFAULT_REPEAT,
                   help='runs per cell (default: %(default)s)')
    s.add_argument('--timeout', type=int,
                   help="per run (default: the recipe's)")
    s.add_argument('--output-dir',
                   help='default: STATE_DIR/sweeps/NAME')
    s.add_argument('--apply-template', metavar='CUSTOM_TRAIT',
                   help='record the winning profile as this deploy '
                        'template (the sweep\'s --apply-template)')
    s.add_argument('--apply-image', metavar='GLANCE_IMAGE',
                   help='record the winner on this Glance image (cloud '
                        'profile; the sweep\'s --apply-image)')
    s.add_argument('--dry-run', action='store_true',
                   help='print the command only (no build, no lab)')
    _cache_arg(s)
    return r


def _raw():
    import argparse
    return argparse.RawDescriptionHelpFormatter


def _cache_arg(parser):
    parser.add_argument('--cache-dir', help='image cache (default: '
                        '$BMC_RECIPE_CACHE or %s)'
                        % recipe_build.DEFAULT_CACHE)


def main(args, loaded, out=print):
    """Run ``bmc-lab recipe ...``; ``loaded(args)`` is the lab that is up
    (or LabError).  Its exit status."""
    try:
        handler = {'list': _list, 'build': _build, 'run': _run,
                   'sweep': _sweep}[args.recipe_command]
        return handler(args, loaded, out)
    except recipes.RecipeError as exc:
        raise procs.LabError(str(exc)) from exc


def _builder(args, out):
    return recipe_build.Builder(cache=args.cache_dir, out=out)


def _up_lab(args):
    """The settings of the lab that is up, or None."""
    from bmc_lab import control
    settings = lab_settings.Settings.load(args.state_dir)
    if settings is not None and control.is_up(settings):
        return settings
    return None


def _list(args, loaded, out):
    for recipe in recipes.RECIPES.values():
        out('%-6s %s' % (recipe.name, recipe.summary))
        out('       metric %s (%s is better); size: %s, default %d; '
            'cells: %s' % (recipe.metric, 'lower' if recipe.lower_is_better
                           else 'higher', recipe.unit, recipe.default_size,
                           ' | '.join(recipe.tunables)))
    return 0


def _build(args, loaded, out):
    names = args.names or list(recipes.RECIPES)
    todo = [recipes.get(n) for n in names]
    registry = args.registry
    if registry is None:
        lab = _up_lab(args)
        registry = lab.registry_address if lab else None
        if registry is None:
            out('No lab is up and no --registry: building only.')
    builder = _builder(args, out)
    rows = []
    for recipe in todo:
        done = builder.build(recipe, rebuild=args.rebuild)
        row = {'recipe': recipe.name, 'digest': done.image.digest,
               'cached': done.cached, 'tag': done.tag,
               'layer_bytes': done.info['layer_bytes'],
               'rootfs_bytes': done.info['rootfs_bytes'],
               'build_seconds': done.info['seconds']['total']}
        if registry and registry != 'none':
            row['image'] = recipe_build.push(done, registry)
            out('Pushed %s' % row['image'])
        rows.append(row)
    for row in rows:
        out(json.dumps(row, sort_keys=True))
    return 0


def _run(args, loaded, out):
    # A bad --size is passed on as it is: refusing it is the entrypoint's
    # job, and this is how to see it do so.
    recipe = recipes.get(args.name)
    for item in args.env:
        if '=' not in item:
            raise recipes.RecipeError('--env takes KEY=VALUE, got %r'
                                      % item)
    done = _builder(args, out).build(recipe)
    code, stdout, stderr = recipe_build.run(done, size=args.size,
                                            env=args.env,
                                            timeout=args.timeout)
    sys.stdout.write(stdout)
    sys.stderr.write(stderr)
    result = recipe_build.final_json(stdout)
    if code == 0 and (result is None or recipe.metric not in result):
        out('bmc-lab recipe run: the last line has no %r' % recipe.metric)
        return 1
    return code


def _sweep(args, loaded, out):
    recipe = recipes.get(args.name)
    builder = _builder(args, out)
    if args.dry_run:
        settings = (lab_settings.Settings.load(args.state_dir)
                    or lab_settings.Settings(state_dir=args.state_dir))
        done = builder.cached(recipe)
        image = ('%s/%s@%s' % (settings.registry_address, recipe.repo,
                               done.image.digest) if done else
                 '%s/%s:latest' % (settings.registry_address, recipe.repo))
    else:
        settings = loaded(args)
        image = recipe_build.push(builder.build(recipe),
                                  settings.registry_address)
    nodes = args.node or [settings.node_name(0)]
    argv = recipe_sweep.sweep_args(
        recipe, image, nodes, sizes=args.size, tunables=args.tunables,
        kernels=args.kernel, repeat=args.repeat,
        output_dir=args.output_dir or recipe_sweep.output_dir(settings,
                                                              recipe),
        timeout=args.timeout, hardware=args.hardware,
        apply_template=args.apply_template, apply_image=args.apply_image)
    cloud = CLOUD_ADMIN if settings.is_cloud else osc.NOAUTH_CLOUD
    out('$ ' + recipe_sweep.shell_line(settings, argv, cloud))
    if args.dry_run:
        return 0
    agent.ensure(settings, out=out)
    lab_nodes = {settings.node_name(i): i for i in range(settings.nodes)}
    for node in nodes:
        if node in lab_nodes:
            container_job.reclaim(settings, lab_nodes[node], out=out)
            container_job.use_container_interfaces(settings, node)
    runs = recipe_sweep.run_count(argv)
    status = osc.openstack(settings, *argv, cloud=cloud,
                           timeout=runs * (args.timeout
                                           or recipe.run_timeout) + 600)
    return 0 if status == 0 else 1
