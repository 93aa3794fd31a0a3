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

"""``bmc-lab scale``: N concurrent container deploys through the conductor.

A lab of the ``scaled`` profile (ironic-api and one or more
ironic-conductor processes on MariaDB and RabbitMQ, the lab's nginx and
registry) with N nodes of the ``container-fake-hardware`` type, whose
machines and agents :mod:`bmc_lab.sim_agent` simulates.  Everything on
the conductor's side is real: the image is resolved and its rootfs
artifact built and cached, each node's boot files are rendered and
published, the in-band steps are sent to the agents and their results
recorded, each run report is written, and the job's exit powers the node
off.

Per run: deploys per minute (first request to the last node powered off
after its job), the conductors' CPU per deploy (their own and their
children's, the image build included), the same for Ironic's ``fake``
deploy of the same nodes (what Ironic itself costs per deploy) and the
difference, the conductors' peak RSS, rootfs builds per conductor (once
per image is the goal), HTTP-root bytes served, failures.
"""

import collections
import concurrent.futures
import os
import time

import requests

from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import control
from bmc_lab import cpu_profile
from bmc_lab import ironic_conf
from bmc_lab import procs
from bmc_lab import settings as lab_settings
from bmc_lab import sim_agent
from bmc_common import protocol

DRIVER = 'container-fake-hardware'
#: The scale lab's own ports and name: it may run next to another lab.
PORTS = lab_settings.Ports(ironic_api=36385, http=38080, registry=35050,
                           nfs=32049, ipmi_base=36230, agent_base=39900)
#: The simulated agents listen on a free port of 127.0.0.1 (their callback
#: URLs name it).
AGENTS_PORT = 0
NAME = 'bmc-scale'
#: The conductor logs this once per rootfs artifact it builds.
BUILT = 'Built rootfs artifact'
JOB = ['/bin/sh', '-c', 'echo simulated']


def lab_settings_for(state_dir, nodes, conductors):
    return lab_settings.Settings(
        state_dir=state_dir, profile=lab_settings.PROFILE_SCALED,
        nodes=0, conductors=conductors, name=NAME, ports=PORTS,
        ironic_debug=False)


def _placeholder_boot_files(settings):
    """The boot files the conductor publishes for every node; the
    simulated firmware fetches them but boots nothing."""
    os.makedirs(settings.images_dir, exist_ok=True)
    for name in (ironic_conf.AGENT_KERNEL, ironic_conf.AGENT_RAMDISK,
                 'modules-default.cpio.gz'):
        with open(os.path.join(settings.images_dir, name), 'wb') as f:
            f.write(b'simulated boot file: %s\n' % name.encode()
                    + os.urandom(64 * 1024))


def _mac(index):
    return '52:54:00:5c:%02x:%02x' % (index // 256, index % 256)


def _parallel(func, items, workers=8):
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(func, items))


def set_container(settings, uuids, image):
    """The container job on every node (an undeploy clears
    instance_info)."""
    def one(uuid):
        lab_client.get_client(settings).node.update(uuid, [
            {'op': 'replace', 'path': '/deploy_interface',
             'value': 'container'}] + [
            {'op': 'add', 'path': '/instance_info/%s' % key, 'value': value}
            for key, value in ((protocol.II_IMAGE, image),
                               (protocol.II_MODE, protocol.MODE_JOB),
                               (protocol.II_COMMAND, JOB))])
    _parallel(one, uuids)


def enroll(settings, count):
    """N available nodes of the fake container type; {uuid: mac}."""
    def one(index):
        cli = lab_client.get_client(settings)
        node = cli.node.create(
            name='%s-sim-%d' % (NAME, index), driver=DRIVER,
            boot_interface='ipxe', deploy_interface='container',
            vendor_interface='container', power_interface='fake',
            management_interface='fake',
            properties={'cpu_arch': 'x86_64',
                        'capabilities': 'boot_mode:bios'})
        cli.port.create(address=_mac(index), node_uuid=node.uuid)
        for target, state in (('manage', 'manageable'),
                              ('provide', 'available')):
            cli.node.set_provision_state(node.uuid, target)
            lab_client.StateWatcher(cli, node.uuid).wait(state, 300)
        return node.uuid, _mac(index)
    return dict(_parallel(one, range(count)))


def _nodes(settings):
    resp = requests.get(settings.api_url + '/v1/nodes', timeout=60,
                        headers=sim_agent.API_HEADERS,
                        params={'fields': 'uuid,provision_state,'
                                'power_state,last_error'})
    resp.raise_for_status()
    return {n['uuid']: n for n in resp.json()['nodes']}


