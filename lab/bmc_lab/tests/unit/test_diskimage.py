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

import datetime
import os
import re
import shutil
import struct
import subprocess
from unittest import mock

import pytest

from bmc_lab import bench
from bmc_lab import bench_report
from bmc_lab import direct_job
from bmc_lab import diskimage
from bmc_lab import ironic_service
from bmc_lab import procs
from bmc_lab import ramdisk_peer
from bmc_lab import settings as lab_settings


def _entries(mbr):
    out = []
    for i in range(4):
        raw = mbr[446 + 16 * i:446 + 16 * (i + 1)]
        flag, _, ptype, _, lba, sectors = struct.unpack('<B3sB3sII', raw)
        out.append((flag, ptype, lba, sectors))
    return out


def test_master_boot_record_layout():
    mbr = diskimage.master_boot_record(b'\xeb\x00code', [
        (True, 0x06, 1024 * 1024, 32 * 1024 * 1024),
        (False, 0x83, 33 * 1024 * 1024, 100 * 1024 * 1024)])
    assert len(mbr) == 512
    assert mbr[:6] == b'\xeb\x00code'
    assert mbr[510:] == b'\x55\xaa'
    assert _entries(mbr) == [(0x80, 0x06, 2048, 65536),
                             (0, 0x83, 67584, 204800),
                             (0, 0, 0, 0), (0, 0, 0, 0)]


def test_master_boot_record_refuses_oversized_boot_code():
    with pytest.raises(ValueError, match='441 bytes, at most 440'):
        diskimage.master_boot_record(b'x' * 441, [])


def test_missing_tools_are_named(monkeypatch):
    monkeypatch.setattr(shutil, 'which', lambda tool: None)
    with pytest.raises(procs.LabError, match='dosfstools, e2fsprogs, '
                       'mtools, syslinux'):
        diskimage.check_tools()


@pytest.mark.skipif(shutil.which('syslinux') is None
                    or shutil.which('debugfs') is None,
                    reason='needs syslinux, mtools, dosfstools, e2fsprogs '
                           '(tools/host-setup.sh installs them)')
