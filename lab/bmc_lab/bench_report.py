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

"""The bench's result: its numbers from the run reports, goals and table.

:func:`summarize`, :func:`summarize_nfs` and :func:`summarize_stream`
turn what ``bmc-lab bench`` measured (the container deploy's run
reports, the direct deploy's times) into the result's keys, the JSON
line the bench prints; :func:`targets` sets them against the goals
(:data:`TARGETS`); :func:`format_table` is the table printed before it.
"""

from bmc_common import protocol


def stage(report, name):
    return next((s for s in report['stages'] if s['name'] == name), None)


def _stream_numbers(report, t_ready):
    stream = report.get('stream') or {}
    staging = report.get('staging') or {}
    start = stage(report, protocol.STAGE_WORKLOAD_STARTED)
    staged = stage(report, protocol.STAGE_ROOTFS_STAGED)
    return {
        't_ready_s': round(t_ready, 2),
        # From the end of the agent's boot to the workload's start.
        'app_start_s': round(start['end'] - staged['start'], 2),
        # Attach, verify and mount: what ramfs staging is to a download.
        'staged_s': round(staged['end'] - staged['start'], 2),
        'bytes_before_start': staging.get('bytes_before_start'),
        'artifact_mb': round((report.get('artifact') or {}).get(
            'size', 0) / 1e6, 1),
        'fully_local': stream.get('fully_local'),
        'fully_local_after_start_s': stream.get('fully_local_after_start_s'),
        'background_fetch_s': stream.get('background_fetch_s'),
        'error': stream.get('error') or stream.get('not_local_reason'),
    }


def summarize_stream(report, t_ready, large_run, node_memory_mb,
                     raw_transfer_s=None):
    """Stream mode: the bench image, and the large one if built.

    ``raw_transfer_s``: the ramfs run's raw HTTP transfer of the same
    artifact; stream staging over it is the answer to ramfs staging over
    it (``staging_over_raw``): the workload starts before the image is
    in RAM.
    """
    small = _stream_numbers(report, t_ready)
    result = {'stream_%s' % k: v for k, v in small.items()}
    result['stream_node_memory_mb'] = node_memory_mb
    result['stream_staging_over_raw'] = (
        round(small['staged_s'] / raw_transfer_s, 2)
        if raw_transfer_s else None)
    if large_run:
        large = _stream_numbers(*large_run)
        result.update({'stream_large_%s' % k: v for k, v in large.items()})
        result['stream_start_large_over_small'] = round(
            large['app_start_s'] / small['app_start_s'], 2)
    return result


def summarize_warm(report, t_ready, direct):
    """The warm run (fast track): its T_ready against the direct
    deploy's."""
    return {
        'warm_t_ready_s': round(t_ready, 2),
        'warm': report.get('warm'),
        'warm_cold_reason': report.get('cold_reason'),
        'warm_agent_up_for_s': report.get('agent_up_for_s'),
        't_ready_warm_over_direct': round(
            t_ready / direct['workload_started_s'], 2),
    }


def summarize_kexec(report, t_ready, result):
    """The kexec run (a warm agent, other kernel arguments) against the
    cold run less its firmware and iPXE time."""
    firmware = (result.get('boot_phases') or {}).get('firmware_ipxe_s')
    floor = (result['t_ready_container_s'] - firmware
             if firmware is not None else None)
    return {
        'kexec_t_ready_s': round(t_ready, 2),
        'kexec_done': bool(report.get('kexec')),
        'kexec_cold_reason': report.get('cold_reason'),
        'kexec_phase_s': ((report.get('boot') or {}).get('phases')
                          or {}).get('kexec_s'),
        'cold_t_ready_less_firmware_s': (round(floor, 2)
                                         if floor is not None else None),
        'kexec_over_cold_less_firmware': (round(t_ready / floor, 2)
                                          if floor else None),
    }


