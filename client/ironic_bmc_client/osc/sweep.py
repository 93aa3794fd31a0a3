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

"""``openstack baremetal container sweep``: one image over kernels x
tunables profiles (x problem sizes), each cell repeated, on one or more
nodes of a class (operator).

Each run is an ordinary container deploy in ``job`` mode (the keys of
:mod:`.deploy`), waited for, its output read for the application's
metric, then undeployed: the command never leaves a node deployed, also
when a run fails or the sweep is interrupted.  The state file in the
output directory lets a second call resume; the table is per cell
(:mod:`ironic_bmc_client.sweep`), and the output directory receives
``runs.csv``, ``cells.csv``, ``sweep.json`` and ``sweep.png``.
"""

import logging
import os

from keystoneauth1 import exceptions as ks_exc
from osc_lib.command import command
from osc_lib import exceptions

from bmc_common import protocol
from ironic_bmc_client.osc import deploy
from ironic_bmc_client import runs
from ironic_bmc_client import sweep
from ironic_bmc_client import sweep_apply
from ironic_bmc_client import sweep_charts

LOG = logging.getLogger(__name__)

DEFAULT_KERNEL = 'default'
NO_TUNABLES = 'none'
SIZE_ENV = 'BMC_SWEEP_SIZE'
COLUMNS = ('kernel', 'profile', 'size', 'ok/runs', 'metric median',
           'metric min..max', 'workload s', 'T_ready s', 'boot s',
           'BMC J (workload)', 'RAPL J (workload)', 'J per unit',
           'break-even (work)', 'break-even (J)')


def _kernel(text):
    """``NAME=KERNEL_URL[,MODULES_URL]`` -> (name, keys)."""
    name, sep, urls = text.partition('=')
    if not sep or not name or not urls:
        raise exceptions.CommandError(
            '--kernel takes NAME=KERNEL_URL[,MODULES_URL], got %r' % text)
    kernel, _sep, modules = urls.partition(',')
    keys = {'kernel': kernel}
    if modules:
        keys['kernel_modules'] = modules
    return name, keys


def add_workload_arguments(parser):
    """The image and what it runs: --image, --command or --args, --env."""
    parser.add_argument('--image', required=True, metavar='<ref>',
                        help='OCI reference of the image (%s)'
                             % protocol.II_IMAGE)
    program = parser.add_mutually_exclusive_group()
    program.add_argument('--command', metavar='<json-list>',
                         help='Replaces ENTRYPOINT and CMD (%s)'
                              % protocol.II_COMMAND)
    program.add_argument('--args', metavar='<json-list>',
                         help='Replaces CMD, keeps ENTRYPOINT (%s)'
                              % protocol.II_ARGS)
    parser.add_argument('--env', metavar='<key=value>', action='append',
                        default=[], help='Laid over the image\'s Env')


def add_metric_arguments(parser):
    """Where the metric is in the output, and which way is better."""
    metric = parser.add_mutually_exclusive_group()
    metric.add_argument('--metric-regex', metavar='<regex>',
                        help='The metric: group 1 of the last output '
                             'line it matches')
    metric.add_argument('--metric-json', metavar='<key>',
                        help='The metric: this key of the last JSON '
                             'line of the output that has it')
    parser.add_argument('--lower-is-better', action='store_true',
                        help='The metric is a time or latency')