class Meter:
    """CPU (own + waited-for children) and memory of lab processes."""

    def __init__(self, settings, names):
        self.settings = settings
        self.names = names
        self.start = self.cpu()

    def _pid(self, name):
        pid = procs.pid_of(self.settings, name)
        if pid is None:
            raise procs.LabError('%s is not running' % name)
        return pid

    def cpu(self):
        """CPU seconds of each process's tree: oslo.service runs the
        conductor's and the API's work in forked workers."""
        tick = os.sysconf('SC_CLK_TCK')
        stats = _proc_stats()
        total = {}
        for name in self.names:
            tree = _tree(stats, self._pid(name))
            # utime, stime, cutime, cstime (fields 14-17 of stat(5)).
            total[name] = sum(sum(int(v) for v in stats[p][11:15])
                              for p in tree) / tick
        return total

    def used(self):
        now = self.cpu()
        return {n: now[n] - self.start[n] for n in self.names}

    def memory_mb(self, key='VmHWM'):
        """The largest ``key`` of each process's tree, in MB."""
        stats = _proc_stats()
        out = {}
        for name in self.names:
            values = [0]
            for pid in _tree(stats, self._pid(name)):
                try:
                    with open('/proc/%d/status' % pid) as f:
                        values += [int(line.split()[1]) / 1024
                                   for line in f
                                   if line.startswith(key + ':')]
                except FileNotFoundError:
                    pass
            out[name] = max(values)
        return out


