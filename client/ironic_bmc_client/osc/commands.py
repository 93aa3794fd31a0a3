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

"""``openstack baremetal container show|list|logs|results|chart``.

Each reads the caller's runs through the runs API.  A RUN argument is a
run's deploy id, a server (its newest run) or a node (its newest run),
see :mod:`ironic_bmc_client.osc.resolve`.
"""

import logging
import os
import sys
import time

from osc_lib.command import command
from osc_lib import exceptions

from bmc_common import protocol
from ironic_bmc_client import charts
from ironic_bmc_client import noise_table
from ironic_bmc_client import output
from ironic_bmc_client.osc import resolve
from ironic_bmc_client.osc import view
from ironic_bmc_client import runs

LOG = logging.getLogger(__name__)

_TARGET_HELP = ('A run (deploy id), a server (UUID or name) or a node '
                '(UUID or name): its newest run')


def _runs(app):
    return app.client_manager.baremetal_container


def _add_target(parser):
    parser.add_argument('target', metavar='<run|server|node>',
                        help=_TARGET_HELP)
    parser.add_argument('--run', metavar='<deploy-id>', dest='run_id',
                        help='An earlier run of that server or node')


def _report(app, parsed_args):
    try:
        return resolve.run_report(app, _runs(app), parsed_args.target,
                                  parsed_args.run_id)
    except runs.RunsError as exc:
        raise exceptions.CommandError(str(exc))


class ShowRun(command.ShowOne):
    """Show a container run's report.

    Its state and exit code, T_ready, the workload's time and energy, the
    tunables read back and the end of its output.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _add_target(parser)
        return parser

    def take_action(self, parsed_args):
        return view.report_rows(_report(self.app, parsed_args))


class ListRuns(command.Lister):
    """List your container runs, newest first."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--node', metavar='<node>',
                            help='Runs on this node (UUID or name)')
        parser.add_argument('--server', metavar='<server>',
                            help='Runs of this server (UUID or name)')
        parser.add_argument('--limit', metavar='<count>', type=int,
                            help='At most this many runs')
        return parser

    def take_action(self, parsed_args):
        instance = None
        if parsed_args.server:
            found = resolve.server_ids(self.app, parsed_args.server)
            if not found:
                raise exceptions.CommandError(
                    'no server %s found' % parsed_args.server)
            instance = found[0]
        try:
            rows = _runs(self.app).list(node=parsed_args.node,
                                        instance_uuid=instance,
                                        limit=parsed_args.limit)
        except runs.RunsError as exc:
            raise exceptions.CommandError(str(exc))
        return view.list_rows(rows)


class RunLogs(command.Command):
    """Print a container run's output (stdout and stderr together)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _add_target(parser)
        parser.add_argument('--follow', action='store_true',
                            help='Go on printing new output until the run '
                                 'ends')
        parser.add_argument('--interval', metavar='<seconds>', type=float,
                            default=2.0,
                            help='--follow: seconds between two reads '
                                 '(default 2)')
        return parser

    def take_action(self, parsed_args):
        report = _report(self.app, parsed_args)
        client = _runs(self.app)
        run_id = report['deploy_id']
        printed = ''
        while True:
            try:
                out = client.output(run_id)
            except runs.RunsError as exc:
                raise exceptions.CommandError(str(exc))
            new = output.unseen(printed, out.text)
            self.app.stdout.write(new)
            self.app.stdout.flush()
            printed = (printed + new)[-2 * output.WINDOW:]
            if (out.full or out.state in protocol.RUN_FINAL_STATES
                    or not parsed_args.follow):
                break
            time.sleep(parsed_args.interval)
        if not out.full:
            self.app.stderr.write(
                '(run %s is %s: this is the end of its output so far%s)\n'
                % (run_id, out.state, '' if parsed_args.follow
                   else '; --follow prints the rest as it comes'))


class RunResults(command.Lister):
    """List a container run's result files, or download them."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _add_target(parser)
        parser.add_argument('paths', metavar='<path>', nargs='*',
                            help='Download only these result files '
                                 '(absolute paths in the container)')
        parser.add_argument('--output-dir', metavar='<directory>',
                            help='Download the result files into this '
                                 'directory, each under its path in the '
                                 'container (default with <path>: the '
                                 'current directory)')
        return parser

    def take_action(self, parsed_args):
        report = _report(self.app, parsed_args)
        client = _runs(self.app)
        run_id = report['deploy_id']
        try:
            listing = client.results(run_id)
        except runs.RunsError as exc:
            raise exceptions.CommandError(str(exc))
        files = listing.get('results') or []
        if parsed_args.output_dir is None and not parsed_args.paths:
            rows = [(f['path'], f.get('size'), f.get('sha256'), None)
                    for f in files]
            rows += [_refused(item) for item in listing.get('refused') or ()]
            return ('path', 'size', 'sha256', 'error'), rows
        wanted = _select(files, parsed_args.paths, run_id)
        directory = parsed_args.output_dir or os.curdir
        rows = []
        for item in wanted:
            dest = _destination(directory, item['path'])
            try:
                data = client.result(run_id, item['path'],
                                     sha256=item.get('sha256'))
            except runs.RunsError as exc:
                raise exceptions.CommandError(str(exc))
            _write(dest, data)
            rows.append((item['path'], len(data), item.get('sha256'), dest))
        return ('path', 'size', 'sha256', 'file'), rows


