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

"""Hostile nodes against a real conductor: once its workload runs, a
node whose workload answers in its agent's place (bmc_lab.sim_agent's
hostile modes) sends a gzip bomb, a 60 MB status, a status of the wrong
types, a result file nobody asked for.  Each of those runs ends
``failed`` with the reason and its node powered off; an honest node
deployed at the same time finishes its job; the conductor stays up, its
memory within a bound."""

from bmc_lab import container_job
from bmc_lab import control
from bmc_lab import ironic_conf
from bmc_lab import proc_meter
from bmc_lab import scale_lab
from bmc_lab import settings as lab_settings
from bmc_lab import sim_agent
from bmc_lab.tests import labfixture

#: What each hostile node's run report says.
WHY = {
    'bomb': 'the collected output: expands to more than 16777216 bytes',
    'huge': 'reply refused: body larger than',
    'types': "exit_code is '0; trust me'",
    'unasked': "result files the run did not ask for: '/etc/shadow'",
}
#: The conductor's peak memory may grow by at most this much (MiB) over
#: its size before the deploys: one reply is read up to about 44 MiB
#: (the output and result bounds as base64), and held a few times over
#: while it is decoded.  (Measured: 145 MiB before, 202 MiB peak.)
RSS_GROWTH_MAX_MB = 250


def test_hostile_nodes_fail_their_own_runs_and_nothing_else():
    settings = labfixture.lab_settings_for(
        'functional', profile=lab_settings.PROFILE_SCALED, nodes=0,
        conductors=1)
    modes = list(sim_agent.HOSTILE) + [None]
    control.up(settings, out=None, hardware_types=(
        ironic_conf.HARDWARE_TYPES + [scale_lab.DRIVER]))
    try:
        scale_lab.placeholder_boot_files(settings)
        image = container_job.push_demo_image(settings)
        macs = scale_lab.enroll(settings, len(modes))
        uuids = sorted(macs)
        hostile = dict(zip(uuids, modes, strict=True))
        scale_lab.set_container(settings, uuids, image)
        agents = sim_agent.SimAgents(settings.api_url, settings.ports.http,
                                     0, job_seconds=2.0)
        for uuid, mac in macs.items():
            agents.add_node(uuid, mac)
            agents.nodes[uuid].hostile = hostile[uuid]
        agents.start()
        conductor = settings.conductor_process(0)
        meter = proc_meter.Meter(settings, [conductor])
        before = meter.memory_mb('VmRSS')[conductor]
        try:
            scale_lab.trigger(settings, uuids)
            done, failed = scale_lab.wait(settings, uuids,
                                          scale_lab.job_done, 300)
            peak = meter.memory_mb('VmHWM')[conductor]
        finally:
            agents.stop()
        reports = scale_lab.run_reports(settings, uuids)
    finally:
        control.down(settings, out=None)

    print('conductor memory: %.0f MiB before the deploys, peak %.0f MiB'
          % (before, peak))
    # Every node was deployed and ended powered off: none stayed on, and
    # the conductor answered to the end.
    assert failed == {}, failed
    assert sorted(done) == uuids
    for uuid in uuids:
        report = reports[uuid]
        mode = hostile[uuid]
        if mode is None:
            assert report['state'] == 'finished', report
            assert report['workload_exit_code'] == 0
            continue
        assert report['state'] == 'failed', (mode, report)
        assert WHY[mode] in (report.get('error') or ''), (mode, report)
        assert uuid in report['error']
    assert peak - before < RSS_GROWTH_MAX_MB, (before, peak)
