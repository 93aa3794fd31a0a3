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

The scale lab and its nodes are :mod:`bmc_lab.scale_lab`'s, the
processes' CPU and memory :mod:`bmc_lab.proc_meter`'s, the numbers and
how they print :mod:`bmc_lab.scale_report`'s.
"""

import collections
import os
import time

from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import control
from bmc_lab import cpu_profile
from bmc_lab import ironic_conf
from bmc_lab import proc_meter
from bmc_lab import procs
from bmc_lab import scale_lab
from bmc_lab import scale_report
from bmc_lab import sim_agent

#: The simulated agents listen on a free port of 127.0.0.1 (their callback
#: URLs name it).
AGENTS_PORT = 0
#: The conductor logs this once per rootfs artifact it builds.
BUILT = 'Built rootfs artifact'


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


def baseline_fake(settings, uuids, meter_names, timeout):
    """Ironic's own cost per deploy: the ``fake`` deploy interface."""
    cli = lab_client.get_client(settings)
    for uuid in uuids:
        cli.node.update(uuid, [{'op': 'replace', 'path': '/deploy_interface',
                                'value': 'fake'}])
    meter = proc_meter.Meter(settings, meter_names)
    t0 = time.time()
    scale_lab.trigger(settings, uuids)
    done, failed = scale_lab.wait(settings, uuids, scale_lab.active, timeout)
    seconds = time.time() - t0
    cpu = sum(meter.used().values())
    scale_lab.parallel(lambda u: lab_client.get_client(settings).node
                       .set_provision_state(u, 'deleted'), uuids)
    scale_lab.wait(settings, uuids,
                   lambda n: n['provision_state'] == 'available', timeout)
    return {'cpu_ms_per_deploy': round(cpu * 1000 / len(uuids), 1),
            'seconds': round(seconds, 1), 'failures': len(failed)}


def run_once(settings, count, out=print, timeout=1800, agents_port=AGENTS_PORT,
             job_seconds=5.0):
    """Bring the scale lab up, run ``count`` concurrent container deploys,
    measure, tear it down; the result dict."""
    control.up(settings, out=None,
               hardware_types=ironic_conf.HARDWARE_TYPES + [scale_lab.DRIVER])
    try:
        scale_lab.placeholder_boot_files(settings)
        image = container_job.push_demo_image(settings)
        out('scale: enrolling %d simulated nodes (%d conductor(s)) ...'
            % (count, settings.conductors))
        macs = scale_lab.enroll(settings, count)
        uuids = sorted(macs)
        conductors = [settings.conductor_process(i)
                      for i in range(settings.conductors)]
        out('scale: Ironic\'s fake deploy of the same nodes (baseline) ...')
        fake = baseline_fake(settings, uuids, conductors, timeout)
        scale_lab.set_container(settings, uuids, image)
        agents = sim_agent.SimAgents(settings.api_url, settings.ports.http,
                                     agents_port, job_seconds=job_seconds)
        for uuid, mac in macs.items():
            agents.add_node(uuid, mac)
        agents.start()
        logs = [settings.log(n + '.log') for n in conductors]
        offsets = _log_offsets(logs + [settings.log('nginx-access.log')])
        meter = proc_meter.Meter(settings, conductors + ['ironic-api'])
        samplers = [cpu_profile.Sampler(procs.pid_of(settings, name),
                                        settings.log(name + '.pyspy.raw'))
                    for name in conductors]
        out('scale: %d container deploys at once ...' % count)
        try:
            t0 = time.time()
            requested = scale_lab.trigger(settings, uuids)
            done, failed = scale_lab.wait(settings, uuids,
                                          scale_lab.job_done, timeout)
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
        reports = scale_lab.run_reports(settings, uuids)
        builds = {n: _log_since(p, offsets[p]).count(BUILT)
                  for n, p in zip(conductors, logs, strict=True)}
        http_total, http_artifacts = _http_bytes(
            settings, offsets[settings.log('nginx-access.log')])
    finally:
        control.down(settings, out=None)
    result = scale_report.summarize(
        count, settings.conductors, requested, seconds, done, failed,
        reports, used, rss, builds, fake, agents, http_total,
        http_artifacts, profile)
    result['nodes_per_conductor'] = dict(spread)
    return result


def run(state_dir, count, conductor_counts=(1, 2), out=print):
    runs = []
    for conductors in conductor_counts:
        settings = scale_lab.lab_settings_for(state_dir, count, conductors)
        runs.append(run_once(settings, count, out=out))
    return runs