def _proc_stats():
    """{pid: stat(5) fields after the command name} of every process."""
    stats = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open('/proc/%s/stat' % entry) as f:
                    stats[int(entry)] = f.read().rsplit(')', 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                pass
    return stats


def _tree(stats, root):
    """``root`` and its descendants (field 4 of stat(5) is the ppid)."""
    found = [root]
    for pid in found:
        found += [p for p, f in stats.items() if int(f[1]) == pid]
    return [p for p in found if p in stats]


def _log_offsets(paths):
    return {p: os.path.getsize(p) if os.path.exists(p) else 0
            for p in paths}


def _log_since(path, offset):
    with open(path, errors='replace') as f:
        f.seek(offset)
        return f.read()


def _http_bytes(settings, offset):
    from ironic_bmc.drivers import boot_http_log
    total = artifacts = 0
    for line in _log_since(settings.log('nginx-access.log'),
                           offset).splitlines():
        parsed = boot_http_log.parse(line)
        if parsed:
            total += parsed[3]
            if '/deploy_' not in parsed[4] and '/bmc_modules' not in (
                    parsed[4]):
                artifacts += parsed[3]
    return total, artifacts


def _trigger(settings, uuids):
    """Ask for every deploy at once (8 API clients); {uuid: when}."""
    def one(uuid):
        cli = lab_client.get_client(settings)
        t = time.time()
        cli.node.set_provision_state(uuid, 'active')
        return uuid, t
    return dict(_parallel(one, uuids))


def _wait(settings, uuids, done, timeout):
    """Poll until every node is done or failed; (done, failed, seconds of
    the last one done after the first request)."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = _nodes(settings)
        failed = {u: nodes[u].get('last_error') or nodes[u][
            'provision_state'] for u in uuids
            if nodes[u]['provision_state'] in ('deploy failed', 'error')}
        finished = [u for u in uuids if done(nodes[u])]
        if len(finished) + len(failed) == len(uuids):
            return finished, failed
        if time.monotonic() > deadline:
            for u in uuids:
                if u not in failed and u not in finished:
                    failed[u] = 'not done within %d s: %s' % (
                        timeout, nodes[u]['provision_state'])
            return finished, failed
        time.sleep(1)


def _job_done(node):
    return (node['provision_state'] == 'active'
            and node['power_state'] == 'power off')


def _active(node):
    return node['provision_state'] == 'active'


def baseline_fake(settings, uuids, meter_names, timeout):
    """Ironic's own cost per deploy: the ``fake`` deploy interface."""
    cli = lab_client.get_client(settings)
    for uuid in uuids:
        cli.node.update(uuid, [{'op': 'replace', 'path': '/deploy_interface',
                                'value': 'fake'}])
    meter = Meter(settings, meter_names)
    t0 = time.time()
    _trigger(settings, uuids)
    done, failed = _wait(settings, uuids, _active, timeout)
    seconds = time.time() - t0
    cpu = sum(meter.used().values())
    _parallel(lambda u: lab_client.get_client(settings).node
              .set_provision_state(u, 'deleted'), uuids)
    _wait(settings, uuids, lambda n: n['provision_state'] == 'available',
          timeout)
    return {'cpu_ms_per_deploy': round(cpu * 1000 / len(uuids), 1),
            'seconds': round(seconds, 1), 'failures': len(failed)}


def _reports(settings, uuids):
    def one(uuid):
        cli = lab_client.get_client(settings)
        try:
            r = cli.node.vendor_passthru(uuid, 'run_report',
                                         http_method='GET')
        except Exception as exc:    # noqa: BLE001 - counted as a failure
            return uuid, {'state': 'unreadable: %s' % exc}
        return uuid, r.to_dict() if hasattr(r, 'to_dict') else r
    return dict(_parallel(one, uuids))


def _stage_end(report, name):
    return next((s['end'] for s in report.get('stages', ())
                 if s['name'] == name), None)


def run_once(settings, count, out=print, timeout=1800, agents_port=AGENTS_PORT,
             job_seconds=5.0):
    """Bring the scale lab up, run ``count`` concurrent container deploys,
    measure, tear it down; the result dict."""
    control.up(settings, out=None,
               hardware_types=ironic_conf.HARDWARE_TYPES + [DRIVER])
    try:
        _placeholder_boot_files(settings)
        image = container_job.push_demo_image(settings)
        out('scale: enrolling %d simulated nodes (%d conductor(s)) ...'
            % (count, settings.conductors))
        macs = enroll(settings, count)
        uuids = sorted(macs)
        conductors = [settings.conductor_process(i)
                      for i in range(settings.conductors)]
        out('scale: Ironic\'s fake deploy of the same nodes (baseline) ...')
        fake = baseline_fake(settings, uuids, conductors, timeout)
        set_container(settings, uuids, image)
        agents = sim_agent.SimAgents(settings.api_url, settings.ports.http,
                                     agents_port, job_seconds=job_seconds)
        for uuid, mac in macs.items():
            agents.add_node(uuid, mac)
        agents.start()
        logs = [settings.log(n + '.log') for n in conductors]
        offsets = _log_offsets(logs + [settings.log('nginx-access.log')])
        meter = Meter(settings, conductors + ['ironic-api'])
        samplers = [cpu_profile.Sampler(procs.pid_of(settings, name),
                                        settings.log(name + '.pyspy.raw'))
                    for name in conductors]
        out('scale: %d container deploys at once ...' % count)
        try:
            t0 = time.time()
            requested = _trigger(settings, uuids)
            done, failed = _wait(settings, uuids, _job_done, timeout)
            seconds = time.time() - t0
            used = meter.used()
            rss = meter.memory_mb()
        finally:
            profile = cpu_profile.combine([s.stop() for s in samplers])
            agents.stop()
        spread = collections.Counter(
            n.conductor for n in lab_client.get_client(settings).node.list(
                detail=True) if n.uuid in macs)
        for uuid in failed:
            failed[uuid] = '%s (%s)' % (failed[uuid], agents.describe(uuid))
        reports = _reports(settings, uuids)
        builds = {n: _log_since(p, offsets[p]).count(BUILT)
                  for n, p in zip(conductors, logs, strict=True)}
        http_total, http_artifacts = _http_bytes(
            settings, offsets[settings.log('nginx-access.log')])
    finally:
        control.down(settings, out=None)
    result = summarize(count, settings.conductors, requested, seconds, done,
                       failed, reports, used, rss, builds, fake, agents,
                       http_total, http_artifacts, profile)
    result['nodes_per_conductor'] = dict(spread)
    return result


def summarize(count, conductors, requested, seconds, done, failed, reports,
              used, rss, builds, fake, agents, http_total, http_artifacts,
              profile=None):
    for uuid, report in reports.items():
        if uuid in done and (report.get('state') != 'finished'
                             or report.get('workload_exit_code') != 0):
            failed[uuid] = 'run report %s, exit code %s' % (
                report.get('state'), report.get('workload_exit_code'))
    t_ready = sorted(
        _stage_end(r, protocol.STAGE_WORKLOAD_STARTED) - requested[u]
        for u, r in reports.items()
        if _stage_end(r, protocol.STAGE_WORKLOAD_STARTED))
    cpu = sum(v for k, v in used.items() if k != 'ironic-api')
    per_deploy = cpu * 1000 / count
    return {
        'nodes': count,
        'conductors': conductors,
        'seconds': round(seconds, 1),
        # Only the runs that ended as asked.
        'deploys_per_min': round(len(
            [u for u in done if u not in failed]) * 60 / seconds, 1),
        'conductor_cpu_ms_per_deploy': round(per_deploy, 1),
        'fake_deploy_cpu_ms_per_deploy': fake['cpu_ms_per_deploy'],
        'conductor_cpu_ms_per_deploy_over_fake': round(
            per_deploy - fake['cpu_ms_per_deploy'], 1),
        'api_cpu_ms_per_deploy': round(used['ironic-api'] * 1000 / count, 1),
        # The plugin's own share of it (see cpu_profile), or why unknown.
        'plugin_cpu_ms_per_deploy': (
            round(per_deploy * profile['plugin'], 1)
            if profile and 'plugin' in profile else None),
        'cpu_profile': profile or {'error': 'not sampled'},
        'conductor_peak_rss_mb': round(max(
            v for k, v in rss.items() if k != 'ironic-api'), 1),
        'builds_per_conductor': builds,
        'http_bytes': http_total,
        'http_artifact_bytes': http_artifacts,
        't_ready_p50_s': (round(t_ready[len(t_ready) // 2], 2)
                          if t_ready else None),
        't_ready_max_s': round(t_ready[-1], 2) if t_ready else None,
        'failures': len(failed),
        'failed': dict(list(failed.items())[:5]),
        'agent_errors': agents.errors[:5],
        'agent_stats': dict(agents.stats),
    }


def format_rows(runs):
    rows = []
    for r in runs:
        head = 'scale: %d nodes, %d conductor(s)' % (r['nodes'],
                                                     r['conductors'])
        rows += [
            (head, '%.1f deploys/min (%.1f s for all; T_ready p50 %s s, '
             'max %s s)' % (r['deploys_per_min'], r['seconds'],
                            r['t_ready_p50_s'], r['t_ready_max_s'])),
            ('  conductor CPU per deploy', '%.1f ms (Ironic\'s fake deploy '
             '%.1f ms; over it %.1f ms; goal <= 50)' % (
                 r['conductor_cpu_ms_per_deploy'],
                 r['fake_deploy_cpu_ms_per_deploy'],
                 r['conductor_cpu_ms_per_deploy_over_fake'])),
            ('  of it the plugin\'s own code (py-spy, goal <= 50)',
             _plugin_row(r)),
            ('  ironic-api CPU per deploy',
             '%.1f ms' % r['api_cpu_ms_per_deploy']),
            ('  conductor peak RSS', '%.1f MB' % r['conductor_peak_rss_mb']),
            ('  rootfs builds per conductor (goal 1)',
             ', '.join('%s %d' % kv for kv in
                       sorted(r['builds_per_conductor'].items()))),
            ('  HTTP-root bytes served', '%.1f MB (artifacts %.1f MB)' % (
                r['http_bytes'] / 1e6, r['http_artifact_bytes'] / 1e6)),
            ('  nodes per conductor (hash ring)', ', '.join(
                '%s %d' % kv for kv in sorted(
                    r.get('nodes_per_conductor', {}).items()))),
            ('  failures (goal 0)', str(r['failures'])),
        ]
    return rows


def _plugin_row(r):
    profile = r.get('cpu_profile') or {}
    if r.get('plugin_cpu_ms_per_deploy') is None:
        return 'unknown: %s' % profile.get('error', 'not sampled')
    top = ', '.join('%s %.0f%%' % (f.split(' ')[0], share * 100)
                    for f, share in profile['plugin_top'][:3])
    return '%.1f ms (%.1f%% of %d samples; most in %s)' % (
        r['plugin_cpu_ms_per_deploy'], profile['plugin'] * 100,
        profile['samples'], top)


def run(state_dir, count, conductor_counts=(1, 2), out=print):
    runs = []
    for conductors in conductor_counts:
        settings = lab_settings_for(state_dir, count, conductors)
        runs.append(run_once(settings, count, out=out))
    return runs


def json_fields(runs):
    """The bench's JSON keys: ``scale_*`` of the one-conductor run, and
    ``scale<N>c_*`` of the others."""
    out = {}
    for r in runs:
        prefix = 'scale_' if r['conductors'] == 1 else 'scale%dc_' % (
            r['conductors'])
        out.update({
            prefix + 'nodes': r['nodes'],
            prefix + 'deploys_per_min': r['deploys_per_min'],
            prefix + 'conductor_cpu_ms_per_deploy':
                r['conductor_cpu_ms_per_deploy'],
            prefix + 'conductor_cpu_ms_per_deploy_over_fake':
                r['conductor_cpu_ms_per_deploy_over_fake'],
            prefix + 'plugin_cpu_ms_per_deploy':
                r.get('plugin_cpu_ms_per_deploy'),
            prefix + 'conductor_peak_rss_mb': r['conductor_peak_rss_mb'],
            prefix + 'builds_per_image': max(
                r['builds_per_conductor'].values()),
            prefix + 'http_bytes': r['http_bytes'],
            prefix + 'failures': r['failures'],
        })
    return out
