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

"""``openstack baremetal container run``: an operator runs an image on a
node.

The command sets the deploy's ``instance_info`` keys on the node (only
those doc/source/reference/instance-info.rst documents), deploys it, and
waits for the run: a job until it has ended, a service until its
workload runs.  It then prints the run's report as ``show`` does.  A
deploy that fails (provision state ``deploy failed`` or ``error``)
ends the command with the node's ``last_error`` and exit status 1.

The report is read from the runs API; where the cloud has no
``baremetal-container`` endpoint yet, from the node's ``run_report``
vendor method (the operator's own path).
"""

import json
import time

from ironicclient.common.apiclient import exceptions as ironic_exc
from keystoneauth1 import exceptions as ks_exc
from osc_lib.command import command
from osc_lib import exceptions

from bmc_common import protocol
from ironic_bmc_client.osc import view

#: Provision states of a deploy that failed.
FAILED_STATES = ('deploy failed', 'error')
ROOTFS_MODES = ('ramfs', 'nfs', 'stream')
MODES = (protocol.MODE_JOB, protocol.MODE_SERVICE)


class RunContainer(command.ShowOne):
    """Run a container image on a node (operator).

    Sets the node's instance_info, deploys it and waits for the run.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('node', metavar='<node>',
                            help='The node (UUID or name), available')
        add_run_arguments(parser)
        return parser

    def take_action(self, parsed_args):
        patch = instance_info_patch(parsed_args)
        baremetal = self.app.client_manager.baremetal
        node = baremetal.node.get(parsed_args.node,
                                  fields=['uuid', 'name', 'provision_state'])
        previous = self._newest(node.uuid)
        baremetal.node.update(node.uuid, patch)
        baremetal.node.set_provision_state(node.uuid, 'active')
        if parsed_args.no_wait:
            return (('node', 'provision_state', 'image', 'next'),
                    (node.name or node.uuid, 'deploying', parsed_args.image,
                     'openstack baremetal container show %s'
                     % (node.name or node.uuid)))
        return view.report_rows(self._wait(node, previous, parsed_args))

    def _wait(self, node, previous, parsed_args):
        return wait_for_run(self.app, node, previous, parsed_args.timeout,
                            parsed_args.interval)

    def _newest(self, node_uuid):
        return newest_report(self.app, node_uuid)


def add_run_arguments(parser):
    """The options of a run: the image, its program and environment, the
    mode, tunables, rootfs mode, walltime, and the wait."""
    parser.add_argument('--image', required=True, metavar='<ref>',
                        help='OCI reference of the container image '
                             '(%s)' % protocol.II_IMAGE)
    program = parser.add_mutually_exclusive_group()
    program.add_argument('--command', metavar='<json-list>',
                         help='Replaces the image\'s ENTRYPOINT and '
                              'CMD: a JSON list of strings (%s)'
                              % protocol.II_COMMAND)
    program.add_argument('--args', metavar='<json-list>',
                         help='Replaces the image\'s CMD and keeps its '
                              'ENTRYPOINT, as "docker run IMAGE ARGS": '
                              'a JSON list of strings (%s)'
                              % protocol.II_ARGS)
    parser.add_argument('--env', metavar='<key=value>', action='append',
                        default=[],
                        help='An environment variable laid over the '
                             'image\'s Env; repeat for more (%s)'
                             % protocol.II_ENV)
    parser.add_argument('--mode', choices=MODES,
                        help='job: runs to completion; service: runs '
                             'until undeploy (%s, default service)'
                             % protocol.II_MODE)
    parser.add_argument('--tunables', metavar='<profile|json>',
                        help='A tunables profile name or a JSON object '
                             'of knobs (%s)' % protocol.II_TUNABLES)
    parser.add_argument('--rootfs', choices=ROOTFS_MODES,
                        help='How the node gets the container\'s root '
                             '(%s, default ramfs)' % protocol.II_ROOTFS)
    parser.add_argument('--walltime', metavar='<duration>',
                        help='The longest the workload may run: '
                             'seconds, 90m, 2h, 1d or HH:MM:SS (%s)'
                             % protocol.II_WALLTIME)
    parser.add_argument('--timeout', metavar='<seconds>', type=float,
                        default=1800.0,
                        help='How long to wait for the run (default '
                             '1800)')
    parser.add_argument('--interval', metavar='<seconds>', type=float,
                        default=5.0,
                        help='Seconds between two polls (default 5)')
    parser.add_argument('--no-wait', action='store_true',
                        help='Return once the deploy is requested')


def wait_for_run(app, node, previous, timeout, interval):
    """The report of the node's run newer than ``previous`` once it is
    ready (a job ended, a service running).

    :raises CommandError: the deploy failed, or ``timeout`` passed.
    """
    baremetal = app.client_manager.baremetal
    deadline = time.monotonic() + timeout
    while True:
        state = baremetal.node.get(
            node.uuid, fields=['provision_state', 'last_error'])
        if state.provision_state in FAILED_STATES:
            raise exceptions.CommandError(
                'deploy of %s failed (%s): %s'
                % (node.name or node.uuid, state.provision_state,
                   state.last_error))
        report = newest_report(app, node.uuid)
        if report and report.get('deploy_id') == (previous or {}).get(
                'deploy_id'):
            report = None   # the node's last run, not this one yet
        if report and _ready(report):
            return report
        if time.monotonic() > deadline:
            raise exceptions.CommandError(
                'the run on %s did not end or start within %ds: '
                'provision state %s, run %s'
                % (node.name or node.uuid, timeout, state.provision_state,
                   (report or {}).get('state', 'not recorded yet')))
        time.sleep(interval)


def newest_report(app, node_uuid):
    """The node's newest run report, or None."""
    try:
        found = app.client_manager.baremetal_container.list(
            node=node_uuid, limit=1)
        if not found:
            return None
        return app.client_manager.baremetal_container.get(
            found[0]['deploy_id'])
    except ks_exc.EndpointNotFound:
        return _passthru_report(app, node_uuid)


