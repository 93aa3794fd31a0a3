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

"""Boot files of container deploys in the lab.

The agent ramdisk is built by ``elements/build-agent-ramdisk.sh`` (cached
by a hash of its inputs); the lab kernel's modules initrd by
``ironic_bmc.kernel.artifact``.  Both land in the lab's images directory,
where Ironic may read them through file:// URLs.
"""

import dataclasses
import hashlib
import os
import shutil
import sys

from bmc_lab import ironic_conf
from bmc_lab import procs
from bmc_lab import smoke
from ironic_bmc.kernel import artifact as kernel_artifact

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD_SCRIPT = os.path.join(REPO_ROOT, 'elements', 'build-agent-ramdisk.sh')
AGENT_CACHE = os.environ.get('BMC_AGENT_CACHE', '/var/tmp/bmc-agent')


@dataclasses.dataclass
class AgentFiles:
    kernel: str
    ramdisk: str
    modules: str
    kernel_version: str


def _link_or_copy(src, dst):
    if os.path.exists(dst):
        os.unlink(dst)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def ensure(settings, out=print):
    """Build (or reuse) the agent ramdisk and modules; return file paths."""
    if not os.path.exists(BUILD_SCRIPT):
        raise procs.LabError('%s is missing: the lab needs a source checkout '
                             'to build the agent ramdisk' % BUILD_SCRIPT)
    # Labs side by side (test workers) build the ramdisk once, one after
    # the other, never into each other's files.
    with procs.file_lock(os.path.join(AGENT_CACHE, '.lock'), out,
                         'Another lab is building the agent ramdisk in '
                         '%s; waiting for it ...' % AGENT_CACHE):
        return _ensure(settings, out)


def _ensure(settings, out):
    prefix = os.path.join(AGENT_CACHE, 'bmc-agent')
    out('Building the agent ramdisk (cached in %s; the first build takes '
        'a few minutes) ...' % AGENT_CACHE)
    procs.run_long(['bash', BUILD_SCRIPT, '-o', prefix,
                    '-w', os.path.join(AGENT_CACHE, 'build')],
                   'agent ramdisk build', settings.log('agent-build.log'),
                   out=out, timeout=1800)
    version, _vmlinuz = smoke.lab_kernel()
    # Named by the module list too: a module added to the preset must not
    # be missing from a modules initrd cached before.
    preset = hashlib.sha256(','.join(kernel_artifact.AGENT_MODULES).encode())
    kdir = os.path.join(AGENT_CACHE, 'kernel-%s-%s'
                        % (version, preset.hexdigest()[:12]))
    if not os.path.exists(os.path.join(kdir, 'modules.cpio.gz')):
        procs.run([sys.executable, '-m', 'ironic_bmc.kernel.artifact',
                   '--installed', version, '--out', kdir,
                   '--modules', 'agent'], 'kernel artifact build',
                  log_path=settings.log('agent-build.log'))
    os.makedirs(settings.images_dir, exist_ok=True)
    files = AgentFiles(
        kernel=os.path.join(settings.images_dir, ironic_conf.AGENT_KERNEL),
        ramdisk=os.path.join(settings.images_dir, ironic_conf.AGENT_RAMDISK),
        modules=os.path.join(settings.images_dir, 'modules-default.cpio.gz'),
        kernel_version=version)
    _link_or_copy(os.path.join(kdir, 'vmlinuz'), files.kernel)
    _link_or_copy(prefix + '.initramfs', files.ramdisk)
    _link_or_copy(os.path.join(kdir, 'modules.cpio.gz'), files.modules)
    return files