class SweepContainer(command.Lister):
    """Run an image over kernels x tunables profiles, repeated (operator).

    Prints a row per cell: the application metric (median, min..max),
    times, energy, and the break-even against the baseline cell.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('nodes', metavar='<node>', nargs='+',
                            help='Nodes (UUID or name) of one class, '
                                 'available; runs take them in turn')
        add_workload_arguments(parser)
        parser.add_argument('--kernel', metavar='<name=url[,modules-url]>',
                            action='append', default=[],
                            help='A kernel to sweep (the node\'s default '
                                 'kernel is "%s" and is swept when no '
                                 '--kernel is given)' % DEFAULT_KERNEL)
        parser.add_argument('--tunables', metavar='<profile|json>',
                            action='append', default=[],
                            help='A tunables profile (or JSON object) to '
                                 'sweep; "%s" for none (the default)'
                                 % NO_TUNABLES)
        parser.add_argument('--size', metavar='<value>', action='append',
                            default=[],
                            help='A problem size, passed as the variable '
                                 '--size-env; numeric sizes are the units '
                                 'of work of the break-even')
        parser.add_argument('--size-env', metavar='<name>',
                            default=SIZE_ENV,
                            help='The variable the size is passed in '
                                 '(default %s)' % SIZE_ENV)
        parser.add_argument('--repeat', type=int, default=3,
                            metavar='<n>', help='Runs per cell (default 3)')
        add_metric_arguments(parser)
        parser.add_argument('--baseline', metavar='<kernel,profile>',
                            help='The cell the break-even is against '
                                 '(default: the first)')
        parser.add_argument('--rootfs', choices=deploy.ROOTFS_MODES)
        parser.add_argument('--output-dir', metavar='<dir>',
                            default='sweep',
                            help='CSV, JSON, chart and the state that '
                                 'lets an interrupted sweep resume '
                                 '(default ./sweep)')
        parser.add_argument('--apply-image', metavar='<glance-image>',
                            help='Record the winning cell on this Glance '
                                 'image (its container_tunables, kernel_id '
                                 'and ramdisk_id properties): the image\'s '
                                 'next servers use it')
        parser.add_argument('--apply-template', metavar='<CUSTOM_TRAIT>',
                            help='Record the winning profile as this '
                                 'deploy template: flavors requiring the '
                                 'trait use it (tunables only; created, or '
                                 'updated if a sweep wrote it)')
        parser.add_argument('--timeout', type=float, default=1800.0,
                            metavar='<seconds>', help='Per run')
        parser.add_argument('--interval', type=float, default=5.0,
                            metavar='<seconds>')
        return parser

    def take_action(self, parsed_args):
        spec, kernels = self._spec(parsed_args)
        # What would stop the winner being recorded stops the sweep now,
        # not after its last run.
        self._check_apply(parsed_args, kernels)
        os.makedirs(parsed_args.output_dir, exist_ok=True)
        state = sweep.State(os.path.join(parsed_args.output_dir,
                                         'state.json'), spec)
        try:
            resumed = state.load()
        except sweep.SweepError as exc:
            raise exceptions.CommandError(str(exc))
        if resumed:
            self._say('Resuming %s: %d runs done already'
                      % (state.path, resumed))
        todo = [(c, r) for c, r in sweep.plan(
            spec['kernels'], spec['profiles'], spec['sizes'],
            spec['repeat']) if not state.done(c, r)]
        baremetal = self.app.client_manager.baremetal
        nodes = [baremetal.node.get(n, fields=['uuid', 'name',
                                               'provision_state'])
                 for n in parsed_args.nodes]
        for index, (cell, repeat) in enumerate(todo):
            node = nodes[index % len(nodes)]
            self._say('Run %d/%d: kernel %s, tunables %s%s, repeat %d, '
                      'on %s ...' % (index + 1, len(todo), cell.kernel,
                                     cell.profile, ', size %s' % cell.size
                                     if cell.size else '', repeat + 1,
                                     node.name or node.uuid))
            row = self._one(parsed_args, spec, kernels, node, cell, repeat)
            state.add(cell, repeat, row)
            self._say('  %s, metric %s, workload %s s, T_ready %s s'
                      % (row['error'] or row['state'], row['metric'],
                         _num(row['workload_s']), _num(row['t_ready_s'])))
        return self._finish(parsed_args, spec, state)

    def _say(self, text):
        """Progress, on stderr (the table goes to stdout)."""
        self.app.stderr.write(text + '\n')
        self.app.stderr.flush()

    def _spec(self, parsed_args):
        kernels = dict(_kernel(k) for k in parsed_args.kernel)
        if len(kernels) != len(parsed_args.kernel):
            raise exceptions.CommandError('--kernel: a name is given twice')
        names = list(kernels) or [DEFAULT_KERNEL]
        profiles = parsed_args.tunables or [NO_TUNABLES]
        if parsed_args.repeat < 1:
            raise exceptions.CommandError('--repeat must be 1 or more')
        patch = deploy.instance_info_patch(_Args(parsed_args))
        spec = {'image': parsed_args.image, 'kernels': names,
                'kernel_urls': kernels, 'profiles': profiles,
                'sizes': parsed_args.size, 'size_env': parsed_args.size_env,
                'repeat': parsed_args.repeat, 'patch': patch,
                'metric_regex': parsed_args.metric_regex,
                'metric_json': parsed_args.metric_json}
        return spec, kernels

    def _patch(self, spec, kernels, cell):
        values = {op['path'].rsplit('/', 1)[-1]: op['value']
                  for op in spec['patch']}
        values[protocol.II_MODE] = protocol.MODE_JOB
        if cell.profile != NO_TUNABLES:
            values[protocol.II_TUNABLES] = deploy._tunables(cell.profile)
        values.update(kernels.get(cell.kernel, {}))
        if cell.size:
            env = dict(values.get(protocol.II_ENV) or {})
            env[spec['size_env']] = cell.size
            values[protocol.II_ENV] = env
        return [{'op': 'add', 'path': '/instance_info/%s' % k, 'value': v}
                for k, v in sorted(values.items())]

    def _one(self, parsed_args, spec, kernels, node, cell, repeat):
        """One run of ``cell`` on ``node``: its row; the node undeployed
        whatever happened."""
        baremetal = self.app.client_manager.baremetal
        previous = deploy.newest_report(self.app, node.uuid)
        report, error, output = {}, None, ''
        try:
            baremetal.node.update(node.uuid, self._patch(spec, kernels,
                                                         cell))
            baremetal.node.set_provision_state(node.uuid, 'active')
            report = deploy.wait_for_run(self.app, node, previous,
                                         parsed_args.timeout,
                                         parsed_args.interval)
            output = self._output(report)
        except exceptions.CommandError as exc:
            error = str(exc)
            LOG.warning('Run of %s failed: %s', cell.key, error)
        finally:
            self._undeploy(node, parsed_args)
        metric = sweep.extract_metric(output, spec['metric_regex'],
                                      spec['metric_json'])
        return sweep.record(report, cell, repeat, metric, error)

    def _output(self, report):
        try:
            return self.app.client_manager.baremetal_container.output(
                report['deploy_id']).text
        except (runs.RunsError, KeyError, ks_exc.EndpointNotFound):
            # No runs API: the report's tail (the operator's passthru).
            return report.get('output_tail') or ''

    def _undeploy(self, node, parsed_args):
        baremetal = self.app.client_manager.baremetal
        state = baremetal.node.get(node.uuid, fields=['provision_state'])
        if state.provision_state in ('available', 'manageable', 'enroll'):
            return
        try:
            baremetal.node.set_provision_state(node.uuid, 'deleted')
            baremetal.node.wait_for_provision_state(
                node.uuid, 'available', timeout=parsed_args.timeout,
                poll_interval=parsed_args.interval)
        except Exception as exc:
            raise exceptions.CommandError(
                'could not undeploy %s after its run: %s; the sweep stops '
                'here (run it again to resume once the node is available)'
                % (node.name or node.uuid, exc)) from exc

    def _finish(self, parsed_args, spec, state):
        rows = [dict(row, repeat=int(key.rsplit('#', 1)[1]))
                for key, row in sorted(state.runs.items())]
        every = sweep.cells(spec['kernels'], spec['profiles'],
                            spec['sizes'])
        baseline = None
        if parsed_args.baseline:
            kernel, _sep, profile = parsed_args.baseline.partition(',')
            baseline = sweep.Cell(kernel, profile or NO_TUNABLES)
        summary = sweep.summarize(rows, every, baseline)
        out = parsed_args.output_dir
        sweep.write_csv(os.path.join(out, 'runs.csv'), rows,
                        sweep.RUN_FIELDS)
        sweep.write_csv(os.path.join(out, 'cells.csv'), summary,
                        sweep.CELL_FIELDS)
        winner = sweep.best(summary, not parsed_args.lower_is_better)
        winner = winner and {k: winner[k] for k in
                             ('kernel', 'profile', 'size')}
        applied, refused = self._apply(parsed_args, spec, winner)
        sweep.write_json(os.path.join(out, 'sweep.json'), {
            'spec': spec, 'runs': rows, 'cells': summary,
            'best': winner, 'applied': applied})
        with open(os.path.join(out, 'sweep.png'), 'wb') as f:
            f.write(sweep_charts.render(
                summary, rows, 'png', metric_name=parsed_args.metric_json
                or 'metric'))
        if refused:
            raise exceptions.CommandError(
                '%s (the sweep\'s results are in %s: cells.csv, '
                'sweep.json)' % ('; '.join(refused), out))
        return COLUMNS, [_row(s) for s in summary]

    def _glance(self):
        manager = self.app.client_manager
        return manager.session, manager.get_endpoint_for_service_type(
            'image', region_name=manager.region_name,
            interface=manager.interface).rstrip('/')

    def _check_apply(self, parsed_args, kernels):
        checks = []
        if parsed_args.apply_image:
            checks.append(('--apply-image', lambda: sweep_apply.check_image(
                *self._glance(), parsed_args.apply_image, kernels)))
        if parsed_args.apply_template:
            checks.append(('--apply-template',
                           lambda: sweep_apply.check_template(
                               self.app.client_manager.baremetal,
                               parsed_args.apply_template, kernels)))
        for option, check in checks:
            try:
                check()
            except sweep_apply.ApplyError as exc:
                raise exceptions.CommandError('%s: %s' % (option, exc))

    def _apply(self, parsed_args, spec, winner):
        """Record the winner where asked; (what was done, refusals)."""
        applied, refused = [], []
        if not (parsed_args.apply_image or parsed_args.apply_template):
            return applied, refused
        if not winner:
            return applied, ['nothing applied: no cell has a metric']
        what = 'kernel %s, tunables %s' % (winner['kernel'],
                                           winner['profile'])
        manager = self.app.client_manager
        try:
            if parsed_args.apply_image:
                done = sweep_apply.apply_to_image(
                    *self._glance(), parsed_args.apply_image, winner,
                    spec['kernel_urls'])
                applied.append(done)
                self._say('Applied %s to Glance image %s: %s' % (
                    what, done['glance_image'], ', '.join(
                        '%s %s' % (op['op'], op['path'][1:])
                        for op in done['changes']) or 'already so'))
        except sweep_apply.ApplyError as exc:
            refused.append('--apply-image: %s' % exc)
        try:
            if parsed_args.apply_template:
                done = sweep_apply.apply_to_template(
                    manager.baremetal, parsed_args.apply_template, winner,
                    spec['image'])
                applied.append(done)
                self._say('Applied %s to deploy template %s (%s)' % (
                    what, done['deploy_template'],
                    'created' if done['created'] else 'updated'))
        except sweep_apply.ApplyError as exc:
            refused.append('--apply-template: %s' % exc)
        return applied, refused


class _Args:
    """What ``deploy.instance_info_patch`` reads, from the sweep's
    arguments (no mode, tunables or walltime: the cells set them)."""

    def __init__(self, parsed_args):
        self.image = parsed_args.image
        self.command = parsed_args.command
        self.args = parsed_args.args
        self.env = parsed_args.env
        self.rootfs = parsed_args.rootfs
        self.mode = self.tunables = self.walltime = None


def _num(value, fmt='%.1f'):
    return '-' if value is None else fmt % value


def _row(entry):
    spread = '-' if entry['metric_min'] is None else '%s..%s' % (
        _num(entry['metric_min'], '%.4g'), _num(entry['metric_max'],
                                                 '%.4g'))
    if entry['baseline']:
        even_work = even_joules = 'baseline'
    else:
        even_work = _num(entry['break_even_work'], '%.3g')
        even_joules = _num(entry['break_even_energy'], '%.3g')
        if entry['break_even_work'] is None and entry['ok']:
            even_work = 'never'
    return (entry['kernel'], entry['profile'], entry['size'] or '-',
            '%d/%d' % (entry['ok'], entry['runs']),
            _num(entry['metric_median'], '%.4g'), spread,
            _num(entry['workload_s']), _num(entry['t_ready_s']),
            _num(entry['boot_s']), _num(entry['bmc_joules_workload']),
            _num(entry['rapl_joules_workload']),
            _num(entry['joules_per_unit'], '%.4g'), even_work, even_joules)
