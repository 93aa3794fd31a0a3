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

"""Run reports as the runs API returns them, for the client's tests.

The times are those of the benchmark's cold container run
(doc/source/admin/benchmark.rst): power-on 3.7 s, agent-up 41.5 s,
staging 6.4 s, workload start 1.3 s; the job then runs for two minutes.
"""

import copy
import math

CREATED = 1764150000.0
DEPLOY_ID = '6f1c2a9e-4b7d-4e3a-9c51-2d8e7f0a1b34'
NODE = '1be26c0b-03f2-4d2e-ae87-c02d7f33c123'
SERVER = 'c0ffee00-5e1f-4a0b-8d1e-3f2a9b8c7d6e'
PROJECT = '8d9f0e1a2b3c4d5e6f708192a3b4c5d6'

_STAGES = (('artifact-ready', 0.2, 12.0), ('power-on', 0.4, 4.1),
           ('agent-up', 4.1, 45.6), ('tunables-applied', 45.6, 46.2),
           ('rootfs-staged', 46.2, 52.6), ('workload-started', 52.6, 53.9),
           ('workload-exited', 53.9, 173.9), ('powered-off', 175.8, 180.1))

_BOOT_PHASES = (('firmware_ipxe_s', 'power_on', 13.6),
                ('kernel_s', 'kernel_start', 1.9),
                ('initramfs_unpack_s', 'initramfs_unpack_start', 6.8),
                ('kernel_to_init_s', 'initramfs_unpacked', 0.9),
                ('userspace_to_agent_s', 'init_start', 9.4),
                ('agent_to_heartbeat_s', 'agent_start', 7.6),
                ('heartbeat_to_step_s', 'first_heartbeat', 1.3))

OUTPUT = ''.join('step %d: residual %.3e\n' % (i, 10.0 ** -i)
                 for i in range(1, 13)) + 'done\n'


def _boot():
    marks, phases, at = {}, {}, CREATED + 4.1
    for phase, mark, seconds in _BOOT_PHASES:
        marks[mark] = round(at, 3)
        phases[phase] = seconds
        at += seconds
    marks['agent_up'] = round(at, 3)
    return {'agent_up_s': 41.5, 'phases': phases, 'marks': marks,
            'aligned_by': 'the node boot clock at the first in-band step',
            'via': 'firmware', 'initramfs_bytes': 412090368}


def _watts(t):
    """A node's draw: firmware, boot, staging, the job, then off."""
    if t < 3.7:
        return 14.0
    if t < 17.7:
        return 92.0 + 6 * math.sin(t)
    if t < 53.0:
        return 104.0 + 8 * math.sin(t / 3.0)
    if t < 173.5:
        return 182.0 + 9 * math.sin(t / 5.0) + 4 * math.sin(t * 1.7)
    if t < 179.6:
        return 96.0
    return 13.5


def _power_series():
    points = [[round(t, 2), round(_watts(t), 1)]
              for t in (0.6 + 2.0 * i for i in range(92))]
    return {'t0': CREATED + 0.4, 'period_s': 2.0,
            'workload': [53.5, 173.5], 'points': points}


REPORT = {
    'version': 1,
    'deploy_id': DEPLOY_ID,
    'node': NODE,
    'node_name': 'node-0',
    'instance_uuid': SERVER,
    'project_id': PROJECT,
    'image': 'registry.example:5000/hpc/solver:1',
    'image_digest': 'sha256:' + '4e' * 32,
    'rootfs': 'ramfs',
    'mode': 'job',
    'state': 'finished',
    'workload_exit_code': 0,
    'created': CREATED,
    't_ready_s': 54.3,
    'stages': [{'name': n, 'start': CREATED + a, 'end': CREATED + b,
                'duration_s': round(b - a, 3)} for n, a, b in _STAGES],
    'boot': _boot(),
    'staging': {'rootfs': 'ramfs', 'verify': 'dm-verity',
                'bytes': 346030080, 'download_s': 5.2, 'mount_s': 1.2},
    'tunables': {
        'thp': {'requested': 'never', 'previous': 'always',
                'actual': 'never', 'ok': True},
        'swappiness': {'requested': 10, 'previous': 60, 'actual': 10,
                       'ok': True},
        'hugepages': {'supported': False,
                      'reason': 'no hugetlbfs in this kernel'},
    },
    'energy': {'available': True, 'method': 'ipmi-dcmi',
               'bmc_joules_run': 25412.6, 'bmc_joules_workload': 21890.4,
               'bmc_samples': 92, 'bmc_samples_workload': 61,
               'mean_watts_workload': 182.4, 'period_s': 2.0,
               'rapl': {'available': True, 'joules': 15210.7},
               'rapl_joules_workload': 15210.7},
    'output': {'bytes': len(OUTPUT), 'kept': len(OUTPUT), 'dropped': 0,
               'complete': True, 'sha256': None},
    'results': {'/results/residuals.csv': {'size': 12,
                                           'sha256': None}},
    'output_tail': OUTPUT,
    'error': None,
    'takeovers': [],
    'power_series': _power_series(),
}

RUN_ROW = {key: REPORT[key] for key in (
    'deploy_id', 'node', 'node_name', 'instance_uuid', 'project_id',
    'state', 'workload_exit_code', 'image', 'mode', 'created', 't_ready_s')}
RUN_ROW.update(bmc_joules_workload=21890.4, rapl_joules_workload=15210.7)


def report(**changes):
    """A deep copy of :data:`REPORT` with ``changes`` laid over it."""
    out = copy.deepcopy(REPORT)
    out.update(changes)
    return out


def no_bmc_report():
    """A Wake-on-LAN node's run: no BMC samples, RAPL only."""
    out = report()
    del out['power_series']
    out['energy'] = {
        'available': False, 'bmc': 'unavailable: no BMC (Wake-on-LAN node)',
        'in_band_only': True,
        'reason': 'no BMC (Wake-on-LAN node): the energy is measured '
                  'in-band only (RAPL)',
        'rapl': {'available': True, 'joules': 15210.7},
        'rapl_joules_workload': 15210.7}
    return out


def deploying_report():
    """A run that has just begun: no stage yet."""
    out = report(state='deploying', stages=[], workload_exit_code=None,
                 output_tail='', t_ready_s=None, energy=None, boot=None,
                 tunables=None, output=None, results=None)
    del out['power_series']
    return out