def _passthru_report(app, node_uuid):
    try:
        report = app.client_manager.baremetal.node.vendor_passthru(
            node_uuid, 'run_report', http_method='GET')
    except ironic_exc.NotFound:
        return None
    return report.to_dict() if hasattr(report, 'to_dict') else report


def _ready(report):
    """A job's run has ended; a service's workload runs (or has
    exited)."""
    state = report.get('state')
    if state in protocol.RUN_FINAL_STATES:
        return True
    return (report.get('mode') != protocol.MODE_JOB
            and state in (protocol.RUN_RUNNING, protocol.RUN_EXITED))


def instance_info_patch(parsed_args):
    """The JSON patch of the node's instance_info for the run."""
    values = {protocol.II_IMAGE: parsed_args.image}
    if parsed_args.command is not None:
        values[protocol.II_COMMAND] = _command(parsed_args.command)
    if parsed_args.args is not None:
        values[protocol.II_ARGS] = _command(parsed_args.args, '--args',
                                            allow_empty=True)
    if parsed_args.env:
        values[protocol.II_ENV] = _env(parsed_args.env)
    if parsed_args.mode:
        values[protocol.II_MODE] = parsed_args.mode
    if parsed_args.tunables:
        values[protocol.II_TUNABLES] = _tunables(parsed_args.tunables)
    if parsed_args.rootfs:
        values[protocol.II_ROOTFS] = parsed_args.rootfs
    if parsed_args.walltime:
        values[protocol.II_WALLTIME] = parsed_args.walltime
    return [{'op': 'add', 'path': '/instance_info/%s' % key, 'value': value}
            for key, value in values.items()]


def _command(text, option='--command', allow_empty=False):
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise exceptions.CommandError(
            '%s must be a JSON list of strings: %s' % (option, exc))
    if (not isinstance(value, list) or not (value or allow_empty)
            or not all(isinstance(v, str) for v in value)):
        raise exceptions.CommandError(
            '%s must be a %sJSON list of strings, got %s'
            % (option, '' if allow_empty else 'non-empty ', text))
    return value


def _env(pairs):
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition('=')
        if not sep or not key:
            raise exceptions.CommandError(
                '--env takes KEY=VALUE, got %r' % pair)
        env[key] = value
    return env


def _tunables(text):
    """A profile name, or the JSON object of knobs."""
    if not text.lstrip().startswith('{'):
        return text
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise exceptions.CommandError(
            '--tunables must be a profile name or a JSON object: %s' % exc)
    if not isinstance(value, dict):
        raise exceptions.CommandError(
            '--tunables must be a profile name or a JSON object, got %s'
            % text)
    return value
