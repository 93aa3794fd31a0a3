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

"""[container] options: the nfs root filesystem mode: the export and its
clients."""

from oslo_config import cfg

opts = [
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
]
