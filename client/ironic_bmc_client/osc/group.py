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

"""Run groups from the CLI (operator).

``openstack baremetal container group run NODE NODE ... --name mpi
--image REF`` sets the run's keys and the group's (``container_group``,
``container_group_size``, ``container_group_launcher``) on every node,
deploys them all, waits for every member's run and prints the group
report.  ``openstack baremetal container group show NODE`` prints the
group report of a member's run.
"""

from ironicclient.common.apiclient import exceptions as ironic_exc
from osc_lib.command import command
from osc_lib import exceptions

from bmc_common import protocol
from ironic_bmc_client.osc import deploy

FIELDS = ('name', 'id', 'state', 'size', 'launcher', 'ended_by',
          'energy_j_total', 'energy_j_known', 'slowest_t_ready_s',
          'slowest_rank', 'members')


def _member_line(m):
    if m.get('report') == 'elsewhere':
        return ('rank %(rank)s %(hostname)s %(address)s %(node)s: report '
                'on another conductor' % m)
    return ('rank %s %s %s %s: %s, exit %s, T_ready %s s, %s J, barrier '
            'wait %s s%s' % (m['rank'], m['hostname'], m['address'],
                             m.get('node_name') or m['node'], m['state'],
                             m['exit_code'], m['t_ready_s'], m['energy_j'],
                             m['barrier_wait_s'],
                             ' (%s)' % m['error'] if m.get('error') else ''))


def group_rows(group):
    """The group report as ShowOne columns and values."""
    values = []
    for field in FIELDS:
        value = group.get(field)
        if field == 'members':
            value = '\n'.join(_member_line(m) for m in value or ())
        elif field == 'ended_by' and value:
            value = 'rank %s (%s): %s' % (value.get('rank'),
                                          value.get('node'),
                                          value.get('reason'))
        values.append(value)
    return FIELDS, tuple(values)


def group_report(baremetal, node, deploy_id=None):
    # (The client sends no arguments with a GET: the method takes POST.)
    kwargs = ({'args': {'deploy_id': deploy_id}, 'http_method': 'POST'}
              if deploy_id else {'http_method': 'GET'})
    try:
        found = baremetal.node.vendor_passthru(node, 'run_group', **kwargs)
    except (ironic_exc.NotFound, ironic_exc.BadRequest) as exc:
        raise exceptions.CommandError(
            'node %s has no run group report: %s' % (node, exc))
    return found.to_dict() if hasattr(found, 'to_dict') else found


class RunGroup(command.ShowOne):
    """Run a container image on several nodes as one job (operator).

    Every node gets the run's instance_info and the group's; the nodes
    are deployed, and the conductor starts no workload before every
    member has staged its root.  Waits for every member's run; prints the
    group report.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('nodes', metavar='<node>', nargs='+',
                            help='The nodes (UUIDs or names), available; '
                                 'rank 0 is the first by name')
        parser.add_argument('--name', required=True, metavar='<group>',
                            help='The group\'s name: lowercase letters, '
                                 'digits and "-" (%s)' % protocol.II_GROUP)
        parser.add_argument('--launcher', choices=protocol.GROUP_LAUNCHERS,
                            help='ssh: the command runs on rank 0, the '
                                 'others run the image\'s sshd; none: '
                                 'every member runs it (%s, default ssh)'
                                 % protocol.II_GROUP_LAUNCHER)
        deploy.add_run_arguments(parser)
        return parser

    def take_action(self, parsed_args):
        if len(set(parsed_args.nodes)) < 2:
            raise exceptions.CommandError(
                'a run group needs at least two different nodes, got %s'
                % ', '.join(parsed_args.nodes))
        if not parsed_args.mode:
            parsed_args.mode = protocol.MODE_JOB
        patch = deploy.instance_info_patch(parsed_args)
        keys = {protocol.II_GROUP: parsed_args.name,
                protocol.II_GROUP_SIZE: len(parsed_args.nodes)}
        if parsed_args.launcher:
            keys[protocol.II_GROUP_LAUNCHER] = parsed_args.launcher
        patch += [{'op': 'add', 'path': '/instance_info/%s' % key,
                   'value': value} for key, value in keys.items()]
        baremetal = self.app.client_manager.baremetal
        nodes = [baremetal.node.get(n, fields=['uuid', 'name',
                                               'provision_state'])
                 for n in parsed_args.nodes]
        previous = {n.uuid: deploy.newest_report(self.app, n.uuid)
                    for n in nodes}
        for node in nodes:
            baremetal.node.update(node.uuid, patch)
        requested = []
        for node in nodes:
            try:
                baremetal.node.set_provision_state(node.uuid, 'active')
            except ironic_exc.ClientException as exc:
                # The members already deploying would wait at the barrier
                # for this one: undeploying one undeploys them all.
                if requested:
                    baremetal.node.set_provision_state(requested[0].uuid,
                                                       'deleted')
                raise exceptions.CommandError(
                    'deploying %s failed, so the group does not run%s: %s'
                    % (node.name or node.uuid,
                       ' (%s undeployed)' % ', '.join(
                           r.name or r.uuid for r in requested)
                       if requested else '', exc))
            requested.append(node)
        if parsed_args.no_wait:
            return group_rows({'name': parsed_args.name,
                               'state': protocol.RUN_DEPLOYING,
                               'size': len(nodes)})
        for node in nodes:
            deploy.wait_for_run(self.app, node, previous[node.uuid],
                                parsed_args.timeout, parsed_args.interval)
        return group_rows(group_report(baremetal, nodes[0].uuid))


class ShowGroup(command.ShowOne):
    """Show the group report of a run group member's run."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('node', metavar='<node>',
                            help='A member node (UUID or name)')
        parser.add_argument('--deploy-id', metavar='<deploy id>',
                            help='An earlier run of the node (default: '
                                 'its current or last one)')
        return parser

    def take_action(self, parsed_args):
        return group_rows(group_report(
            self.app.client_manager.baremetal, parsed_args.node,
            parsed_args.deploy_id))