class RunChart(command.Command):
    """Draw a container run's stage timeline, BMC power curve or OS-noise
    histogram."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        _add_target(parser)
        parser.add_argument('--kind', choices=charts.KINDS,
                            default=charts.KIND_TIMELINE,
                            help='timeline: the stages of the run (and '
                                 'where agent-up went); power: the BMC\'s '
                                 'power readings with the workload\'s '
                                 'window and energy; noise: the delays '
                                 'the cycle-level noise probe saw, per '
                                 'probe and CPU (default: timeline)')
        parser.add_argument('--format', dest='chart_format',
                            choices=charts.FORMATS, default='png',
                            help='Image format (default: png)')
        parser.add_argument('-o', '--output', metavar='<file>',
                            help='Write the chart here ("-" for stdout); '
                                 'default run-<deploy-id>-<kind>.<format>')
        return parser

    def take_action(self, parsed_args):
        report = _report(self.app, parsed_args)
        try:
            data = charts.render(report, parsed_args.kind,
                                 parsed_args.chart_format)
        except charts.ChartUnavailable as exc:
            raise exceptions.CommandError(exc.reason)
        path = parsed_args.output or 'run-%s-%s.%s' % (
            report['deploy_id'][:8], parsed_args.kind,
            parsed_args.chart_format)
        if path == '-':
            stream = getattr(self.app.stdout, 'buffer', None)
            (stream or sys.stdout.buffer).write(data)
            return
        with open(path, 'wb') as f:
            f.write(data)
        self.app.stdout.write('%s: %s chart of run %s, %d bytes\n'
                              % (path, parsed_args.kind,
                                 report['deploy_id'], len(data)))


def _refused(item):
    if isinstance(item, dict):
        return (item.get('path'), item.get('size'), None,
                item.get('error') or item.get('reason') or 'refused')
    return (str(item), None, None, 'refused')


def _select(files, paths, run_id):
    if not paths:
        return files
    by_path = {f['path']: f for f in files}
    missing = [p for p in paths if p not in by_path]
    if missing:
        raise exceptions.CommandError(
            'run %s has no result file %s; it has: %s'
            % (run_id, ', '.join(missing),
               ', '.join(sorted(by_path)) or 'none'))
    return [by_path[p] for p in paths]


def _destination(directory, path):
    """Where result file ``path`` (absolute, in the container) goes under
    ``directory``; refused when it would land outside it."""
    relative = path.lstrip('/')
    parts = relative.split('/')
    if not relative or '..' in parts or '' in parts or '.' in parts:
        raise exceptions.CommandError(
            'refusing result path %r: not a plain absolute path' % path)
    root = os.path.realpath(directory)
    dest = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([root, dest]) != root or dest == root:
        raise exceptions.CommandError(
            'refusing result path %r: it would be written outside %s'
            % (path, directory))
    return dest


def _write(dest, data):
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = dest + '.part'
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                 0o644)
    with os.fdopen(fd, 'wb') as f:
        f.write(data)
    os.replace(tmp, dest)


class CompareNoise(command.Lister):
    """Compare the OS noise of runs: Linux with and without tunables, and
    the noise unikernel, on the same node (IncludeOS thesis style).

    A row per probe and CPU: the counter's floor, events per second, the
    share of time lost, the events' mean, standard deviation and 90 %
    confidence interval, and the thesis's cycle buckets.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('targets', metavar='<run|server|node>',
                            nargs='+', help=_TARGET_HELP)
        parser.add_argument('--chart', metavar='<file.png|file.svg>',
                            help='Also draw every probe\'s histogram in '
                                 'one chart')
        return parser

    def take_action(self, parsed_args):
        fmt = (parsed_args.chart or '.png').rsplit('.', 1)[-1]
        if fmt not in charts.FORMATS:
            raise exceptions.CommandError(
                '--chart: the file name ends in the format, one of: %s'
                % ', '.join(charts.FORMATS))
        reports = []
        for target in parsed_args.targets:
            try:
                reports.append(resolve.run_report(self.app, _runs(self.app),
                                                  target, None))
            except runs.RunsError as exc:
                raise exceptions.CommandError(str(exc))
        columns, rows = noise_table.table(reports)
        if not rows:
            raise exceptions.CommandError(
                'none of these runs has a noise probe: deploy with '
                'instance_info/container_noise_probe, or boot the noise '
                'unikernel (unikernel deploy interface)')
        if parsed_args.chart:
            try:
                data = noise_table.chart(reports, fmt)
            except charts.ChartUnavailable as exc:
                raise exceptions.CommandError(exc.reason)
            with open(parsed_args.chart, 'wb') as f:
                f.write(data)
        return columns, rows
