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

"""[container] options: kernel builds and kernel profiles (PGKO)."""

from oslo_config import cfg

opts = [
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
]