def summarize_boot_peers(peers, cold_agent_up_s):
    """Ironic's ramdisk deploy: the busybox boot floor and the content
    packed as an initrd."""
    busybox = peers['busybox_boot_s']
    return {
        'busybox_boot_s': busybox,
        'cold_agent_up_s': cold_agent_up_s,
        'agent_up_over_busybox': (round(cold_agent_up_s / busybox, 2)
                                  if cold_agent_up_s and busybox else None),
        't_ready_ramdisk_deploy_s': peers['t_ready_ramdisk_deploy_s'],
        'ramdisk_deploy_initrd_mb': peers['ramdisk_deploy_initrd_mb'],
    }


def summarize_nfs(report, t_ready):
    """The same image and workload, its root mounted from NFS."""
    staging = report.get('staging') or {}
    return {
        't_ready_nfs_s': round(t_ready, 2),
        'bytes_before_start_nfs': staging.get('bytes_before_start'),
        'nfs_mount_s': staging.get('nfs_mount_s'),
        'staging_nfs_s': staging.get('mount_s'),
        'nfs_workload_exit_code': report.get('workload_exit_code'),
    }


def summarize(report, t_ready, nfiles, nbytes, direct, disk_size):
    staging = report.get('staging') or {}
    stage_s = (staging.get('download_s') or 0) + (staging.get('mount_s')
                                                  or 0)
    raw = staging.get('raw_transfer_s')
    result = {
        'content_files': nfiles,
        'content_mb': round(nbytes / 1e6, 1),
        'artifact_mb': round(report['artifact']['size'] / 1e6, 1),
        'artifact_format': report['artifact']['format'],
        't_ready_container_s': round(t_ready, 2),
        'bytes_before_start_ramfs': staging.get('bytes'),
        'stages': {s['name']: round(s['end'] - s['start'], 2)
                   for s in report['stages']},
        'staging_s': round(stage_s, 3),
        'staging_download_s': staging.get('download_s'),
        'staging_mount_s': staging.get('mount_s'),
        'staging_hash_s': staging.get('hash_s'),
        # sha256 of the whole artifact first, or dm-verity when read.
        'staging_verify': staging.get('verify'),
        'staging_write_s': staging.get('write_s'),
        # What verifying costs on this node's CPU: the floor of staging.
        # (Only when the whole artifact was hashed: with dm-verity the
        # download hashes nothing.)
        'node_sha256_mb_s': (round(staging['bytes'] / 1e6
                                   / staging['hash_s'], 1)
                             if staging.get('verify') != 'dm-verity'
                             and staging.get('hash_s') and staging.get('bytes')
                             else None),
        'raw_transfer_s': raw,
        'staging_over_raw': round(stage_s / raw, 2) if raw else None,
        'direct_image_mb': round(disk_size / 1e6, 1),
        't_active_direct_s': direct['active_s'],
        't_ready_direct_s': direct['workload_started_s'],
        't_ready_container_over_direct': round(
            t_ready / direct['workload_started_s'], 2),
        'workload_exit_code': report.get('workload_exit_code'),
    }
    result['t_ready_s'] = result['t_ready_container_s']
    off = stage(report, protocol.STAGE_POWERED_OFF)
    heard = report.get('exit_heard_at')
    # Both ends on the conductor's clock: the agent's heartbeat that tells
    # the exit (sent as the workload ends, on loopback), the power-off's
    # start.  (The node's own clock, set from QEMU's RTC at boot, is off
    # by up to a second: never subtracted from the conductor's.)
    result['exit_to_poweroff_s'] = (round(off['start'] - heard, 2)
                                    if heard and off else None)
    boot = report.get('boot') or {}
    result['agent_up_s'] = boot.get('agent_up_s', result['stages'].get(
        protocol.STAGE_AGENT_UP))
    result['boot_phases'] = boot.get('phases')
    result['initramfs_mb'] = (round(boot['initramfs_bytes'] / 1e6, 1)
                              if boot.get('initramfs_bytes') else None)
    return result


