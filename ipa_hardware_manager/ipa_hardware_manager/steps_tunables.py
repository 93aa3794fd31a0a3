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

"""The in-band steps for tunables and the OS-noise probe.

The hardware manager's step methods call these functions; they take the
step's ``node`` and ``ports`` and its arguments, and raise
``errors.DeploymentError`` with a message naming the step.
"""

import os
import time

from ironic_python_agent import errors
from oslo_log import log
from oslo_utils import strutils

from ipa_hardware_manager import nodeos
from ipa_hardware_manager import noise
from ipa_hardware_manager import noise_native
from ipa_hardware_manager import tunables as applier
from ipa_hardware_manager import tunables_base
from ipa_hardware_manager import workload
from bmc_common import protocol
from bmc_common.tunables import profiles
from bmc_common.tunables import schema

LOG = log.getLogger(__name__)

STEP_APPLY_TUNABLES = getattr(protocol, 'STEP_APPLY_TUNABLES',
                              'bmc_apply_tunables')
STEP_NOISE_PROBE = getattr(protocol, 'STEP_NOISE_PROBE', 'bmc_noise_probe')

APPLY_TUNABLES_ARGSINFO = {
    'tunables': {'description': 'knobs {name: value} (may name a '
                 '"profile"), or a profile name; default: the node\'s '
                 'instance_info/%s' % protocol.II_TUNABLES,
                 'required': False},
    'strict': {'description': 'fail the step if a supported knob could not '
               'be applied (default false: report only)',
               'required': False},
}

NOISE_PROBE_ARGSINFO = {
    'cpus': {'description': 'CPU list to probe (default: every online CPU)',
             'required': False},
    'duration': {'description': 'seconds per CPU, at most %g (default %g)'
                 % (noise.MAX_DURATION, noise.DEFAULT_DURATION),
                 'required': False},
    'threshold_us': {'description': 'gap in µs that counts as an '
                     'interruption for the Python probe (default %g)'
                     % noise.DEFAULT_THRESHOLD_US, 'required': False},
    'threshold_cycles': {'description': 'delta in cycles that counts as an '
                         'event for bmc-noise (default %d)'
                         % noise_native.DEFAULT_THRESHOLD_CYCLES,
                         'required': False},
}


def _error(step, message):
    return errors.DeploymentError('%s: %s' % (step, message))


def bmc_apply_tunables(node, ports, tunables=None, strict=False, root='/'):
    """Apply and verify the run's tunables; report every knob.

    Returns ``{"tunables": {knob: result}, "failed": [...],
    "unsupported": [...], "stages": [tunables-applied]}``.
    """
    start = time.time()
    strict = strutils.bool_from_string(strict)
    if tunables is None:
        tunables = ((node or {}).get('instance_info') or {}).get(
            protocol.II_TUNABLES)
    try:
        # Profiles resolve against the shipped directory here; the
        # conductor normally sends them already resolved.
        knobs = profiles.resolve(tunables)
        results = applier.apply_all(knobs, root=root)
    except schema.TunableError as exc:
        raise _error(STEP_APPLY_TUNABLES, exc) from exc
    end = time.time()
    summary = applier.summary(results)
    if strict and summary['failed']:
        raise _error(STEP_APPLY_TUNABLES, 'not applied: %s' % '; '.join(
            '%s (%s)' % (name, results[name].get('error', 'failed'))
            for name in summary['failed']))
    report = {'tunables': results,
              'stages': [protocol.stage(protocol.STAGE_TUNABLES_APPLIED,
                                        start, end)]}
    report.update(summary)
    return report


def bmc_noise_probe(node, ports, cpus=None, duration=None,
                    threshold_us=None, threshold_cycles=None):
    """Run the OS-noise probe; ``{"noise": {...}}``."""
    started = time.time()
    try:
        result = noise.probe(cpus, duration, threshold_us,
                             threshold_cycles=threshold_cycles,
                             cgroups=workload_partition_cgroups())
    except noise.NoiseError as exc:
        raise _error(STEP_NOISE_PROBE, exc) from exc
    except OSError as exc:
        raise _error(STEP_NOISE_PROBE, 'cannot start the probe: %s'
                     % exc) from exc
    result['started'] = round(started, 3)
    result['ended'] = round(time.time(), 3)
    return {'noise': result}


def workload_partition_cgroups(root='/'):
    """{CPU: cgroup directory} for the CPUs of the workload's partition
    (the ``low-noise`` profile confines the agent to the housekeeping
    CPUs: a probe of a workload CPU runs from the workload's cgroup)."""
    cpus = applier.workload_cpus()
    path = os.path.join(root, nodeos.CGROUP_FS, nodeos.WORKLOAD_CGROUP)
    if not cpus or not os.path.isdir(path):
        return {}
    own = os.sched_getaffinity(0)
    return {cpu: path for cpu in cpus if cpu not in own}


def partitions_at_start(container_pid, state_dir=None):
    """The NodeOS partitions read back once the workload runs: the
    services' and the workload cgroup's effective CPUs, the container
    init's affinity; None without a low-noise profile.  Never fails the
    start: what cannot be read is said in the result.

    A job can end before the read does (the runtime then removes the
    workload's cgroup): what was read is not what the workload ran
    under, and only ``ended`` is returned.
    """
    record = applier.load_state(state_dir or applier.STATE_DIR) or {}
    if not record.get('workload_cpus') or not container_pid:
        return None
    try:
        back = nodeos.read_back(tunables_base.Host(),
                                set(record['housekeeping_cpus']),
                                set(record['workload_cpus']), container_pid)
    except Exception as exc:
        LOG.exception('Could not read the NodeOS partitions back')
        back = {'error': 'cannot read the partitions back: %s' % exc}
    if not workload.pid_alive(container_pid):
        return {'ended': 'the workload ended before its partitions could '
                         'be read back; "actual" is as they were applied'}
    return back
