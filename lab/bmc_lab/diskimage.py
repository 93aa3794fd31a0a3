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

"""A bootable whole-disk image of a root tree, for Ironic's ``direct`` deploy.

The benchmark compares a container deploy with the way Ironic deploys an
operating system today: the agent writes a whole-disk image, the node
reboots from its disk, the OS starts the workload.  This builds such an
image from the same content, without root mounts or loop devices:

* an MBR (syslinux's boot code) with two partitions;
* partition 1, FAT, bootable: syslinux, the lab kernel and a busybox
  initrd (``mtools`` writes into it at its offset);
* partition 2, ext4 (``mkfs.ext4 -d``, then shrunk with ``resize2fs -M``):
  the root tree.

The initrd loads the disk, filesystem and NIC modules of the kernel,
mounts partition 2, starts the workload in it (``chroot``) and then
fetches ``<callback>/<nonce>`` from the lab's HTTP server, so the host can
time "workload started" from the nginx access log.
"""

import os
import shutil
import struct

from bmc_lab import procs
from bmc_lab import smoke

MiB = 1024 * 1024
SECTOR = 512
BOOT_START = 1 * MiB
BOOT_SIZE = 32 * MiB
SYSLINUX_MBR = '/usr/lib/syslinux/mbr/mbr.bin'
#: Debian packages this module needs (tools/host-setup.sh installs them).
TOOLS = {'syslinux': 'syslinux', 'mcopy': 'mtools',
         'mkfs.fat': 'dosfstools', 'mkfs.ext4': 'e2fsprogs'}
MODULES = ('virtio_pci', 'virtio_net', 'virtio_blk', 'ext4')
#: Printed on the serial console once the workload has started.
MARKER = 'BMC-DISK workload-started'

INIT = smoke.INIT_HEAD + """\
cmd=$(sed -n 's/.*bmclab.cmd=\\([^ ]*\\).*/\\1/p' /proc/cmdline)
for m in {modules}; do insmod "$m" 2>/dev/null; done
for i in $(seq 1 40); do [ -e /dev/vda2 ] && break; sleep 0.25; done
mkdir -p /newroot
mount -t ext4 -o ro /dev/vda2 /newroot || echo "BMC-DISK mount-failed"
mount --bind /proc /newroot/proc 2>/dev/null
mount --bind /dev /newroot/dev 2>/dev/null
chroot /newroot $cmd &
echo "{marker} nonce=$nonce"
""" + smoke.CALL_BACK + """wait
echo "BMC-DISK workload-exited nonce=$nonce"
while true; do sleep 3600; done
"""

SYSLINUX_CFG = """\
SERIAL 0 115200
DEFAULT bench
PROMPT 0
TIMEOUT 0
LABEL bench
  KERNEL /vmlinuz
  INITRD /initrd.gz
  APPEND {append}
"""


def check_tools():
    """Raise LabError naming the Debian packages that are missing."""
    missing = sorted({pkg for tool, pkg in TOOLS.items()
                      if shutil.which(tool) is None}
                     | ({'syslinux-common'}
                        if not os.path.exists(SYSLINUX_MBR) else set()))
    if missing:
        raise procs.LabError('building a whole-disk image needs the Debian '
                             'packages %s (run tools/host-setup.sh)'
                             % ', '.join(missing))


def partition_entry(bootable, ptype, start, size):
    """One 16-byte MBR partition entry (LBA only; CHS marked unusable)."""
    chs = b'\xfe\xff\xff'
    return struct.pack('<B3sB3sII', 0x80 if bootable else 0, chs, ptype,
                       chs, start // SECTOR, size // SECTOR)


def master_boot_record(boot_code, partitions):
    """512 bytes: boot code, up to four partition entries, signature."""
    if len(boot_code) > 440:
        raise ValueError('MBR boot code is %d bytes, at most 440 fit'
                         % len(boot_code))
    table = b''.join(partition_entry(*p) for p in partitions)
    table += b'\0' * (64 - len(table))
    return (boot_code.ljust(440, b'\0') + b'\0' * 6 + table
            + b'\x55\xaa')


def _tree_size(tree):
    total = 0
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in filenames + dirnames:
            total += os.lstat(os.path.join(dirpath, name)).st_size + 4096
    return total


def build(path, tree, kernel, initrd, append):
    """Write a bootable raw disk image of ``tree`` to ``path``.

    :param kernel: the kernel to boot (copied into the boot partition).
    :param initrd: an initrd built with :func:`build_initrd`.
    :param append: the kernel command line.
    :returns: the image size in bytes.
    """
    check_tools()
    root_start = BOOT_START + BOOT_SIZE
    # ext4 metadata, journal and slack: 25% plus 64 MiB, rounded to MiB.
    root_size = ((_tree_size(tree) * 5 // 4 + 64 * MiB) // MiB + 1) * MiB
    work = path + '.parts'
    os.makedirs(work, exist_ok=True)
    try:
        boot = os.path.join(work, 'boot.fat')
        root = os.path.join(work, 'root.ext4')
        with open(boot, 'wb') as f:
            f.truncate(BOOT_SIZE)
        # Hidden sectors = the partition's first LBA, so that syslinux
        # finds its files from the BIOS's view of the whole disk.
        procs.run(['mkfs.fat', '-F', '16', '-n', 'BMCBOOT',
                   '-h', str(BOOT_START // SECTOR), boot], 'mkfs.fat')
        procs.run(['mkfs.ext4', '-q', '-F', '-L', 'bmcroot', '-d', tree,
                   '-E', 'root_owner=0:0', root,
                   '%dk' % (root_size // 1024)],
                  'mkfs.ext4 -d %s' % tree)
        # As small as the content allows, like a cloud image: the agent
        # writes every byte of a raw image.
        procs.run(['e2fsck', '-f', '-y', root], 'e2fsck')
        procs.run(['resize2fs', '-M', root], 'resize2fs -M')
        root_size = (os.path.getsize(root) + MiB - 1) // MiB * MiB
        total = root_start + root_size
        cfg = os.path.join(work, 'syslinux.cfg')
        with open(cfg, 'w') as f:
            f.write(SYSLINUX_CFG.format(append=append))
        for src, name in ((kernel, 'vmlinuz'), (initrd, 'initrd.gz'),
                          (cfg, 'syslinux.cfg')):
            procs.run(['mcopy', '-o', '-i', boot, src, '::' + name],
                      'mcopy %s' % name)
        with open(SYSLINUX_MBR, 'rb') as f:
            code = f.read(440)
        with open(path + '.tmp', 'wb') as out:
            out.write(master_boot_record(code, [
                (True, 0x06, BOOT_START, BOOT_SIZE),      # FAT16
                (False, 0x83, root_start, root_size),     # Linux
            ]))
            for part, offset in ((boot, BOOT_START), (root, root_start)):
                out.seek(offset)
                with open(part, 'rb') as f:
                    shutil.copyfileobj(f, out, 4 * MiB)
            out.truncate(total)
        procs.run(['syslinux', '--install', '--offset', str(BOOT_START),
                   path + '.tmp'], 'syslinux --install')
        os.replace(path + '.tmp', path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return total


def build_initrd(path, version):
    """The busybox initrd of the disk image, for kernel ``version``."""
    return smoke.build_initrd(path, version, init=INIT.replace(
        '{marker}', MARKER), modules=MODULES)
