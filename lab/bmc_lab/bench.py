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

"""``bmc-lab bench``: time a container deploy against the physical limits.

Same lab, same node, same content (~200 MB, ~10k files of the host's own
/usr, plus busybox), same workload (``/bin/true``):

* a container deploy in job mode, timing T_ready (deploy request to
  workload started) and rootfs staging against a plain HTTP transfer of
  the same artifact bytes measured by the agent on the node;
* the same in ``nfs`` rootfs mode: T_ready and bytes fetched before the
  workload started (none: files cross the network when read);
* the same in ``stream`` rootfs mode, in service mode until the image is
  fully local: T_ready, bytes before the start, time to fully local; and
  a second, large image (``--large-image-mb``, default 1536: the content
  plus incompressible data) in ``stream`` mode, for the app start of a
  large image over a small one (the node needs RAM for it: the bench's
  nodes have 4 GiB by default);
* Ironic's ``direct`` deploy of the same content as a whole-disk image
  (:mod:`bmc_lab.diskimage`): agent boot, image written to disk,
  reboot from disk, workload started by the OS on the disk.

Prints a table, then one JSON line.
"""

import datetime
import json
import os
import random
import shutil
import tempfile
import time

from bmc_lab import agent
from bmc_lab import container_job
from bmc_lab import direct_job
from bmc_lab import ironic_service
from bmc_lab import logcursor
from bmc_lab import ociimage
from bmc_lab import scale_bench
from bmc_lab import scale_report
from bmc_common import protocol

#: Host directories copied into the benchmark image (hard links).
CONTENT_DIRS = ('/usr/share/locale', '/usr/lib/python3', '/usr/share/perl',
                '/usr/share/zoneinfo')
BENCH_REPO = 'bmc/bench-rootfs'
LARGE_REPO = 'bmc/bench-rootfs-large'
WORKLOAD = '/bin/true'
#: stream runs: a service that runs until the image is fully local.
STREAM_WORKLOAD = ['/bin/sleep', '86400']
MiB = 1024 * 1024


def build_tree(path):
    container_job.build_demo_tree(path)
    for src in CONTENT_DIRS:
        if os.path.isdir(src):
            dest = os.path.join(path, src.lstrip('/'))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copytree(src, dest, symlinks=True,
                            copy_function=os.link)
    files = size = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames + dirnames:
            files += 1
            st = os.lstat(os.path.join(dirpath, name))
            size += st.st_size if not os.path.islink(
                os.path.join(dirpath, name)) else 0
    return files, size


def _stage(report, name):
    return next((s for s in report['stages'] if s['name'] == name), None)


#: What the conductor logs when the agent's heartbeat tells it the
#: workload ended (ironic_bmc.drivers.container_deploy.heartbeat).
EXIT_HEARD = 'The agent of node %s heartbeats: its workload ended'


def exit_heard_at(log_text, node_uuid):
    """When (epoch, the conductor's clock) the conductor heard of the
    workload's exit, from its log; None if it learnt it otherwise."""
    marker = EXIT_HEARD % node_uuid
    for line in log_text.splitlines():
        if marker in line:
            try:
                return datetime.datetime.strptime(
                    line[:23], '%Y-%m-%d %H:%M:%S.%f').timestamp()
            except ValueError:
                return None
    return None


def _conductor_logs(settings):
    return [logcursor.Cursor(settings.log(name + '.log'))
            for name in ironic_service.ironic_processes(settings)
            if name != 'ironic-api']


def run_container(settings, image, out, rootfs=protocol.ROOTFS_RAMFS):
    t0 = time.time()
    extra = {protocol.II_ROOTFS: rootfs}
    if rootfs == protocol.ROOTFS_RAMFS:
        extra[protocol.II_MEASURE_LINK] = 'true'
    logs = _conductor_logs(settings)
    container_job.deploy(settings, image, mode=protocol.MODE_JOB,
                         extra=extra, out=out)
    report = container_job.wait_report(settings)
    container_job.undeploy(settings)
    # (Kept beside the report: the power-off's start is on the same
    # clock, the conductor's; the node's clock is another one.)
    report['exit_heard_at'] = next(
        (t for t in (exit_heard_at(c.text(), report['node']) for c in logs)
         if t is not None), None)
    started = _stage(report, protocol.STAGE_WORKLOAD_STARTED)
    return t0, report, started['end'] - t0


def _fully_local(report):
    """the image fully local (or its background fetch failed)"""
    stream = report.get('stream') or {}
    return bool(stream.get('fully_local') or stream.get('error')
                or report.get('state') != 'running')


