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

"""What each protocol step of the hardware manager takes (IPA's
``argsinfo``), as the conductor and ``openstack baremetal node
deploy-step`` list them."""

from bmc_common import protocol
from ipa_hardware_manager import workload

KEXEC_LOAD_ARGSINFO = {
    'kernel': {'description': '{url, sha256, size} of the kernel',
               'required': True},
    'initrds': {'description': 'list of {url, sha256, size}: the initrds, '
                'joined in this order', 'required': True},
    'cmdline': {'description': 'the kernel command line', 'required': True},
}

STAGE_ROOTFS_ARGSINFO = {
    'url': {'description': 'HTTP(S) URL of the rootfs artifact (ramfs, '
            'stream)',
            'required': False},
    'digest': {'description': 'sha256:<hex> of the artifact',
               'required': True},
    'format': {'description': 'artifact format: %s, or %s (nfs)'
               % (', '.join(protocol.ARTIFACT_FORMATS),
                  protocol.FORMAT_TREE), 'required': True},
    'size': {'description': 'artifact size in bytes (checked if given)',
             'required': False},
    'rootfs': {'description': 'rootfs mode: %s (default %s)' % (
        ', '.join(protocol.ROOTFS_MODES), protocol.ROOTFS_RAMFS),
        'required': False},
    'nfs': {'description': 'nfs mode: {server, port, export, options} '
            'of the read-only export to mount', 'required': False},
    'verity': {'description': 'ramfs: {root_hash, url, size} of the '
               'artifact\'s dm-verity hash tree; blocks are then checked '
               'when read instead of hashing the whole artifact first',
               'required': False},
    'stream': {'description': 'stream mode: {cache_max, rate} of the '
               'node\'s block cache (bytes, or null for the whole image) '
               'and of the background fetch (bytes a second)',
               'required': False},
    'measure_link': {'description': 'first time a plain transfer of the '
                     'artifact (diagnostic, reported as '
                     'timings.raw_transfer)', 'required': False},
}

START_WORKLOAD_ARGSINFO = {
    'command': {'description': 'the command, a list of strings',
                'required': True},
    'env': {'description': 'environment variables (dict)',
            'required': False},
    'workdir': {'description': 'working directory inside the image',
                'required': False},
    'user': {'description': 'uid[:gid] or name[:group] (default root)',
             'required': False},
    'mode': {'description': 'workload mode: %s (default %s)' % (
        ', '.join(protocol.WORKLOAD_MODES), protocol.MODE_JOB),
        'required': False},
    'stop_signal': {'description': 'the image\'s StopSignal (default '
                    'SIGTERM)', 'required': False},
    'walltime': {'description': 'seconds the workload may run; then it is '
                 'stopped as by bmc_stop_workload', 'required': False},
    'privileged': {'description': 'true (default): the container shares '
                   'the machine; false: Docker\'s confinement',
                   'required': False},
    'rlimits': {'description': 'process rlimits over the HPC defaults '
                '(memlock unlimited, nofile soft 1024 hard 1048576)',
                'required': False},
    'stop_grace': {'description': 'seconds between the StopSignal and '
                   'SIGKILL when the walltime ends it (default %d)'
                   % workload.DEFAULT_GRACE, 'required': False},
    'output_max': {'description': 'bytes of the most recent output kept '
                   'in RAM (default %d)' % workload.DEFAULT_OUTPUT_MAX,
                   'required': False},
    'configdrive': {'description': '{url, sha256, size, authorized_keys} '
                    'of the configdrive ISO: its files are bound read-only '
                    'at %s, it is attached as a loop device, and with '
                    'authorized_keys its public keys are added to '
                    '/root/.ssh/authorized_keys in the root'
                    % protocol.CONFIGDRIVE_PATH, 'required': False},
    'kernel_profile': {'description': '"gcov": reset the kernel\'s gcov '
                       'counters just before the workload starts',
                       'required': False},
    'group': {'description': '{name, id, rank, size, launcher, interface, '
              'members, ssh, peer_wait}: this node as a member of a run '
              'group (its network, host name, %s and the ssh launcher\'s '
              'files; sshd instead of the command on ranks other than 0, '
              'which waits for them)' % protocol.GROUP_HOSTFILE,
              'required': False},
}

COLLECT_KERNEL_PROFILE_ARGSINFO = {
    'max_bytes': {'description': 'bound of the .gcda files together',
                  'required': True},
}

COLLECT_OUTPUT_ARGSINFO = {
    'results': {'description': 'absolute paths of files inside the '
                'container to return', 'required': False},
    'max_bytes': {'description': 'bound of the result files together '
                  '(default %d)' % workload.DEFAULT_OUTPUT_MAX,
                  'required': False},
}

STOP_WORKLOAD_ARGSINFO = {
    'grace': {'description': 'seconds between the StopSignal and SIGKILL '
              '(default %d)' % workload.DEFAULT_GRACE, 'required': False},
    'reason': {'description': 'why (recorded): %s' % ', '.join(
        protocol.STOP_REASONS),
               'required': False},
}
