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

"""What the container runs API shows of a run report.

A tenant sees its run: state, exit code, stages, boot breakdown,
tunables read back, energy, output and results.  The fields below that
describe the operator's side (where the boot files and the rootfs
artifact come from on the conductor, which conductors ran the deploy,
the BMC's own errors, HTTP logs of the boot) are shown to readers of the
whole deployment only.  The list is of what is *shown*: a field a later
version adds stays hidden from tenants until it is named here (a unit
test makes every documented field one or the other).
"""

from ironic_bmc import report as run_report

#: Top-level report fields a run's own project sees.
TENANT_FIELDS = frozenset((
    'version', 'deploy_id', 'node', 'node_name', 'project_id',
    'instance_uuid', 'image', 'image_digest', 'rootfs', 'mode', 'state',
    'workload_exit_code', 'output_tail', 'error', 'stages', 'created',
    'boot', 'staging', 'tunables', 'kernel_args', 'energy', 'noise',
    'output', 'results', 'stop', 'walltime_exceeded', 'warm', 'stream',
    'configdrive', 'power_series', 't_ready_s', 'node_owner',
    'agent_up_for_s', 'kexec',
    # A run group's members are the project's own nodes.
    'group',
))
#: Top-level report fields only readers of the whole deployment see.
OPERATOR_FIELDS = frozenset((
    'kernel', 'ramdisk', 'kernel_modules', 'artifact', 'takeovers',
    'build_restarts', 'cold_reason',
    # Unikernel runs and kernel profiling are the operator's only.
    'kind', 'unikernel', 'kernel_profile',
))
#: Of the boot breakdown: all but the HTTP server's log lines.
_BOOT_HIDDEN = frozenset(('http',))
#: Of the energy section: BMC errors may name the BMC's address.
_ENERGY_HIDDEN = frozenset(('first_error', 'note'))
#: Of the stream section: addresses of the conductor's block server.
_STREAM_HIDDEN = frozenset(('url', 'export', 'server'))


def _energy_for_tenant(section):
    section = {k: v for k, v in section.items() if k not in _ENERGY_HIDDEN}
    if section.get('available') is False and not section.get('in_band_only'):
        # The reason may quote the BMC; the tenant learns that there were
        # no readings, the operator why.
        section['reason'] = 'no BMC power readings for this run'
    return section


def report(run, operator=False):
    """The report as the API returns it to this caller."""
    shown = dict(run, t_ready_s=run_report.t_ready(run))
    if operator:
        return shown
    shown = {k: v for k, v in shown.items() if k in TENANT_FIELDS}
    if isinstance(shown.get('boot'), dict):
        shown['boot'] = {k: v for k, v in shown['boot'].items()
                         if k not in _BOOT_HIDDEN}
    if isinstance(shown.get('energy'), dict):
        shown['energy'] = _energy_for_tenant(shown['energy'])
    if isinstance(shown.get('stream'), dict):
        shown['stream'] = {k: v for k, v in shown['stream'].items()
                           if k not in _STREAM_HIDDEN}
    return shown


def summary(run):
    """One line of ``GET /v1/runs``."""
    energy = run.get('energy') or {}
    return {
        'deploy_id': run.get('deploy_id'),
        'node': run.get('node'),
        'node_name': run.get('node_name'),
        'instance_uuid': run.get('instance_uuid'),
        'project_id': run.get('project_id'),
        'state': run.get('state'),
        'workload_exit_code': run.get('workload_exit_code'),
        'image': run.get('image'),
        'mode': run.get('mode'),
        'created': run.get('created'),
        't_ready_s': run_report.t_ready(run),
        'bmc_joules_workload': energy.get('bmc_joules_workload'),
        'rapl_joules_workload': energy.get('rapl_joules_workload'),
    }


def result_files(run):
    """(files, refused) of the report's ``results`` section: files as
    ``{"path", "size", "sha256"}``, refused as ``{"path", "error"}``."""
    files, refused = [], []
    for path, entry in sorted((run.get('results') or {}).items()):
        if not isinstance(entry, dict):
            continue
        if 'sha256' in entry:
            files.append({'path': path, 'size': entry.get('size'),
                          'sha256': entry['sha256']})
        else:
            refused.append({'path': path, 'error': entry.get('error')})
    return files, refused
