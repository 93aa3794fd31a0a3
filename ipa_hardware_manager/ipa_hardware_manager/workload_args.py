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

"""The start step's arguments, checked before anything is touched."""

from ipa_hardware_manager import output_keeper
from bmc_common import oci
from bmc_common import protocol


class WorkloadError(Exception):
    """The workload could not be started or stopped; says why."""


def validate(command, env, workdir, mode, stop_signal, walltime,
             privileged, stop_grace, output_max):
    """The start step's arguments; (stop signal number, walltime
    seconds or None, stop grace seconds)."""
    if (not isinstance(command, (list, tuple)) or not command
            or not all(isinstance(c, str) for c in command)):
        raise WorkloadError('command must be a non-empty list of strings, '
                            'got %r' % (command,))
    if env is not None and (not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str)
            for k, v in env.items())):
        raise WorkloadError('env must map strings to strings, got %r'
                            % (env,))
    if workdir is not None and (not isinstance(workdir, str)
                                or not workdir.startswith('/')):
        raise WorkloadError('workdir must be an absolute path, got %r'
                            % (workdir,))
    if mode not in protocol.WORKLOAD_MODES:
        raise WorkloadError('unknown workload mode %r (known: %s)' % (
            mode, ', '.join(protocol.WORKLOAD_MODES)))
    if not isinstance(privileged, bool):
        raise WorkloadError('privileged must be true or false, got %r'
                            % (privileged,))
    try:
        number = oci.parse_signal(stop_signal or 'SIGTERM')
        seconds = (oci.parse_walltime(walltime) if walltime is not None
                   else None)
    except ValueError as exc:
        raise WorkloadError(str(exc)) from None
    try:
        grace = float(stop_grace)
    except (TypeError, ValueError):
        grace = -1
    if grace < 0:
        raise WorkloadError('stop_grace must be 0 or more seconds')
    if (not isinstance(output_max, int) or isinstance(output_max, bool)
            or output_max < output_keeper.MIN_BYTES):
        raise WorkloadError('output_max must be a number of bytes, at '
                            'least %d, got %r' % (output_keeper.MIN_BYTES,
                                                  output_max))
    return number, seconds, grace
