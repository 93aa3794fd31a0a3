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

"""``openstack baremetal container pgo``: profile-guided kernel
optimisation of one image on one node, the whole loop (operator).

1. the node kernel is built plain and with gcov (the node's
   ``kernel_build`` vendor method; both are cached by digest);
2. a profiling run: the image as a job on the gcov kernel with
   ``container_kernel_profile=gcov``; its report keeps the profile;
3. the pgo kernel is built from that profile (cached by its digest too);
4. the image runs ``--repeat`` times on the plain and on the pgo kernel
   (the sweep's runs: same CSV, JSON and chart in ``--output-dir/runs``);
5. the table compares them, with the builds' times and the break-even in
   runs; ``pgo.json`` keeps it all, and the profiling run that a second
   loop of the same image, workload and gcov kernel reuses
   (``--reprofile`` counts again).
"""

import os

from osc_lib import exceptions

from bmc_common import protocol
from ironic_bmc_client.osc import deploy
from ironic_bmc_client.osc import sweep as sweep_command
from ironic_bmc_client import pgo
from ironic_bmc_client import sweep


class PgoContainer(sweep_command.SweepContainer):
    """Optimise the node kernel for an image from its gcov profile, and
    measure it against the plain kernel (operator)."""

    def get_parser(self, prog_name):
        parser = super(sweep_command.SweepContainer,
                       self).get_parser(prog_name)
        parser.add_argument('--node', required=True, metavar='<node>',
                            help='The node (UUID or name), available; the '
                                 'kernels are built on its conductor')
        sweep_command.add_workload_arguments(parser)
        parser.add_argument('--kernel-source', metavar='<tarball>',
                            help='A Linux source tarball in the conductor\'s '
                                 '[container]kernel_source_dirs (default: '
                                 'the only linux-source-* there)')
        parser.add_argument('--config', metavar='<fragment>',
                            help='The kernel config fragment (default '
                                 'bmc-node)')
        parser.add_argument('--repeat', type=int, default=3, metavar='<n>',
                            help='Runs on each kernel (default 3)')
        sweep_command.add_metric_arguments(parser)
        parser.add_argument('--rootfs', choices=deploy.ROOTFS_MODES)
        parser.add_argument('--reprofile', action='store_true',
                            help='Profile again, even if --output-dir holds '
                                 'a profiling run of this image, workload '
                                 'and gcov kernel')
        parser.add_argument('--output-dir', metavar='<dir>', default='pgo',
                            help='pgo.json and the runs (default ./pgo)')
        parser.add_argument('--timeout', type=float, default=1800.0,
                            metavar='<seconds>', help='Per run')
        parser.add_argument('--build-timeout', type=float, default=7200.0,
                            metavar='<seconds>',
                            help='Per kernel build, queue included '
                                 '(default 7200)')
        parser.add_argument('--interval', type=float, default=5.0,
                            metavar='<seconds>')
        return parser

    def take_action(self, parsed_args):
        if parsed_args.repeat < 1:
            raise exceptions.CommandError('--repeat must be 1 or more')
        baremetal = self.app.client_manager.baremetal
        node = baremetal.node.get(parsed_args.node,
                                  fields=['uuid', 'name', 'provision_state'])
        out = parsed_args.output_dir
        state = pgo.load_state(out)
        try:
            builds = {pgo.PLAIN: self._build(node, parsed_args,
                                             variant='plain'),
                      'gcov': self._build(node, parsed_args,
                                          variant='gcov')}
            profile = self._profile(node, parsed_args, state,
                                    builds['gcov'])
            builds[pgo.PGO] = self._build(node, parsed_args, variant='pgo',
                                          profile_run=profile['deploy_id'])
        except pgo.PgoError as exc:
            raise exceptions.CommandError(str(exc))
        state.update(builds=builds)
        pgo.save_state(out, state)
        build = builds[pgo.PGO].get('build') or {}
        used = build.get('profile') or {}
        self._say('The pgo kernel %s used the profile: %s .gcda files, %s '
                  'objects compiled without profile data'
                  % (builds[pgo.PGO]['build_id'], used.get('gcda_files'),
                     used.get('objects_without_profile')))
        # The comparison: the sweep's runs, plain kernel as baseline.
        runs_dir = os.path.join(out, 'runs')
        try:
            os.remove(os.path.join(runs_dir, 'state.json'))
        except FileNotFoundError:
            pass     # each loop measures afresh
        parsed_args.nodes = [node.uuid]
        parsed_args.kernel = ['%s=%s,%s' % (name, builds[name]['kernel'],
                                            builds[name]['kernel_modules'])
                              for name in (pgo.PLAIN, pgo.PGO)]
        parsed_args.tunables = []
        parsed_args.size = []
        parsed_args.size_env = sweep_command.SIZE_ENV
        parsed_args.baseline = pgo.PLAIN
        parsed_args.apply_image = parsed_args.apply_template = None
        parsed_args.output_dir = runs_dir
        self._pgo = {'builds': builds, 'profile': profile, 'state': state,
                     'out': out}
        return super().take_action(parsed_args)

    def _call(self, node):
        baremetal = self.app.client_manager.baremetal

        def call(method, args):
            # POST both: ironicclient sends no arguments with a GET.
            answer = baremetal.node.vendor_passthru(
                node.uuid, method, args=args, http_method='POST')
            return answer.to_dict() if hasattr(answer, 'to_dict') else answer
        return call

    def _build(self, node, parsed_args, variant, profile_run=None):
        call = self._call(node)
        args = {'variant': variant}
        if variant != 'pgo':
            if parsed_args.kernel_source:
                args['source'] = parsed_args.kernel_source
            if parsed_args.config:
                args['config'] = parsed_args.config
        else:
            args['profile_run'] = profile_run
        try:
            started = call('kernel_build', args)
        except Exception as exc:
            raise pgo.PgoError('kernel build (%s) refused: %s'
                               % (variant, exc)) from exc
        self._say('Kernel %s: build %s%s' % (
            variant, started['build_id'],
            ' (cached)' if started.get('cached') else ' ...'))
        status = pgo.wait_build(call, started['build_id'],
                                parsed_args.build_timeout,
                                parsed_args.interval, self._say)
        status['cached'] = bool(started.get('cached'))
        self._say('  %s: %s s, %s' % (variant, status.get('seconds'),
                                      status.get('kernel')))
        return status

    def _profile(self, node, parsed_args, state, gcov):
        patch = deploy.instance_info_patch(sweep_command._Args(parsed_args))
        key = pgo.profile_key(parsed_args.image, patch, gcov['build_id'])
        kept = state.get('profile') or {}
        if kept.get('key') == key and not parsed_args.reprofile:
            self._say('Profile: reusing run %s (--reprofile counts again)'
                      % kept['deploy_id'])
            return kept
        self._say('Profiling run on %s (gcov kernel %s) ...'
                  % (node.name or node.uuid, gcov['build_id']))
        values = {op['path'].rsplit('/', 1)[-1]: op['value']
                  for op in patch}
        values.update({protocol.II_MODE: protocol.MODE_JOB,
                       protocol.II_KERNEL_PROFILE: 'gcov',
                       'kernel': gcov['kernel'],
                       'kernel_modules': gcov['kernel_modules']})
        baremetal = self.app.client_manager.baremetal
        previous = deploy.newest_report(self.app, node.uuid)
        try:
            baremetal.node.update(node.uuid, [
                {'op': 'add', 'path': '/instance_info/%s' % k, 'value': v}
                for k, v in sorted(values.items())])
            baremetal.node.set_provision_state(node.uuid, 'active')
            report = deploy.wait_for_run(self.app, node, previous,
                                         parsed_args.timeout,
                                         parsed_args.interval)
        except Exception as exc:
            raise pgo.PgoError('the profiling run failed: %s' % exc) from exc
        finally:
            self._undeploy(node, parsed_args)
            self._forget_profiling(node)
        section = pgo.check_profile(report)
        workload = sweep._stage_seconds(report, 'workload-exited')
        kept = {'key': key, 'deploy_id': report['deploy_id'],
                'files': section.get('files'), 'bytes': section.get('bytes'),
                'uname_v': section.get('uname_v'),
                'machine': section.get('machine'),
                'seconds': (report.get('t_ready_s') or 0) + (workload or 0)}
        self._say('  profile: %s .gcda files, %s bytes, on %s'
                  % (kept['files'], kept['bytes'], kept['uname_v']))
        state['profile'] = kept
        pgo.save_state(parsed_args.output_dir, state)
        return kept

    def _forget_profiling(self, node):
        """No later run of the node profiles its kernel: undeploying
        cleared instance_info, but a deploy refused at validate leaves
        it as it was set."""
        baremetal = self.app.client_manager.baremetal
        try:
            baremetal.node.update(node.uuid, [
                {'op': 'remove',
                 'path': '/instance_info/%s' % protocol.II_KERNEL_PROFILE}])
        except Exception:  # noqa: S110 - not there: nothing to forget
            pass

    def _finish(self, parsed_args, spec, state):
        # The sweep's files (runs.csv, cells.csv, sweep.json, sweep.png).
        super()._finish(parsed_args, spec, state)
        rows = [dict(row) for _key, row in sorted(state.runs.items())]
        summary = sweep.summarize(
            rows, sweep.cells(spec['kernels'], spec['profiles'],
                              spec['sizes']),
            sweep.Cell(pgo.PLAIN, sweep_command.NO_TUNABLES))
        info = self._pgo
        builds = info['builds']
        profile = info['profile']
        loop = sum(b.get('seconds') or 0 for b in (builds['gcov'],
                                                   builds[pgo.PGO]))
        loop += profile.get('seconds') or 0
        shown = {}
        for name in (pgo.PLAIN, pgo.PGO):
            seen = sorted({r.get('uname_v') for r in rows
                           if r['kernel'] == name and r.get('uname_v')})
            shown[name] = dict(builds[name], uname_v=', '.join(seen),
                               loop_seconds=loop)
        table = pgo.table(summary, shown, not parsed_args.lower_is_better)
        note = pgo.where_measured(profile.get('machine'))
        info['state'].update(
            summary=[{k: v for k, v in s.items() if k != 'metrics'}
                     for s in summary],
            loop_seconds=loop, where_measured=note,
            uname_v={k: v['uname_v'] for k, v in shown.items()})
        pgo.save_state(info['out'], info['state'])
        self._say(note)
        self._say('The loop cost %.0f s (gcov and pgo builds, profiling '
                  'run); the break-even is that over the workload seconds '
                  'each run gains.' % loop)
        return pgo.COLUMNS, table
