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

"""Configuration of the conductor plugin: the ``[container]`` group.

Registered once, here, on Ironic's global CONF when this module is first
imported; modules read it as ``from ironic_bmc.conf import CONF``.  Listed
for ``oslo-config-generator --namespace ironic_bmc``.
"""

from ironic.conf import CONF
from oslo_config import cfg

from bmc_common import protocol

GROUP = 'container'

opts = [
    cfg.StrOpt('image_cache_dir',
               default='$state_path/container_rootfs_cache',
               help='Directory of the content-addressed cache of rootfs '
                    'artifacts built from container images.  Shared by '
                    'every node this conductor deploys.'),
    cfg.IntOpt('build_workers', default=4, min=1,
               help='Rootfs artifacts this conductor builds at once.  A '
                    'build runs while the node boots, outside the node\'s '
                    'lock; deploys past this number queue for a worker.'),
    cfg.IntOpt('image_cache_size_mb', default=20480, min=0,
               help='Evict least recently used rootfs artifacts when the '
                    'cache grows past this size (MiB); 0 disables '
                    'eviction.  Artifacts in use by a node are never '
                    'evicted.'),
    cfg.StrOpt('rootfs_format', default=protocol.FORMAT_EROFS,
               choices=protocol.ARTIFACT_FORMATS,
               help='Format of the rootfs artifact sent to nodes.  erofs '
                    'and squashfs are mounted from RAM under a tmpfs '
                    'overlay; tar is unpacked into tmpfs (slow, for '
                    'comparison).'),
    cfg.BoolOpt('rootfs_verity', default=True,
                help='Build a dm-verity hash tree beside each erofs or '
                     'squashfs artifact (veritysetup, from the Debian '
                     'package cryptsetup-bin).  The node then checks every '
                     'block when it is read instead of hashing the whole '
                     'artifact before mounting it, and a corrupted block '
                     'fails its read.  Without it, the node verifies the '
                     'artifact\'s sha256 while downloading.'),
    cfg.StrOpt('rootfs_compression', default='none',
               help='Compression inside the artifact: "none", or for '
                    'erofs lz4/lz4hc, for squashfs lz4/gzip/lzo/xz/zstd.'),
    cfg.ListOpt('allowed_registries', default=[],
                help='Registries container images may come from, as '
                     'host:port, or as host for every port of that host. '
                     'Empty: any registry whose name resolves to global '
                     'addresses only (never loopback, private, link-local '
                     'or reserved ranges, nor this conductor\'s my_ip), '
                     'checked at validate and on every request, token '
                     'realms and redirects included.  A listed registry '
                     'may be on any address: list the registries of your '
                     'own network here.  Whoever deploys (a tenant, '
                     'through a Glance image property) chooses the host '
                     'the conductor connects to.'),
    cfg.ListOpt('credential_registries', default=[],
                help='Registries (host:port, or host for every port) the '
                     'operator\'s pull secret (driver_info/'
                     'image_pull_secret, instance_info/image_pull_secret) '
                     'is sent to.  An image of another registry is pulled '
                     'anonymously, and a registry that sends the '
                     'credentials on to another host (its token realm, a '
                     'redirect) not listed here is refused.  Empty: the '
                     'pull secret is sent nowhere.'),
    cfg.ListOpt('tenant_credential_registries', default=[],
                help='Of the registries of credential_registries, those '
                     'the operator\'s pull secret (driver_info/'
                     'image_pull_secret) is also sent to for an image a '
                     'Glance image property names (a tenant\'s choice): '
                     'a private catalogue the operator offers to every '
                     'tenant.  Empty: a tenant\'s image is always pulled '
                     'anonymously, so no tenant can make the conductor '
                     'use the operator\'s credentials.'),
    cfg.ListOpt('insecure_registries', default=[],
                help='Registries reached over plain HTTP, as host:port, '
                     'or as host for every port of that host.'),
    cfg.FloatOpt('max_image_ram_fraction', default=0.5, min=0.05, max=0.95,
                 help='Refuse a container image whose unpacked rootfs is '
                      'larger than this fraction of the node\'s '
                      'properties/memory_mb: the rootfs lives in RAM next '
                      'to the workload.'),
    cfg.IntOpt('stream_background_rate_mb', default=64, min=1,
               help='stream rootfs mode: MiB a second the node fetches '
                    'of the image in the background, after the workload '
                    'started, until all of it is in RAM.  The copy also '
                    'steps aside whenever the workload reads, so its own '
                    'I/O keeps priority; this bounds what the copy takes '
                    'of the link and of the node\'s CPU (dm-verity checks '
                    'every block it reads).'),
    cfg.IntOpt('max_image_size_mb', default=16384, min=1,
               help='Refuse a container image whose unpacked root '
                    'filesystem is larger than this (MiB), whatever the '
                    'node\'s memory.  Applies also when '
                    'properties/memory_mb is unset.'),
    cfg.IntOpt('max_layer_entries', default=1000000, min=1,
               help='Refuse a layer with more tar entries than this.'),
    cfg.IntOpt('max_tar_header_kb', default=1024, min=1,
               help='Refuse a layer whose PAX or GNU long-name header is '
                    'larger than this (KiB): such headers are read into '
                    'memory whole.'),
    cfg.ListOpt('allowed_xattrs', default=['user.*', 'security.capability'],
                help='Extended attributes of layer files that are kept '
                     '(shell-style patterns).  Others, such as '
                     'trusted.overlay.* or security.selinux, are dropped '
                     'and the drop is logged.'),
    cfg.StrOpt('default_kernel_modules',
               help='Kernel modules initrd (a cpio of /lib/modules/<ver>) '
                    'for the default kernel ([conductor]deploy_kernel).  '
                    'Any URL Ironic accepts for a ramdisk.  A node may '
                    'override it with driver_info/container_kernel_modules, '
                    'a deploy with instance_info/kernel_modules.'),
    cfg.IntOpt('local_state_sweep_interval', default=600, min=0,
               help='Seconds between two sweeps that release the cache '
                    'pins and published rootfs artifacts this conductor '
                    'holds for nodes that are no longer deploying or '
                    'active on it (taken over by another conductor, '
                    'deleted); 0 disables the sweep.'),
    cfg.BoolOpt('erase_disks_on_cleaning', default=False,
                help='Run the agent\'s disk erase steps (erase_devices, '
                     'erase_devices_metadata) in automated cleaning at '
                     'their usual priorities.  A container deploy writes '
                     'nothing to disks, so by default cleaning only boots '
                     'the agent (which a fast-track deploy then reuses) '
                     'and runs the steps the operator asks for.  Explicit '
                     'priorities in [deploy]erase_devices_priority and '
                     '[deploy]erase_devices_metadata_priority always '
                     'apply.'),
    cfg.BoolOpt('wol_project_deploys', default=False,
                help='Let a project (a node\'s lessee or owner, or a Nova '
                     'tenant) deploy containers on a Wake-on-LAN node '
                     '(the container-wol hardware type).  Such a node\'s '
                     'power-off cannot be proven: it means "the agent '
                     'stopped answering", which a root workload can fake '
                     'by closing the agent\'s port, and a magic packet '
                     'cannot reset a running machine, so the previous '
                     'tenant\'s code may answer the next boot.  Off: only '
                     'the operator\'s own runs (a node with no lessee and '
                     'no owner) deploy there.  Such nodes are never warm '
                     'either way.'),
    cfg.BoolOpt('warm_kexec', default=True,
                help='When the agent cleaning left up (fast track) may be '
                     'reused but the run boots another kernel, initrds or '
                     'kernel arguments, have the agent kexec into them '
                     'instead of rebooting the node through its firmware. '
                     'A failed kexec load falls back to the reboot.'),
    cfg.IntOpt('kexec_load_timeout', default=180, min=10,
               help='Seconds the agent may take to download and load the '
                    'kernel and initrds of a kexec boot.'),
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
    cfg.BoolOpt('power_sampling', default=True,
                help='Sample the node\'s power through its BMC (IPMI DCMI '
                     'or Redfish) during container runs and report the '
                     'energy used.'),
    cfg.FloatOpt('power_sample_period', default=2.0, min=0.2,
                 help='Seconds between two BMC power readings.  IPMI '
                      'readings go through Ironic\'s ipmitool path, so '
                      'they are never closer than '
                      '[ipmi]min_command_interval to any other command '
                      'sent to the same BMC.'),
    cfg.IntOpt('power_series_points', default=1000, min=10, max=100000,
               help='Power samples of a run kept beside its report for '
                    'the power chart; more are averaged down to this '
                    'many.'),
    cfg.StrOpt('nfs_server_address',
               help='Address (or host name) of this conductor host\'s NFS '
                    'server as nodes reach it on the provisioning '
                    'network, for the "nfs" rootfs mode.  Unset: that '
                    'mode is refused at validate.'),
    cfg.PortOpt('nfs_port', default=2049,
                help='TCP port of the NFS server (NFSv4 needs no other).'),
    cfg.StrOpt('nfs_check_address', default='127.0.0.1',
               help='Address at which this conductor checks, before it '
                    'powers a node on, that the NFS server answers on '
                    'nfs_port.'),
    cfg.StrOpt('nfs_exports_file',
               default='$state_path/container_nfs/exports.conf',
               help='File of NFS exports this conductor writes: one '
                    'read-only export per container image that a node '
                    'uses.  nfs-ganesha\'s configuration must include it '
                    '(%include "<file>").'),
    cfg.StrOpt('nfs_pid_file', default='/run/ganesha/ganesha.pid',
               help='nfs-ganesha\'s pid file: the conductor sends that '
                    'process SIGHUP to make it re-read its exports.'),
    cfg.ListOpt('nfs_clients', default=[],
                help='Who may mount every export, besides the nodes that '
                     'use it (ganesha Clients: addresses, networks such as '
                     '192.0.2.0/24, or *).  Each export is mountable by '
                     'the nodes deploying or running its image, at the '
                     'address their agent looked up from; list here only '
                     'what must see every export (a forwarder through '
                     'which all nodes connect, as in the lab).'),
    cfg.StrOpt('nfs_squash', default='root_squash',
               choices=('no_root_squash', 'root_squash', 'all_squash'),
               help='Squash of the exports (always read-only).  With '
                    'root_squash, a container running as root cannot read '
                    'files of its image only root may read (they are '
                    'read as nobody); such images run in ramfs or stream '
                    'mode, or set no_root_squash.'),
    cfg.StrOpt('nfs_mount_options', default='vers=4.1,hard,timeo=100',
               help='Options with which nodes mount an export (ro and '
                    'the port are added).  "hard" makes reads wait for a '
                    'restarting server instead of failing.'),
    cfg.StrOpt('report_dir', default='$state_path/container_reports',
               help='Directory holding run reports, one JSON file per '
                    'deploy, kept after the node is undeployed.'),
    cfg.IntOpt('report_retention_days', default=30, min=0,
               help='Delete the report, output and result files of a run '
                    'this many days after they last changed (checked '
                    'every [container]local_state_sweep_interval); a '
                    'node\'s newest run is always kept.  0 keeps them '
                    'all: every run may leave output_max_mb plus '
                    'results_max_mb on this conductor\'s disk.'),
    cfg.StrOpt('boot_http_log', default='',
               help='Access log of the HTTP server that serves '
                    '[deploy]http_root to the nodes, when the conductor '
                    'can read it.  The report\'s boot section then splits '
                    'firmware from the boot-file downloads.  Its lines '
                    'are in the "combined" format (one-second '
                    'resolution) or start with "$msec $request_time" '
                    '(nginx: log_format ironic_bmc \'$msec $request_time '
                    '$status $body_bytes_sent "$request"\').'),
    cfg.StrOpt('console_log_template', default='',
               help='Where this conductor reads a node\'s serial console '
                    'output: a file path with {node_uuid} and/or '
                    '{node_name}, e.g. the logs conserver or '
                    'ipmiconsole keep (/var/log/conserver/{node_name}), '
                    'or libvirt\'s file console in a lab.  The unikernel '
                    'deploy interface reads its run there (a unikernel '
                    'has no agent); empty disables that interface.'),
    cfg.IntOpt('unikernel_timeout', default=900, min=30, max=86400,
               help='Seconds from power-on to a unikernel\'s end line, '
                    'unless instance_info/unikernel_timeout says '
                    'otherwise; the run then fails and the node is '
                    'powered off.'),
    cfg.IntOpt('console_read_max_kb', default=4096, min=64,
               help='Most of a node\'s console one unikernel run reads '
                    '(KiB); the rest is not read.'),
    cfg.StrOpt('kernel_build_dir',
               default='/var/lib/ironic/bmc-kernel-builds',
               help='Where this conductor builds kernels (the kernel_build '
                    'vendor method): unpacked sources, one directory per '
                    'build with its log and config.  A build needs a few '
                    'GiB while it runs; its object tree is deleted when it '
                    'ends.'),
    cfg.ListOpt('kernel_source_dirs', default=['/usr/src'],
                help='Directories of the Linux source tarballs a kernel '
                     'build may use (e.g. Debian\'s linux-source-6.1 puts '
                     'linux-source-6.1.tar.xz in /usr/src).  A build '
                     'names a file here, never a path.'),
    cfg.ListOpt('kernel_config_dirs', default=[],
                help='Directories of the operator\'s kernel config '
                     'fragments (<name>.config, applied on top of "make '
                     'tinyconfig"), looked up before the fragments this '
                     'package ships (bmc-node).'),
    cfg.IntOpt('kernel_build_timeout', default=7200, min=60,
               help='Seconds a kernel build may compile before it is '
                    'killed and fails (the wait for a build slot does '
                    'not count).'),
    cfg.IntOpt('kernel_build_workers', default=1, min=1, max=16,
               help='Kernel builds that compile at once on this '
                    'conductor host; the others queue.'),
    cfg.IntOpt('kernel_build_jobs', default=0, min=0,
               help='"make -j" of a kernel build; 0: the host\'s CPU '
                    'count.'),
    cfg.IntOpt('kernel_build_min_free_gb', default=8, min=0,
               help='A kernel build does not start with less free disk '
                    'than this (GiB) in kernel_build_dir.'),
    cfg.IntOpt('kernel_profile_max_mb', default=256, min=1,
               help='Largest gcov profile a profiling run '
                    '(container_kernel_profile=gcov) may bring back from '
                    'its node (MiB, uncompressed).'),
    # --- run groups (one job across nodes) ---
    cfg.StrOpt('group_physical_network', default='bmc-group',
               help=('The physical_network of the port that joins a node '
                      'to the run-group network: a second NIC on a segment '
                      'only the group members share.  The port\'s '
                      'extra/bmc_group_address is the node\'s address '
                      'there (A.B.C.D/prefix).  A node without such a port '
                      'cannot deploy with instance_info/container_group.')),
    cfg.IntOpt('group_max_size', default=32, min=2, max=32,
               help=('The most nodes one run group may have.  Each '
                     'member keeps the group\'s plan (every member\'s '
                     'address and host key) in its driver_internal_info, '
                     'a 64 KiB column: 32 members take about 24 KiB.')),
    cfg.IntOpt('group_barrier_timeout', default=600, min=30, max=86400,
               help=('Seconds the members of a run group that have staged '
                      'their root wait for the others; then the whole group '
                      'fails, naming the members that did not arrive.  Keep '
                      'it below [conductor]deploy_callback_timeout, which '
                      'fails a waiting node with a less helpful message.')),
    cfg.IntOpt('group_poll_interval', default=10, min=1, max=600,
               help=('Seconds between the checks of the run groups this '
                      'conductor holds nodes of: members waiting at the '
                      'barrier (a lost wake-up, the timeout, a member that '
                      'failed) and running groups whose member ended.')),
    cfg.IntOpt('group_peer_wait', default=120, min=0, max=3600,
               help=('With the ssh launcher: seconds rank 0 waits for '
                      'every other member\'s sshd before its command '
                      'starts.')),
]


API_GROUP = 'container_api'

api_opts = [
    # All addresses by default, as ironic-api's [api]host_ip.
    cfg.HostAddressOpt('host_ip', default='0.0.0.0',  # noqa: S104
                       help='Address the container runs API '
                            '(ironic-bmc-api) listens on.'),
    cfg.PortOpt('port', default=6388,
                help='Port the container runs API listens on.'),
    cfg.StrOpt('auth_strategy', default='keystone',
               choices=[('keystone', 'Keystone tokens, checked by '
                                     'keystonemiddleware with the '
                                     '[keystone_authtoken] options.'),
                        ('noauth', 'No authentication: every request is '
                                   'the operator\'s.  For tests only.')],
               help='How callers of the container runs API are '
                    'authenticated.'),
    cfg.IntOpt('max_list', default=200, min=1, max=10000,
               help='Most runs one list request returns.'),
    cfg.IntOpt('workers', default=16, min=1, max=256,
               help='Threads of the container runs API\'s WSGI server.'),
]


def register_opts(conf):
    conf.register_opts(opts, group=GROUP)
    conf.register_opts(api_opts, group=API_GROUP)


def list_opts():
    return [(GROUP, opts), (API_GROUP, api_opts)]


register_opts(CONF)
