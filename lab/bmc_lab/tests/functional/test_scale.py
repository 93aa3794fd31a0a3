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

"""The scale benchmark's path, small: concurrent container deploys
through two real conductors (MariaDB, RabbitMQ, the hash ring) on nodes
whose machines and agents are simulated (bmc_lab.sim_agent)."""

from bmc_common import protocol
from bmc_lab import scale_bench
from bmc_lab import settings as lab_settings
from bmc_lab.tests import labfixture

NODES = 4


def test_concurrent_container_jobs_through_two_conductors():
    settings = labfixture.lab_settings_for(
        'functional', profile=lab_settings.PROFILE_SCALED, nodes=0,
        conductors=2)
    lines = []
    result = scale_bench.run_once(settings, NODES, out=lines.append,
                                  timeout=300, agents_port=0,
                                  job_seconds=2.0)
    assert result['failures'] == 0, result['failed']
    assert not result['agent_errors'], result['agent_errors']
    # Every node was deployed, ran its job and was powered off; its run
    # report says so (checked by summarize).
    assert sum(result['nodes_per_conductor'].values()) == NODES
    assert result['agent_stats']['lookups'] == NODES
    assert result['agent_stats'][
        'command:%s' % protocol.STEP_STAGE_ROOTFS] == NODES
    # One image: each conductor that deployed a node built it once.
    builds = result['builds_per_conductor']
    assert set(builds.values()) <= {0, 1} and sum(builds.values()) >= 1
    assert sum(builds.values()) == len(result['nodes_per_conductor'])
    assert result['http_artifact_bytes'] > 0
    assert result['deploys_per_min'] > 0
    assert result['conductor_cpu_ms_per_deploy'] > 0
    assert result['t_ready_max_s'] is not None