def _boot_rows(result):
    """Where agent-up went (the report's boot section)."""
    rows = [('agent-up (power-on -> first step)', '%s s'
             % result.get('agent_up_s'))]
    for phase, secs in (result.get('boot_phases') or {}).items():
        rows.append(('  %s' % phase.replace('_s', '').replace('_', ' '),
                     'not measured' if secs is None else '%.2f s' % secs))
    if result.get('initramfs_mb'):
        rows.append(('  initramfs size', '%.1f MB' % result['initramfs_mb']))
    return rows


#: The goals of a container deploy on a lab node: (result key, goal,
#: unit).  Every one is "at most".
TARGETS = (
    ('agent_up_s', 20.0, 's'),
    ('t_ready_container_over_direct', 0.33, ''),
    ('t_ready_s', 30.0, 's'),
    ('warm_t_ready_s', 10.0, 's'),
    ('t_ready_warm_over_direct', 0.15, ''),
    # kexec T_ready <= cold T_ready less the firmware and iPXE time.
    ('kexec_over_cold_less_firmware', 1.0, ''),
    # A cold agent-up against the busybox floor of the same node.
    ('cold_agent_up_s', 25.0, 's'),
    ('agent_up_over_busybox', 1.5, ''),
    ('exit_to_poweroff_s', 2.0, 's'),
    ('staging_over_raw', 1.3, ''),
    # The same for stream mode: staged (attached, verified, mounted)
    # without downloading the image first.
    ('stream_staging_over_raw', 1.3, ''),
    # The scale benchmark's (one conductor): the plugin's own conductor
    # CPU per deploy (scale_bench, cpu_profile), and no failure.
    ('scale_plugin_cpu_ms_per_deploy', 50.0, 'ms'),
    ('scale_failures', 0, ''),
)


def targets(result):
    """{key: {"goal", "measured", "met"}} of :data:`TARGETS`."""
    out = {}
    for key, goal, _unit in TARGETS:
        value = result.get(key)
        out[key] = {'goal': goal, 'measured': value,
                    'met': value is not None and value <= goal}
    return out


def _target_rows(result):
    rows = []
    for key, goal, unit in TARGETS:
        t = result['targets'][key]
        rows.append(('target %s <= %s%s' % (key, goal, unit and ' ' + unit),
                     '%s%s (%s)' % (t['measured'], unit and ' ' + unit,
                                    'met' if t['met'] else 'not met')))
    return rows


