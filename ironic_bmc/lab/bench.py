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
/usr, plus busybox):

1. a container deploy in job mode, timing T_ready (deploy request to
   workload started) and rootfs staging against a plain HTTP transfer of
   the same artifact bytes measured by the agent on the node;
2. Ironic's ``direct`` deploy of the same content as a whole-disk image,
   timed from the deploy request to ACTIVE.  That is a lower bound of its
   T_ready: the image here has no bootloader, so the instance's own boot
   is not counted, in direct's favour.

Prints a table, then one JSON line.
"""

import hashlib
import json
import os
import shutil
import struct
import tempfile
import time

from ironic_bmc.lab import agent
from ironic_bmc.lab import client as lab_client
from ironic_bmc.lab import container_job
from ironic_bmc.lab import ociimage
from ironic_bmc.lab import procs
from ironic_bmc import protocol

#: Host directories copied into the benchmark image (hard links).
CONTENT_DIRS = ('/usr/share/locale', '/usr/lib/python3', '/usr/share/perl',
                '/usr/share/zoneinfo')
BENCH_REPO = 'bmc/bench-rootfs'
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


def _mbr(disk_bytes, start_lba=2048):
    """A DOS partition table with one Linux partition from start_lba."""
    sectors = disk_bytes // 512 - start_lba
    entry = struct.pack('<B3sB3sII', 0x80, b'\xfe\xff\xff', 0x83,
                        b'\xfe\xff\xff', start_lba, sectors)
    return b'\0' * 446 + entry + b'\0' * 48 + b'\x55\xaa'


def build_disk_image(tree, path, size_mb):
    """Whole-disk raw image: MBR + ext4 made from ``tree`` (no loop)."""
    with open(path, 'wb') as f:
        f.truncate(size_mb * MiB)
        f.write(_mbr(size_mb * MiB))
    procs.run(['mkfs.ext4', '-q', '-F', '-E', 'offset=%d' % MiB, '-d',
               tree, path, '%dk' % ((size_mb - 1) * 1024)],
              'mkfs.ext4 of the direct-deploy image')
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(4 * MiB), b''):
            digest.update(chunk)
    return digest.hexdigest()


def _stage(report, name):
    return next((s for s in report['stages'] if s['name'] == name), None)


def run_container(settings, image, out):
    t0 = time.time()
    container_job.deploy(settings, image, mode=protocol.MODE_JOB,
                         extra={protocol.II_MEASURE_LINK: 'true'}, out=out)
    report = container_job.wait_report(settings)
    container_job.undeploy(settings)
    started = _stage(report, protocol.STAGE_WORKLOAD_STARTED)
    return t0, report, started['end'] - t0


def run_direct(settings, kernel, ramdisk, disk_url, disk_sha256, out,
               timeout=1200):
    cli = lab_client.get_client(settings)
    name = settings.node_name(0)
    node = cli.node.get(name)
    saved_driver_info = node.driver_info
    patch = [
        {'op': 'replace', 'path': '/deploy_interface', 'value': 'direct'},
        # Ironic's own boot of the agent takes one initrd: concatenate.
        {'op': 'add', 'path': '/driver_info/deploy_kernel',
         'value': 'file://' + kernel},
        {'op': 'add', 'path': '/driver_info/deploy_ramdisk',
         'value': 'file://' + ramdisk},
        {'op': 'add', 'path': '/instance_info/image_source',
         'value': disk_url},
        {'op': 'add', 'path': '/instance_info/image_os_hash_algo',
         'value': 'sha256'},
        {'op': 'add', 'path': '/instance_info/image_os_hash_value',
         'value': disk_sha256},
        {'op': 'add', 'path': '/instance_info/image_disk_format',
         'value': 'raw'},
        {'op': 'add', 'path': '/instance_info/root_gb', 'value': 1},
        {'op': 'add', 'path': '/instance_info/image_download_source',
         'value': 'local'},
    ]
    cli.node.update(name, patch)
    watcher = lab_client.StateWatcher(cli, name)
    out('Deploying the same content with the direct deploy ...')
    t0 = time.time()
    try:
        cli.node.set_provision_state(name, 'active')
        watcher.wait('active', timeout)
        elapsed = time.time() - t0
    finally:
        node = cli.node.get(name)
        if node.provision_state != 'available':
            cli.node.set_provision_state(name, 'deleted')
            lab_client.StateWatcher(cli, name).wait('available', 300)
        cli.node.update(name, [
            {'op': 'replace', 'path': '/driver_info',
             'value': saved_driver_info},
            {'op': 'replace', 'path': '/instance_info', 'value': {}}])
    return elapsed


def combined_ramdisk(settings, files):
    path = os.path.join(settings.images_dir, 'agent-with-modules.initramfs')
    with open(path + '.tmp', 'wb') as out:
        for part in (files.ramdisk, files.modules):
            with open(part, 'rb') as f:
                shutil.copyfileobj(f, out, 4 * MiB)
    os.replace(path + '.tmp', path)
    return path


def run(settings, out=print):
    files = agent.ensure(settings, out=out)
    combined = combined_ramdisk(settings, files)
    with tempfile.TemporaryDirectory(dir='/var/tmp') as tmp:
        tree = os.path.join(tmp, 'root')
        os.makedirs(tree)
        nfiles, nbytes = build_tree(tree)
        out('Benchmark content: %d files, %.0f MB' % (nfiles, nbytes / 1e6))
        image = ociimage.build_image([ociimage.entries_from_dir(tree)],
                                     cmd=['/bin/true'], env=['PATH=/bin'])
        ociimage.Pusher(settings.registry_address).push_image(
            BENCH_REPO, '1', image)
        ref = '%s/%s:1' % (settings.registry_address, BENCH_REPO)
        # Served on loopback; with image_download_source=local the
        # conductor fetches it and serves it to the agent from http_url.
        disk_dir = os.path.join(settings.http_root, 'bench')
        os.makedirs(disk_dir, exist_ok=True)
        disk = os.path.join(disk_dir, 'disk.raw')
        disk_sha = build_disk_image(tree, disk,
                                    int(nbytes * 1.6 / MiB) + 64)
    try:
        _t0, report, t_ready = run_container(settings, ref, out)
        direct_error = None
        try:
            t_direct = run_direct(
                settings, files.kernel, combined,
                'http://127.0.0.1:%d/bench/disk.raw' % settings.ports.http,
                disk_sha, out)
        except procs.LabError as exc:
            t_direct, direct_error = None, str(exc).splitlines()[0]
    finally:
        shutil.rmtree(disk_dir, ignore_errors=True)
    return summarize(report, t_ready, t_direct, direct_error, nfiles,
                     nbytes)


def summarize(report, t_ready, t_direct, direct_error, nfiles, nbytes):
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
        'stages': {s['name']: round(s['end'] - s['start'], 2)
                   for s in report['stages']},
        'staging_s': round(stage_s, 3),
        'staging_download_s': staging.get('download_s'),
        'staging_mount_s': staging.get('mount_s'),
        'raw_transfer_s': raw,
        'staging_over_raw': round(stage_s / raw, 2) if raw else None,
        't_active_direct_s': round(t_direct, 2) if t_direct else None,
        't_ready_container_over_direct': (round(t_ready / t_direct, 2)
                                          if t_direct else None),
        'direct_error': direct_error,
        'workload_exit_code': report.get('workload_exit_code'),
    }
    return result


def format_table(result):
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
    rows += [
        ('rootfs staging (download+verify+mount)',
         '%.3f s' % result['staging_s']),
        ('  download + sha256 into RAM',
         '%s s' % result['staging_download_s']),
        ('  mount erofs + overlay', '%s s' % result['staging_mount_s']),
        ('raw HTTP transfer of the same bytes', '%s s'
         % result['raw_transfer_s']),
        ('staging / raw', str(result['staging_over_raw'])),
        ('direct deploy, request -> ACTIVE', '%s s'
         % result['t_active_direct_s']
         if result['t_active_direct_s'] else 'failed: %s'
         % result['direct_error']),
        ('T_ready container / direct', str(
            result['t_ready_container_over_direct'])),
    ]
    width = max(len(r[0]) for r in rows)
    return '\n'.join('%-*s  %s' % (width, k, v) for k, v in rows)


def main(settings, out=print):
    result = run(settings, out=out)
    out('')
    out(format_table(result))
    out(json.dumps(result, sort_keys=True))
    return 0

