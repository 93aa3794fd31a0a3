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

"""[container] options: the image pipeline: registries, the rootfs artifacts
and their cache."""

from oslo_config import cfg

from bmc_common import protocol

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
]
