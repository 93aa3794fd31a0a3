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

"""[container] options: the nodes' boots: the kernel modules, warm agents and
kexec, cleaning, Wake-on-LAN."""

from oslo_config import cfg

opts = [
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
]
