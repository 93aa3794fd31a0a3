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

Prints a table, then one JSON line: the result as
:mod:`bmc_lab.bench_report` makes it from the runs.
"""

import datetime
import json
import os
import random
import shutil
import tempfile
import time

from bmc_lab import agent
from bmc_lab import bench_report
from bmc_lab import container_job
from bmc_lab import direct_job
from bmc_lab import ironic_service
from bmc_lab import logcursor
from bmc_lab import ociimage
from bmc_lab import pgo_bench
from bmc_lab import scale_bench
from bmc_lab import ramdisk_peer
from bmc_lab import scale_report
from bmc_lab import warm_run
from bmc_common import protocol

#: Host directories copied into the benchmark image (hard links).
CONTENT_DIRS = ('/usr/share/locale', '/usr/lib/python3', '/usr/share/perl',
                '/usr/share/zoneinfo')
BENCH_REPO = 'bmc/bench-rootfs'
LARGE_REPO = 'bmc/bench-rootfs-large'
WORKLOAD = '/bin/true'
#: stream runs: a service that runs until the image is fully local.
STREAM_WORKLOAD = ['/bin/sleep', '86400']
#: Container jobs: long enough to end after the deploy has.
JOB_WORKLOAD = ['/bin/sleep', '5']
#: kexec runs: a boot-time knob any node can take (one CPU is enough).
KEXEC_TUNABLES = {'rcu_nocbs': '0'}
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
    # The job outlives the deploy's end, so its exit is heard from the
    # agent's heartbeat (exit_to_poweroff_s), not read by the first check.
    extra = {protocol.II_ROOTFS: rootfs,
             protocol.II_COMMAND: json.dumps(JOB_WORKLOAD)}
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
    started = bench_report.stage(report, protocol.STAGE_WORKLOAD_STARTED)
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
    started = bench_report.stage(report, protocol.STAGE_WORKLOAD_STARTED)
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


def run_kexec(settings, image, out):
    """The same job with a boot-time kernel argument on a warm node: the
    agent kexecs into it."""
    with warm_run.warm_node(settings, out=out):
        warm_run.clean(settings, out=out)
        t0 = time.time()
        container_job.deploy(settings, image, mode=protocol.MODE_JOB,
                             extra={protocol.II_TUNABLES: json.dumps(
                                 KEXEC_TUNABLES)}, out=out)
        report = container_job.wait_report(settings)
        container_job.undeploy(settings)
    started = bench_report.stage(report, protocol.STAGE_WORKLOAD_STARTED)
    return report, started['end'] - t0


def run_warm(settings, image, out):
    """The same job on a node that cleaning left warm (fast track): the
    request to the workload's start without a boot."""
    with warm_run.warm_node(settings, out=out):
        warm_run.clean(settings, out=out)
        _t0, report, t_ready = run_container(settings, image, out)
    return report, t_ready


def run(settings, out=print, large_mb=1536):
    agent.ensure(settings, out=out)
    with tempfile.TemporaryDirectory(dir='/var/tmp') as tmp:
        tree = os.path.join(tmp, 'root')
        os.makedirs(tree)
        nfiles, nbytes = build_tree(tree)
        out('Benchmark content: %d files, %.0f MB' % (nfiles, nbytes / 1e6))
        ref = _push(settings, tree, BENCH_REPO)
        disk = direct_job.build_image(settings, tree, WORKLOAD)
        initrds = ramdisk_peer.build_initrds(settings, tree,
                                             settings.images_dir)
        large = None
        if large_mb:
            add_large_file(tree, max(0, large_mb * MiB - nbytes))
            large = _push(settings, tree, LARGE_REPO)
    try:
        starts = len(ramdisk_peer.qemu_starts(settings))
        _t0, report, t_ready = run_container(settings, ref, out)
        qemu_start = ramdisk_peer.qemu_starts(settings)[starts]
        warm_report, t_ready_warm = run_warm(settings, ref, out)
        kexec_report, t_ready_kexec = run_kexec(settings, ref, out)
        peers = ramdisk_peer.run(settings, initrds, WORKLOAD, out=out)
        _t0, nfs_report, t_ready_nfs = run_container(
            settings, ref, out, rootfs=protocol.ROOTFS_NFS)
        stream_report, t_ready_stream = run_stream(settings, ref, out)
        large_run = run_stream(settings, large, out) if large else None
        direct = direct_job.run(settings, disk, out=out)
    finally:
        os.unlink(disk['path'])
    result = bench_report.summarize(report, t_ready, nfiles, nbytes, direct,
                                    disk['size'])
    result.update(bench_report.summarize_warm(warm_report, t_ready_warm,
                                              direct))
    result.update(bench_report.summarize_kexec(kexec_report, t_ready_kexec,
                                               result))
    agent_up = bench_report.stage(report, protocol.STAGE_AGENT_UP)
    result.update(bench_report.summarize_boot_peers(
        peers, round(agent_up['end'] - qemu_start, 2) if agent_up else None))
    result.update(bench_report.summarize_nfs(nfs_report, t_ready_nfs))
    result.update(bench_report.summarize_stream(
        stream_report, t_ready_stream, large_run, settings.node_memory_mb,
        raw_transfer_s=result['raw_transfer_s']))
    return result


def main(settings, out=print, large_mb=1536, scale_nodes=200,
         scale_dir=None, pgo=False):
    # A run stopped part-way left its deploy behind: undo it first.
    container_job.reclaim(settings, out=out)
    result = run(settings, out=out, large_mb=large_mb)
    if pgo:
        result.update(pgo_bench.run(settings, out=out))
    scale_runs = []
    if scale_nodes:
        scale_runs = scale_bench.run(scale_dir or settings.path('scale'),
                                     scale_nodes, out=out)
        result.update(scale_report.json_fields(scale_runs))
    result['targets'] = bench_report.targets(result)
    out('')
    out(bench_report.format_table(result,
                                  scale_report.format_rows(scale_runs)))
    if pgo:
        out(pgo_bench.format_rows(result))
    out(json.dumps(result, sort_keys=True))
    return 0