def run_stream(settings, image, out, timeout=1200):
    """T_ready in stream mode, then the wait until the image is local."""
    t0 = time.time()
    container_job.deploy(settings, image, mode=protocol.MODE_SERVICE,
                         extra={protocol.II_ROOTFS: protocol.ROOTFS_STREAM,
                                protocol.II_COMMAND: json.dumps(
                                    STREAM_WORKLOAD)}, out=out)
    try:
        report = container_job.wait_report(settings, until=_fully_local,
                                           timeout=timeout)
    finally:
        container_job.undeploy(settings)
    started = _stage(report, protocol.STAGE_WORKLOAD_STARTED)
    return report, started['end'] - t0


def _push(settings, tree, repo):
    image = ociimage.build_image([ociimage.entries_from_dir(tree)],
                                 cmd=[WORKLOAD], env=['PATH=/bin'])
    ociimage.Pusher(settings.registry_address).push_image(repo, '1', image)
    return '%s/%s:1' % (settings.registry_address, repo)


def add_large_file(tree, size):
    """Incompressible data, so that the image is as large as asked."""
    rng = random.Random(size)
    with open(os.path.join(tree, 'large.bin'), 'wb') as f:
        left = size
        while left > 0:
            n = min(left, 64 * MiB)
            f.write(rng.randbytes(n))
            left -= n


def run(settings, out=print, large_mb=1536):
    agent.ensure(settings, out=out)
    with tempfile.TemporaryDirectory(dir='/var/tmp') as tmp:
        tree = os.path.join(tmp, 'root')
        os.makedirs(tree)
        nfiles, nbytes = build_tree(tree)
        out('Benchmark content: %d files, %.0f MB' % (nfiles, nbytes / 1e6))
        ref = _push(settings, tree, BENCH_REPO)
        disk = direct_job.build_image(settings, tree, WORKLOAD)
        large = None
        if large_mb:
            add_large_file(tree, max(0, large_mb * MiB - nbytes))
            large = _push(settings, tree, LARGE_REPO)
    try:
        _t0, report, t_ready = run_container(settings, ref, out)
        _t0, nfs_report, t_ready_nfs = run_container(
            settings, ref, out, rootfs=protocol.ROOTFS_NFS)
        stream_report, t_ready_stream = run_stream(settings, ref, out)
        large_run = run_stream(settings, large, out) if large else None
        direct = direct_job.run(settings, disk, out=out)
    finally:
        os.unlink(disk['path'])
    result = summarize(report, t_ready, nfiles, nbytes, direct,
                       disk['size'])
    result.update(summarize_nfs(nfs_report, t_ready_nfs))
    result.update(summarize_stream(stream_report, t_ready_stream,
                                   large_run, settings.node_memory_mb))
    return result


def _stream_numbers(report, t_ready):
    stream = report.get('stream') or {}
    staging = report.get('staging') or {}
    start = _stage(report, protocol.STAGE_WORKLOAD_STARTED)
    staged = _stage(report, protocol.STAGE_ROOTFS_STAGED)
    return {
        't_ready_s': round(t_ready, 2),
        # From the end of the agent's boot to the workload's start.
        'app_start_s': round(start['end'] - staged['start'], 2),
        'bytes_before_start': staging.get('bytes_before_start'),
        'artifact_mb': round((report.get('artifact') or {}).get(
            'size', 0) / 1e6, 1),
        'fully_local': stream.get('fully_local'),
        'fully_local_after_start_s': stream.get('fully_local_after_start_s'),
        'background_fetch_s': stream.get('background_fetch_s'),
        'error': stream.get('error') or stream.get('not_local_reason'),
    }


def summarize_stream(report, t_ready, large_run, node_memory_mb):
    """Stream mode: the bench image, and the large one if built."""
    small = _stream_numbers(report, t_ready)
    result = {'stream_%s' % k: v for k, v in small.items()}
    result['stream_node_memory_mb'] = node_memory_mb
    if large_run:
        large = _stream_numbers(*large_run)
        result.update({'stream_large_%s' % k: v for k, v in large.items()})
        result['stream_start_large_over_small'] = round(
            large['app_start_s'] / small['app_start_s'], 2)
    return result


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
    off = _stage(report, protocol.STAGE_POWERED_OFF)
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
    ('exit_to_poweroff_s', 2.0, 's'),
    ('staging_over_raw', 1.3, ''),
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


def main(settings, out=print, large_mb=1536, scale_nodes=200,
         scale_dir=None):
    # A run stopped part-way left its deploy behind: undo it first.
    container_job.reclaim(settings, out=out)
    result = run(settings, out=out, large_mb=large_mb)
    scale_runs = []
    if scale_nodes:
        scale_runs = scale_bench.run(scale_dir or settings.path('scale'),
                                     scale_nodes, out=out)
        result.update(scale_report.json_fields(scale_runs))
    result['targets'] = targets(result)
    out('')
    out(format_table(result, scale_report.format_rows(scale_runs)))
    out(json.dumps(result, sort_keys=True))
    return 0

