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

"""Runs as the runs API returns them, for the plugin's tests."""

import copy
import hashlib

from ironic_bmc_dashboard import api

CREATED = 1764150000.0
DEPLOY_ID = '6f1c2a9e-4b7d-4e3a-9c51-2d8e7f0a1b34'
OTHER_ID = '0b5e7d3c-1a2f-4c8e-9d6b-7e4f3a2c1b0d'
NODE = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123'
IMAGE = 'registry.example:5000/hpc/solver:1'
OUTPUT = 'step 1: residual 1.000e-01\nmessage:  <b>from a Glance property' \
         '</b>\ndone\n'
RESULT = b'iteration,residual\n1,0.1\n'
RESULT_SHA256 = hashlib.sha256(RESULT).hexdigest()

_STAGES = (('artifact-ready', 0.2, 12.0), ('power-on', 0.4, 4.1),
           ('agent-up', 4.1, 45.6), ('tunables-applied', 45.6, 46.2),
           ('rootfs-staged', 46.2, 52.6), ('workload-started', 52.6, 53.9),
           ('workload-exited', 53.9, 173.9), ('powered-off', 175.8, 180.1))


def report(instance_uuid, **changes):
    """A finished job's report as the tenant reads it, with a BMC power
    curve; ``changes`` laid over it."""
    out = {
        'version': 1, 'deploy_id': DEPLOY_ID, 'node': NODE,
        'node_name': 'node-0', 'instance_uuid': instance_uuid,
        'project_id': 'p', 'image': IMAGE, 'rootfs': 'ramfs',
        'mode': 'job', 'state': 'finished', 'workload_exit_code': 0,
        'created': CREATED, 't_ready_s': 53.9, 'error': None,
        'stages': [{'name': n, 'start': CREATED + a, 'end': CREATED + b,
                    'duration_s': round(b - a, 3)} for n, a, b in _STAGES],
        'tunables': {
            'thp': {'requested': 'never', 'previous': 'always',
                    'actual': 'never', 'ok': True},
            'swappiness': {'requested': 10, 'previous': 60, 'actual': 60,
                           'ok': False, 'error': 'read back 60'},
            'hugepages': {'supported': False,
                          'reason': 'no hugetlbfs in this kernel'},
        },
        'energy': {'available': True, 'bmc_joules_run': 25412.6,
                   'bmc_joules_workload': 21890.4,
                   'mean_watts_workload': 182.4,
                   'rapl_joules_workload': 15210.7},
        'power_series': {
            't0': CREATED + 0.4, 'period_s': 2.0, 'workload': [53.5, 173.5],
            'points': [[0.6 + 2 * i, 100.0 + (80.0 if 27 < i < 87 else 0)]
                       for i in range(92)]},
        'output_tail': OUTPUT,
        'results': {'/results/residuals.csv': {'size': len(RESULT),
                                               'sha256': RESULT_SHA256},
                    '/results/huge.bin': {'error': 'larger than 64 MB'}},
    }
    out.update(changes)
    return copy.deepcopy(out)


def deploying_report(instance_uuid):
    """A run that has just begun: no stage, no power sample yet."""
    out = report(instance_uuid, state='deploying', stages=[],
                 workload_exit_code=None, t_ready_s=None, energy=None,
                 tunables=None, results=None, output_tail='')
    del out['power_series']
    return out


def row(instance_uuid, deploy_id=DEPLOY_ID, **changes):
    """A row of ``GET /v1/runs``."""
    out = {'deploy_id': deploy_id, 'node': NODE, 'node_name': 'node-0',
           'instance_uuid': instance_uuid, 'project_id': 'p',
           'state': 'finished', 'workload_exit_code': 0, 'image': IMAGE,
           'mode': 'job', 'created': CREATED, 't_ready_s': 53.9,
           'bmc_joules_workload': 21890.4, 'rapl_joules_workload': None}
    out.update(changes)
    return api.Run(out)


RESULTS = {'deploy_id': DEPLOY_ID,
           'results': [{'path': '/results/residuals.csv',
                        'size': len(RESULT), 'sha256': RESULT_SHA256}],
           'refused': [{'path': '/results/huge.bin',
                        'error': 'larger than 64 MB'}]}
