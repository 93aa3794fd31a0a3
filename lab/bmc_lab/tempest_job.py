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

"""``bmc-lab tempest``: the project's tempest plugin run against the lab's
cloud, with what the run needs from the QEMU side of the lab first (the
agent ramdisk, the demo image in the registry, the nodes free).  The
cloud side of the run (tempest.conf, ``tempest run``, its totals) is
:mod:`bmc_lab.cloud.tempest_run`, which imports nothing of this side."""

from bmc_lab import agent
from bmc_lab.cloud import tempest_run
from bmc_lab import container_job
from bmc_lab import tenant_job


def run_on_lab(settings, regex=tempest_run.DEFAULT_REGEX, out=print):
    """The demo container in the lab's registry (the scenario test boots
    it), the nodes free, then tempest_run.run().  Returns its result."""
    agent.ensure(settings, out=out)
    reference = container_job.push_demo_image(settings)
    tenant_job.wait_available(settings)
    code, counts, log = tempest_run.run(settings, reference, regex, out=out)
    out('tempest: %s (exit %s); output: %s' % (
        ', '.join('%s %d' % kv for kv in sorted(counts.items()))
        or 'no tests ran', code, log))
    return code, counts, log
