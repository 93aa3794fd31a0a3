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

"""[container] options: a run on its node: watching the workload, stopping it,
what it may keep and do."""

from oslo_config import cfg

opts = [
    cfg.IntOpt('workload_poll_interval', default=10, min=1,
               help='How often (seconds) the conductor asks the agent of '
                    'an ACTIVE node whether its workload still runs.'),
    cfg.IntOpt('heartbeat_lock_wait', default=60, min=0, max=600,
               help='Seconds a deploy-time heartbeat of the agent waits for '
                    'the node\'s lock, held by the conductor that sent the '
                    'step the heartbeat reports on, before Ironic skips it '
                    '(the deploy then waits for the agent\'s next periodic '
                    'heartbeat, up to [api]ramdisk_heartbeat_timeout).  A '
                    'busy conductor can hold a node longer than '
                    '[conductor]node_locked_retry_attempts x '
                    'node_locked_retry_interval.  A waiting heartbeat '
                    'holds one of the conductor\'s workers '
                    '([conductor]workers_pool_size); 0 waits one round '
                    'of Ironic\'s retries only.'),
    cfg.IntOpt('workload_watch_workers', default=8, min=1, max=128,
               help='Threads of this conductor that poll the agents of '
                    'running workloads, each node one poll at a time.  A '
                    'silent agent holds one of them for up to the call\'s '
                    'timeout (30 seconds); the others poll on.'),
    cfg.IntOpt('workload_lost_timeout', default=120, min=10,
               help='Seconds a running workload\'s agent may leave the '
                    'conductor\'s polls unanswered before the run is '
                    'declared lost: the report and last_error say why and '
                    'the node is powered off.'),
    cfg.IntOpt('stop_grace_period', default=10, min=0, max=600,
               help='Seconds a workload has, on undeploy, between its '
                    'image\'s StopSignal (SIGTERM by default) and SIGKILL '
                    'to every process of its cgroup, before the node is '
                    'powered off; also the grace at a walltime\'s end.'),
    cfg.IntOpt('output_max_mb', default=16, min=1, max=4096,
               help='MiB of a workload\'s most recent output the node keeps '
                    'in RAM (older output is dropped, and the report says '
                    'how much), returned to the conductor when the '
                    'workload has exited and kept next to the run '
                    'report.'),
    cfg.IntOpt('results_max_mb', default=16, min=0, max=4096,
               help='MiB the result files of a run '
                    '(instance_info/container_results) may hold together; '
                    'a file past the bound is reported, not returned.'),
    cfg.IntOpt('configdrive_max_kb', default=64 * 1024, min=1,
               max=1024 * 1024,
               help='KiB a deploy\'s configdrive (the ISO 9660 image, '
                    'unpacked) may hold: its base64 text, its gzip '
                    'stream and its files are read up to this bound, and '
                    'a larger one is refused (or left out, see '
                    'configdrive_optional).  Nova\'s configdrives hold '
                    'its metadata and user data (at most 64 KiB), usually '
                    'well under 1 MiB; 64 MiB is the size of a Nova vfat '
                    'config drive.'),
    cfg.BoolOpt('configdrive_optional', default=False,
                help='A configdrive that is malformed or larger than '
                     'configdrive_max_kb is left out and the run goes on '
                     'without it (the run report\'s configdrive says '
                     'why), instead of failing the deploy before the node '
                     'is powered on.  instance_info/'
                     'container_configdrive_optional overrides it per '
                     'deploy.'),
    cfg.BoolOpt('configdrive_authorized_keys', default=True,
                help='The agent adds the public keys of the configdrive\'s '
                     'meta_data.json (the tenant\'s Nova keypair) to '
                     '/root/.ssh/authorized_keys in the container\'s root '
                     'before the workload starts, as cloud-init would.  '
                     'The configdrive\'s files are given to the container '
                     'either way.'),
    cfg.BoolOpt('allow_privileged', default=True,
                help='Let workloads run privileged, sharing the machine '
                     '(every device and capability, writable /sys, kernel '
                     'modules): the default of instance_info/'
                     'container_privileged.  False confines every workload '
                     'as Docker does and refuses container_privileged=true '
                     'at validate.'),
    cfg.ListOpt('tunables_profile_dirs', default=[],
                help='Directories of operator tunables profiles (*.conf, '
                     'tuned-style with [main] include= and [knobs]), '
                     'searched before the profiles shipped with the '
                     'plugin.'),
]
