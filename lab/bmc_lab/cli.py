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

"""``bmc-lab``: the virtual bare-metal lab.

    bmc-lab up [--profile embedded|scaled] [--nodes N] [--conductors N]
    bmc-lab status
    bmc-lab down [--purge]
    bmc-lab smoke            # Ironic ramdisk deploy of a tiny initrd
    bmc-lab demo             # up + the container job, the report last
    bmc-lab demo --tenant    # the same through Glance and Nova, as a tenant
    bmc-lab scale [--nodes N] [--conductors 1,2]
                             # N concurrent deploys, simulated machines
    bmc-lab recipe list|build|run|sweep
                             # the BMC paper's experiments (gemm, redis,
                             # web): images from Debian packages, swept

The state directory is ``--state-dir``, else ``$BMC_LAB_DIR``, else
/var/lib/bmc-lab.
"""

import argparse
import json
import os
import sys

from bmc_lab import agent
from bmc_lab import bench
from bmc_lab.cloud import tempest_run
from bmc_lab import container_job
from bmc_lab import control
from bmc_lab import osc
from bmc_lab import procs
from bmc_lab.recipes import commands as recipe_commands
from bmc_lab import scale_bench
from bmc_lab import scale_report
from bmc_lab import settings as lab_settings
from bmc_lab import smoke
from bmc_lab import tempest_job
from bmc_lab import tenant_job
from bmc_common import protocol