def format_table(result, extra_rows=()):
    rows = [
        ('content', '%d files, %.1f MB' % (result['content_files'],
                                           result['content_mb'])),
        ('artifact', '%s, %.1f MB' % (result['artifact_format'],
                                      result['artifact_mb'])),
        ('T_ready container (request -> workload started)',
         '%.2f s' % result['t_ready_container_s']),
    ]
    for name, secs in result['stages'].items():
        rows.append(('  stage %s' % name, '%.2f s' % secs))
    rows += _boot_rows(result)
    rows.append(('job exit -> power-off start', '%s s'
                 % result['exit_to_poweroff_s']))
    rows += [
        ('rootfs staging (download+verify+mount)',
         '%.3f s' % result['staging_s']),
        ('  checked by', str(result['staging_verify'])),
        ('  download into RAM (+ sha256 unless dm-verity)',
         '%s s' % result['staging_download_s']),
        ('    of which sha256 (beside receiving)',
         '%s s' % result['staging_hash_s']),
        ('    of which writing to tmpfs', '%s s' % result['staging_write_s']),
        ('  sha256 throughput of the node', '%s MB/s'
         % result['node_sha256_mb_s'] if result['node_sha256_mb_s']
         else 'not measured (nothing hashed before the mount)'),
        ('  mount erofs + overlay', '%s s' % result['staging_mount_s']),
        ('raw HTTP transfer of the same bytes', '%s s'
         % result['raw_transfer_s']),
        ('staging / raw (goal <= 1.3)', str(result['staging_over_raw'])),
        ('bytes before the workload started, ramfs',
         '%.1f MB' % ((result['bytes_before_start_ramfs'] or 0) / 1e6)),
        ('T_ready nfs (same image, root from NFS)',
         '%.2f s' % result['t_ready_nfs_s']),
        ('  bytes before the workload started, nfs',
         '%.1f MB' % ((result['bytes_before_start_nfs'] or 0) / 1e6)),
        ('  NFS mount', '%s s' % result['nfs_mount_s']),
        ('  staging (mount + overlay)', '%s s' % result['staging_nfs_s']),
    ]
    rows += _stream_rows(result)
    rows += [
        ('direct deploy: whole-disk image', '%.1f MB raw'
         % result['direct_image_mb']),
        ('  request -> ACTIVE (agent, write, reboot)',
         '%.2f s' % result['t_active_direct_s']),
        ('T_ready direct (request -> workload started)',
         '%.2f s' % result['t_ready_direct_s']),
        ('T_ready container / direct',
         str(result['t_ready_container_over_direct'])),
        ('T_ready warm (agent left up by cleaning, no boot)',
         '%.2f s' % result['warm_t_ready_s'] if result.get('warm')
         else 'cold: %s' % result.get('warm_cold_reason')),
        ('T_ready warm / direct', str(result['t_ready_warm_over_direct'])),
        ('T_ready kexec (warm agent, other kernel arguments)',
         '%.2f s' % result['kexec_t_ready_s'] if result.get('kexec_done')
         else 'no kexec: %s' % result.get('kexec_cold_reason')),
        ('  kexec -> new kernel', '%s s' % result.get('kexec_phase_s')),
        ('  cold T_ready less firmware+iPXE', '%s s'
         % result.get('cold_t_ready_less_firmware_s')),
        ('ramdisk deploy (Ironic): content as a %s MB initrd'
         % result.get('ramdisk_deploy_initrd_mb'),
         '%s s' % result.get('t_ready_ramdisk_deploy_s')),
        ('busybox initrd boot (QEMU start -> /init)',
         '%s s' % result.get('busybox_boot_s')),
        ('cold agent-up (QEMU start -> first step)',
         '%s s' % result.get('cold_agent_up_s')),
        ('  / busybox boot', str(result.get('agent_up_over_busybox'))),
    ]
    rows += list(extra_rows)
    if 'targets' in result:
        rows += _target_rows(result)
    width = max(len(r[0]) for r in rows)
    return '\n'.join('%-*s  %s' % (width, k, v) for k, v in rows)


def _stream_rows(result):
    def mb(value):
        return '%.1f MB' % ((value or 0) / 1e6)

    def local(prefix):
        if not result.get(prefix + 'fully_local'):
            return 'not reached: %s' % result.get(prefix + 'error')
        return '%s s after the start (background fetch %s s)' % (
            result[prefix + 'fully_local_after_start_s'],
            result[prefix + 'background_fetch_s'])

    rows = [
        ('T_ready stream (same image, blocks on demand)',
         '%.2f s' % result['stream_t_ready_s']),
        ('  bytes before the workload started, stream',
         mb(result['stream_bytes_before_start'])),
        ('  rootfs-staged start -> workload started',
         '%s s' % result['stream_app_start_s']),
        ('  staging (attach, dm-verity, mount)',
         '%s s' % result['stream_staged_s']),
        ('stream staging / raw (goal <= 1.3)',
         str(result['stream_staging_over_raw'])),
        ('  fully local', local('stream_')),
    ]
    if 'stream_large_t_ready_s' in result:
        rows += [
            ('T_ready stream, large image (%s MB artifact, %d MiB node)'
             % (result['stream_large_artifact_mb'],
                result['stream_node_memory_mb']),
             '%.2f s' % result['stream_large_t_ready_s']),
            ('  bytes before the workload started',
             mb(result['stream_large_bytes_before_start'])),
            ('  rootfs-staged start -> workload started',
             '%s s' % result['stream_large_app_start_s']),
            ('  fully local', local('stream_large_')),
            ('stream app start, large / small (goal <= 1.2)',
             str(result['stream_start_large_over_small'])),
        ]
    return rows