def test_build_writes_a_bootable_two_partition_disk(tmp_path):
    tree = tmp_path / 'tree'
    (tree / 'bin').mkdir(parents=True)
    (tree / 'bin' / 'work').write_text('#!/bin/sh\necho hi\n')
    os.chmod(tree / 'bin' / 'work', 0o755)
    (tree / 'bin' / 'sh').symlink_to('busybox')
    kernel = tmp_path / 'vmlinuz'
    kernel.write_bytes(b'kernel' * 1000)
    initrd = tmp_path / 'initrd.gz'
    initrd.write_bytes(b'initrd' * 1000)
    image = str(tmp_path / 'disk.img')

    size = diskimage.build(image, str(tree), str(kernel), str(initrd),
                           'console=ttyS0 bmclab.nonce=n1')

    assert os.path.getsize(image) == size
    assert not os.path.exists(image + '.parts')
    with open(image, 'rb') as f:
        mbr = f.read(512)
    with open(diskimage.SYSLINUX_MBR, 'rb') as f:
        assert mbr[:440] == f.read(440)
    boot, root = _entries(mbr)[:2]
    assert boot[:3] == (0x80, 0x06, diskimage.BOOT_START // 512)
    assert root[0] == 0 and root[1] == 0x83
    assert (root[2] + root[3]) * 512 == size
    # The boot partition holds syslinux, the kernel, the initrd and a
    # configuration carrying the command line.
    listing = subprocess.run(
        ['mdir', '-a', '-b', '-i', '%s@@%d' % (image, diskimage.BOOT_START)],
        capture_output=True, text=True, check=True).stdout
    for name in ('LDLINUX.SYS', 'VMLINUZ', 'INITRD.GZ', 'SYSLINUX.CFG'):
        assert name in listing.upper()
    cfg = subprocess.run(
        ['mtype', '-i', '%s@@%d' % (image, diskimage.BOOT_START),
         '::syslinux.cfg'], capture_output=True, text=True,
        check=True).stdout
    assert 'APPEND console=ttyS0 bmclab.nonce=n1' in cfg
    # The root partition is ext4 with the tree, owned by root.
    rootfs = str(tmp_path / 'root.ext4')
    with open(image, 'rb') as src, open(rootfs, 'wb') as dst:
        src.seek(root[2] * 512)
        dst.write(src.read(root[3] * 512))
    shown = subprocess.run(['debugfs', '-R', 'cat /bin/work', rootfs],
                           capture_output=True, text=True, check=True)
    assert shown.stdout == '#!/bin/sh\necho hi\n'
    stat = subprocess.run(['debugfs', '-R', 'stat /bin/work', rootfs],
                          capture_output=True, text=True,
                          check=True).stdout
    assert 'User:     0   Group:     0' in stat


def test_ironic_reaches_node_addresses_through_the_lab_nginx(tmp_path):
    settings = lab_settings.Settings(state_dir=str(tmp_path))
    env = ironic_service.ironic_env(settings)
    assert env['http_proxy'] == 'http://127.0.0.1:%d' % settings.ports.http
    assert '127.0.0.1' in env['no_proxy'].split(',')
    assert env['https_proxy'] == ''


def test_bench_summary_and_table():
    report = {
        'artifact': {'size': 150e6, 'format': 'erofs'},
        'staging': {'download_s': 4.0, 'mount_s': 0.5,
                    'raw_transfer_s': 3.0, 'hash_s': 2.5,
                    'bytes': 150e6},
        'stages': [{'name': 'workload-started', 'start': 10.0,
                    'end': 12.0},
                   {'name': 'workload-exited', 'start': 12.0, 'end': 20.0},
                   {'name': 'powered-off', 'start': 27.5, 'end': 28.0}],
        'workload_exit_code': 0,
        # The conductor's clock, as powered-off's start.
        'exit_heard_at': 26.9,
        'boot': {'agent_up_s': 35.7, 'initramfs_bytes': 119380735,
                 'phases': {'firmware_ipxe_s': 9.1,
                            'initramfs_unpack_s': 6.6,
                            'agent_to_heartbeat_s': None}},
    }
    direct = {'active_s': 150.0, 'workload_started_s': 200.0}
    result = bench_report.summarize(report, 80.0, 10000, 200e6, direct, 300e6)
    result.update(bench_report.summarize_nfs(
        {'staging': {'bytes_before_start': 0, 'nfs_mount_s': 0.4,
                     'mount_s': 1.9}, 'workload_exit_code': 0}, 70.5))
    result.update(bench_report.summarize_warm(
        {'warm': True, 'agent_up_for_s': 61.2, 'cold_reason': None}, 8.0,
        direct))

    def streamed(size, start, end, local):
        return ({'artifact': {'size': size},
                 'staging': {'bytes_before_start': 3e6},
                 'stages': [{'name': 'rootfs-staged', 'start': 50.0,
                             'end': start},
                            {'name': 'workload-started', 'start': start,
                             'end': end}],
                 'stream': {'fully_local': local,
                            'fully_local_after_start_s': 12.5 if local
                            else None,
                            'background_fetch_s': 13.0 if local else None,
                            'not_local_reason': None if local else 'x'}},
                end - 10.0)
    result.update(bench_report.summarize_stream(
        *streamed(150e6, 53.0, 54.0, True),
        large_run=streamed(1600e6, 53.2, 54.6, False), node_memory_mb=4096,
        raw_transfer_s=result['raw_transfer_s']))
    assert result['stream_app_start_s'] == 4.0
    # Attached, verified and mounted in 3.0 s; the raw transfer took 3.0.
    assert result['stream_staged_s'] == 3.0
    assert result['stream_staging_over_raw'] == 1.0
    assert result['stream_large_app_start_s'] == 4.6
    assert result['stream_start_large_over_small'] == 1.15
    assert result['stream_t_ready_s'] == 44.0
    assert result['stream_large_artifact_mb'] == 1600.0
    assert result['stream_large_fully_local'] is False
    assert result['staging_over_raw'] == 1.5
    assert result['bytes_before_start_ramfs'] == 150e6
    assert result['t_ready_nfs_s'] == 70.5
    assert result['bytes_before_start_nfs'] == 0
    assert result['node_sha256_mb_s'] == 60.0
    assert result['t_ready_container_over_direct'] == 0.4
    assert result['t_ready_direct_s'] == 200.0
    assert result['direct_image_mb'] == 300.0
    assert result['agent_up_s'] == 35.7
    # From the heartbeat that told the exit to the power-off, both on the
    # conductor's clock (not from the node's exit stamp, 20.0).
    assert result['exit_to_poweroff_s'] == 0.6
    assert result['t_ready_s'] == 80.0
    assert result['initramfs_mb'] == 119.4
    assert result['warm_t_ready_s'] == 8.0
    result.update(bench_report.summarize_kexec(
        {'kexec': {'method': 'kexec_file_load'}, 'cold_reason': 'x',
         'boot': {'phases': {'kexec_s': 1.5}}}, 60.0, result))
    # Cold 80.0 s less its 9.1 s of firmware and iPXE.
    assert result['cold_t_ready_less_firmware_s'] == 70.9
    assert result['kexec_over_cold_less_firmware'] == 0.85
    assert result['kexec_phase_s'] == 1.5
    result.update(bench_report.summarize_boot_peers(
        {'busybox_boot_s': 12.0, 't_ready_ramdisk_deploy_s': 40.0,
         'ramdisk_deploy_initrd_mb': 120.0}, 30.0))
    assert result['agent_up_over_busybox'] == 2.5
    assert result['t_ready_warm_over_direct'] == 0.04
    result['targets'] = bench_report.targets(result)
    assert result['targets']['agent_up_s'] == {
        'goal': 20.0, 'measured': 35.7, 'met': False}
    assert result['targets']['t_ready_s']['met'] is False
    table = bench_report.format_table(result, [('scale: 2 nodes', '9.0/min')])
    assert re.search(r'^target agent_up_s <= 20\.0 s +35\.7 s \(not met\)$',
                     table, re.M)
    assert re.search(r'^target t_ready_container_over_direct <= 0\.33 +0\.4 '
                     r'\(not met\)$', table, re.M)
    assert re.search(r'^scale: 2 nodes +9\.0/min$', table, re.M)
    assert re.search(r'^stream staging / raw \(goal <= 1\.3\) +1\.0$', table,
                     re.M)
    assert re.search(r'^target stream_staging_over_raw <= 1\.3 +1\.0 \(met\)$',
                     table, re.M)
    assert re.search(r'^target warm_t_ready_s <= 10\.0 s +8\.0 s \(met\)$',
                     table, re.M)
    assert re.search(r'^target agent_up_over_busybox <= 1\.5 +2\.5 '
                     r'\(not met\)$', table, re.M)
    assert re.search(r'^target kexec_over_cold_less_firmware <= 1\.0 +0\.85 '
                     r'\(met\)$', table, re.M)
    assert re.search(r'^T_ready warm \(agent left up by cleaning, no boot\) '
                     r'+8\.00 s$', table, re.M)
    assert re.search(r'^agent-up \(power-on -> first step\) +35\.7 s$',
                     table, re.M)
    assert re.search(r'^  firmware ipxe +9\.10 s$', table, re.M)
    assert re.search(r'^  agent to heartbeat +not measured$', table, re.M)
    assert re.search(r'^  initramfs size +119\.4 MB$', table, re.M)
    assert re.search(r'^T_ready container / direct +0\.4$', table, re.M)
    assert 'T_ready direct (request -> workload started)' in table
    assert re.search(r'^T_ready nfs .* +70\.50 s$', table, re.M)
    assert re.search(r'^  bytes before the workload started, nfs +0\.0 MB$',
                     table, re.M)
    assert re.search(r'^  fully local +12\.5 s after the start \(background '
                     r'fetch 13\.0 s\)$', table, re.M)
    assert re.search(r'^  fully local +not reached: x$', table, re.M)
    assert re.search(r'^stream app start, large / small \(goal <= 1\.2\) '
                     r'+1\.15$', table, re.M)


def test_standalone_ramdisk_unpacks_a_zstd_agent(tmp_path):
    """Ironic unpacks a file that starts as zstd and keeps only that
    frame: the agent part is written unpacked, the modules after it."""
    import gzip
    import subprocess
    agent_cpio = b'070701' + b'a' * 1000 + b'TRAILER!!!'
    modules_cpio = b'070701' + b'm' * 500 + b'TRAILER!!!'
    (tmp_path / 'agent.cpio').write_bytes(agent_cpio)
    subprocess.run(['zstd', '-q', str(tmp_path / 'agent.cpio'), '-o',
                    str(tmp_path / 'agent.initramfs')], check=True)
    (tmp_path / 'modules.cpio.gz').write_bytes(gzip.compress(modules_cpio))
    out = direct_job.concatenate_initrds(
        [str(tmp_path / 'agent.initramfs'), str(tmp_path / 'modules.cpio.gz')],
        str(tmp_path / 'standalone'))
    data = open(out, 'rb').read()
    assert not data.startswith(direct_job.ZSTD_MAGIC)
    assert data.startswith(agent_cpio)
    # Padded to 4 bytes, then the modules archive as it was.
    rest = data[len(agent_cpio):].lstrip(b'\0')
    assert gzip.decompress(rest) == modules_cpio
    # A gzip'ed agent is copied as it is.
    gz = tmp_path / 'agent.gz'
    gz.write_bytes(gzip.compress(agent_cpio))
    out = direct_job.concatenate_initrds([str(gz)], str(tmp_path / 'two'))
    data = open(out, 'rb').read()
    assert data[:len(gz.read_bytes())] == gz.read_bytes()
    assert set(data[len(gz.read_bytes()):]) <= {0} and len(data) % 4 == 0


def test_exit_heard_is_read_on_the_conductor_clock():
    uuid = '1be26c0a-6f3d-4a1b-9c7e-2f0e5a1d9b11'
    log = ('2026-11-25 17:13:26.100 11828 INFO ironic_bmc.drivers.'
           'container_deploy [-] Heartbeat from node other\n'
           '2026-11-25 17:13:26.459 11828 INFO ironic_bmc.drivers.'
           'container_deploy [-] The agent of node %s heartbeats: its '
           'workload ended; reading it now\n' % uuid)
    heard = bench.exit_heard_at(log, uuid)
    assert heard == datetime.datetime(2026, 11, 25, 17, 13, 26,
                                      459000).timestamp()
    # An exit the periodic watch found: not measured, not guessed.
    assert bench.exit_heard_at(log, 'another-node') is None
    report = {'artifact': {'size': 1e6, 'format': 'erofs'}, 'staging': {},
              'stages': [{'name': 'powered-off', 'start': 27.5,
                          'end': 28.0}]}
    direct = {'active_s': 150.0, 'workload_started_s': 200.0}
    assert bench_report.summarize(report, 80.0, 1, 1e6, direct,
                                  1e6)['exit_to_poweroff_s'] is None


def test_qemu_starts_are_read_on_the_host_clock(tmp_path, monkeypatch):
    log = tmp_path / 'bmc-node-0.log'
    log.write_text(
        '2026-11-26 06:52:34.132+0000: starting up libvirt version: 9.0.0\n'
        'LC_ALL=C /usr/bin/qemu-system-x86_64 -name guest=bmc-node-0\n'
        '2026-11-26 06:54:01.500+0000: starting up libvirt version: 9.0.0\n')
    monkeypatch.setattr(ramdisk_peer, 'QEMU_LOG', str(tmp_path / '%s.log'))
    settings = mock.Mock(**{'node_name.return_value': 'bmc-node-0'})
    starts = ramdisk_peer.qemu_starts(settings)
    assert [round(t - starts[0], 3) for t in starts] == [0.0, 87.368]
    assert starts[0] == datetime.datetime(
        2026, 11, 26, 6, 52, 34, 132000,
        tzinfo=datetime.timezone.utc).timestamp()
    settings.node_name.return_value = 'absent'
    assert ramdisk_peer.qemu_starts(settings) == []