def _parser():
    p = argparse.ArgumentParser(prog='bmc-lab', description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument('--state-dir', default=os.environ.get(
        'BMC_LAB_DIR', lab_settings.DEFAULT_STATE_DIR),
        help='directory holding all lab state and logs '
             '(default: $BMC_LAB_DIR or %(default)s)')
    sub = p.add_subparsers(dest='command', required=True)
    defaults = lab_settings.Ports()
    for name in ('up', 'demo', 'bench'):
        s = sub.add_parser(name, help={
            'up': 'bring the lab up',
            'demo': 'bring the lab up and run the main job',
            'bench': 'bring the lab up and run the benchmark'}[name])
        s.add_argument('--profile', choices=lab_settings.PROFILES,
                       default=None,
                       help='embedded: one "ironic" process on sqlite; '
                            'scaled: ironic-api + ironic-conductor on '
                            'MariaDB and RabbitMQ; cloud: embedded behind '
                            'Keystone, Glance, Placement, Nova and the '
                            'Neutron API (default: embedded; cloud with '
                            'demo --tenant)')
        s.add_argument('--nodes', type=int, default=1,
                       help='number of QEMU nodes (default: %(default)s)')
        s.add_argument('--conductors', type=int, default=1,
                       help='ironic-conductor processes (scaled profile; '
                            'default: %(default)s)')
        s.add_argument('--node-memory-mb', type=int,
                       default=4096 if name == 'bench' else 2048,
                       help='RAM of each QEMU node (default: %(default)s)')
        if name == 'bench':
            s.add_argument('--large-image-mb', type=int, default=1536,
                           help='size of the large image streamed for the '
                                'app start of a large image over a small '
                                'one; 0 skips it (default: %(default)s)')
            s.add_argument('--pgo', action='store_true',
                           help='also run the PGKO loop twice on node 0 '
                                '(three kernel builds: about 30 minutes '
                                'on two cores; installs linux-source-6.1)')
            s.add_argument('--scale-nodes', type=int, default=200,
                           help='simulated nodes of the scale part, run '
                                'with one conductor, then two; 0 skips it '
                                '(default: %(default)s)')
        if name == 'demo':
            s.add_argument('--tunables', metavar='PROFILE_OR_JSON',
                           help='kernel tunables for the run: a profile '
                                'name (e.g. thp-never) or a JSON object '
                                'of knobs; sets instance_info/'
                                'container_tunables (with --tenant: the '
                                'flavor bm.container.<PROFILE> if there '
                                'is one, else the image property)')
            s.add_argument('--rootfs', choices=protocol.ROOTFS_MODES_SUPPORTED,
                           help='how the node gets the container root: '
                                'ramfs (downloaded into RAM, the default), '
                                'stream (blocks on demand, then the rest '
                                'in the background) or nfs (the lab\'s '
                                'nfs-ganesha export with a RAM overlay); '
                                'sets instance_info/container_rootfs')
            s.add_argument('--tenant', action='store_true',
                           help='run the job as the tenant "demo" '
                                'through Glance and Nova (cloud profile)')
        for field in ('ironic_api', 'http', 'registry', 'nfs', 'ipmi_base',
                      'agent_base', 'wol', 'runs_api'):
            s.add_argument('--%s-port' % field.replace('_', '-'), type=int,
                           dest=field, default=getattr(defaults, field),
                           help='127.0.0.1 port (default: %(default)s)')
    sc = sub.add_parser('scale', help='N concurrent container deploys on '
                        'simulated machines (a scaled-profile lab of its '
                        'own, under STATE_DIR/scale)')
    sc.add_argument('--nodes', type=int, default=200,
                    help='simulated nodes (default: %(default)s)')
    sc.add_argument('--conductors', default='1,2',
                    help='conductor counts to run, comma-separated '
                         '(default: %(default)s)')
    d = sub.add_parser('down', help='tear the lab down (logs are kept)')
    d.add_argument('--purge', action='store_true',
                   help='also remove the state directory and database')
    sub.add_parser('status', help='show what runs')
    sub.add_parser('smoke', help='ramdisk-deploy a tiny initrd on node 0')
    t = sub.add_parser('tempest', help='run the tempest plugin '
                       '(tempest_plugin/) against the cloud profile')
    t.add_argument('--regex', default=tempest_run.DEFAULT_REGEX,
                   help='tests to run (default: all of the plugin)')
    recipe_commands.add_parser(sub)
    return p


def _settings_from_args(args):
    profile = args.profile or (
        lab_settings.PROFILE_CLOUD if getattr(args, 'tenant', False)
        else lab_settings.PROFILE_EMBEDDED)
    if getattr(args, 'tenant', False) and profile != (
            lab_settings.PROFILE_CLOUD):
        raise procs.LabError('--tenant runs through Nova: it needs '
                             '--profile %s, not %s'
                             % (lab_settings.PROFILE_CLOUD, profile))
    ports = lab_settings.Ports(
        ironic_api=args.ironic_api, http=args.http, registry=args.registry,
        nfs=args.nfs, ipmi_base=args.ipmi_base, agent_base=args.agent_base,
        wol=args.wol, runs_api=args.runs_api)
    try:
        return lab_settings.Settings(
            state_dir=args.state_dir, profile=profile,
            nodes=args.nodes, conductors=args.conductors,
            node_memory_mb=args.node_memory_mb, ports=ports)
    except ValueError as exc:
        raise procs.LabError(str(exc))


def _loaded(args):
    settings = lab_settings.Settings.load(args.state_dir)
    if settings is None or not control.is_up(settings):
        raise procs.LabError('no lab is up in %s; run "bmc-lab up" first'
                             % args.state_dir)
    return settings


def _demo(args):
    """Lab up, then the container job; the report is the last line."""
    if args.tenant:
        if args.rootfs:
            raise procs.LabError('--rootfs sets instance_info, which a '
                                 'tenant does not: give the Glance image '
                                 'the property container_rootfs instead')
        return tenant_job.demo(_settings_from_args(args), args.tunables)
    control.up(_settings_from_args(args))
    settings = _loaded(args)
    agent.ensure(settings)
    image = container_job.push_demo_image(settings)
    # A demo stopped part-way left its deploy behind: undo it first.
    container_job.reclaim(settings)
    node = settings.node_name(0)
    container_job.use_container_interfaces(settings, node)
    # What an operator types: the project's openstack CLI plugin.
    run = ['baremetal', 'container', 'run', node, '--image', image,
           '--mode', protocol.MODE_JOB, '--timeout', '900']
    if args.tunables:
        run += ['--tunables', args.tunables]
    if args.rootfs:
        run += ['--rootfs', args.rootfs]
    print('$ openstack --os-cloud %s %s' % (osc.NOAUTH_CLOUD, ' '.join(run)))
    status = osc.openstack(settings, *run)
    charts = os.path.join(settings.state_dir, 'charts')
    os.makedirs(charts, exist_ok=True)
    for kind in ('timeline', 'power'):
        chart = ['baremetal', 'container', 'chart', node, '--kind', kind,
                 '-o', os.path.join(charts, 'demo-%s.png' % kind)]
        print('$ openstack --os-cloud %s %s'
              % (osc.NOAUTH_CLOUD, ' '.join(chart)))
        osc.openstack(settings, *chart)
    report = container_job.newest_report(settings, node)
    container_job.undeploy(settings)
    print(json.dumps(report, sort_keys=True))
    return 0 if status == 0 and report.get('workload_exit_code') == 0 else 1


def _scale_dir(args):
    return os.path.join(args.state_dir, 'scale')


def _scale(args):
    try:
        counts = [int(c) for c in args.conductors.split(',')]
    except ValueError:
        raise procs.LabError('--conductors: a comma-separated list of '
                             'numbers, got %r' % args.conductors)
    if args.nodes < 1 or any(c < 1 for c in counts):
        raise procs.LabError('--nodes and --conductors must be >= 1')
    runs = scale_bench.run(_scale_dir(args), args.nodes, counts)
    rows = scale_report.format_rows(runs)
    width = max(len(r[0]) for r in rows)
    print('\n'.join('%-*s  %s' % (width, k, v) for k, v in rows))
    print(json.dumps(scale_report.json_fields(runs), sort_keys=True))
    return 0 if not any(r['failures'] for r in runs) else 1


def main(argv=None):
    # Progress lines as they happen, also when the output is a pipe or a
    # file (tox, CI): a block-buffered stdout holds minutes of them back.
    sys.stdout.reconfigure(line_buffering=True)
    args = _parser().parse_args(argv)
    if os.geteuid() != 0 and args.command in ('up', 'demo', 'bench', 'down',
                                              'tempest', 'scale'):
        print('bmc-lab needs root (libvirtd and QEMU run as root).',
              file=sys.stderr)
        return 2
    try:
        if args.command == 'up':
            control.up(_settings_from_args(args))
        elif args.command == 'down':
            control.down(lab_settings.Settings(state_dir=args.state_dir),
                         purge=args.purge)
        elif args.command == 'status':
            print(control.status(lab_settings.Settings(
                state_dir=args.state_dir)))
        elif args.command == 'smoke':
            settings = _loaded(args)
            container_job.reclaim(settings)
            result = smoke.run(settings)
            print(json.dumps(result, sort_keys=True))
        elif args.command == 'demo':
            return _demo(args)
        elif args.command == 'tempest':
            code, _, _ = tempest_job.run_on_lab(_loaded(args), args.regex)
            return 0 if code == 0 else 1
        elif args.command == 'bench':
            control.up(_settings_from_args(args))
            return bench.main(_loaded(args),
                              large_mb=args.large_image_mb, pgo=args.pgo,
                              scale_nodes=args.scale_nodes,
                              scale_dir=_scale_dir(args))
        elif args.command == 'scale':
            return _scale(args)
        elif args.command == 'recipe':
            return recipe_commands.main(args, _loaded)
    except procs.LabError as exc:
        print('bmc-lab %s: %s' % (args.command, exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print('bmc-lab %s: interrupted; what it started in the lab goes on '
              '(a deploy ends ACTIVE): the next "bmc-lab demo" undoes it, '
              'or "bmc-lab down"' % args.command, file=sys.stderr)
        return 130
    return 0


if __name__ == '__main__':
    sys.exit(main())
