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

"""A runs API in memory and an OSC application around it."""

import hashlib
import io
from unittest import mock

from ironic_bmc_client import runs
from ironic_bmc_client.tests import fixtures


class FakeRuns:
    """:class:`ironic_bmc_client.runs.RunsClient`'s calls over reports."""

    def __init__(self, *reports, outputs=None, files=None, refused=()):
        self.reports = list(reports)
        #: {deploy id: [RunOutput, ...]} returned one after the other
        #: (the last one again once they are used up).
        self.outputs = outputs or {}
        #: {container path: bytes}
        self.files = files or {}
        self.refused = list(refused)
        self.calls = []

    def list(self, node=None, instance_uuid=None, limit=None):
        self.calls.append(('list', node, instance_uuid, limit))
        found = [r for r in sorted(self.reports, key=lambda r: r['created'],
                                   reverse=True)
                 if node in (None, r['node'], r['node_name'])
                 and instance_uuid in (None, r.get('instance_uuid'))]
        rows = [dict({k: r.get(k) for k in fixtures.RUN_ROW},
                     bmc_joules_workload=(r.get('energy') or {}).get(
                         'bmc_joules_workload'),
                     rapl_joules_workload=(r.get('energy') or {}).get(
                         'rapl_joules_workload'))
                for r in found]
        return rows[:limit] if limit else rows

    def get(self, run_id):
        self.calls.append(('get', run_id))
        for r in self.reports:
            if r['deploy_id'] == run_id:
                return r
        raise runs.NotFound('Run %s could not be found.' % run_id, 404)

    def output(self, run_id):
        self.get(run_id)
        queue = self.outputs[run_id]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def results(self, run_id):
        self.get(run_id)
        return {'results': [{'path': p, 'size': len(d),
                             'sha256': hashlib.sha256(d).hexdigest()}
                            for p, d in sorted(self.files.items())],
                'refused': self.refused}

    def result(self, run_id, path, sha256=None):
        self.calls.append(('result', run_id, path))
        data = self.files[path]
        if sha256 and sha256 != hashlib.sha256(data).hexdigest():
            raise runs.RunsError('sha256 mismatch')
        return data


class ClientManager:
    """OSC's client manager: the runs client, the baremetal client, and
    the compute client when the cloud has one."""

    def __init__(self, fake_runs, compute=None, baremetal=None):
        self.baremetal_container = fake_runs
        self.baremetal = baremetal or mock.Mock()
        self._compute = compute

    @property
    def compute(self):
        if self._compute is None:
            raise AttributeError('no compute endpoint in the catalog')
        return self._compute


def app(fake_runs, compute=None, baremetal=None):
    """An OSC application around the fakes."""
    application = mock.Mock(spec=['client_manager', 'stdout', 'stderr',
                                  'options'])
    application.client_manager = ClientManager(fake_runs, compute, baremetal)
    application.stdout = io.StringIO()
    application.stderr = io.StringIO()
    return application


def run(command_class, application, argv):
    """Parse ``argv`` and run the command; its take_action's result."""
    command = command_class(application, None)
    parser = command.get_parser('openstack baremetal container')
    return command.take_action(parser.parse_args(argv))


def as_dict(columns, values):
    """One row of a command's result as {column: value}."""
    return dict(zip(columns, values, strict=True))
