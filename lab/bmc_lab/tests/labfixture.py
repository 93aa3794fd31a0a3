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

"""Lab settings for the test tiers.

Each tier gets its own state directory and its own ports, so a demo lab
(default ports) and the tests never collide.  State directories stay
after a run: their ``logs/`` is what to read when a test fails.
"""

import os

from bmc_lab import settings as lab_settings

BASE_DIR = os.environ.get('BMC_LAB_TEST_DIR', '/tmp/bmc-lab-tests')

PORT_SETS = {
    'functional': lab_settings.Ports(ironic_api=16385, http=18080,
                                     registry=15050, nfs=12149,
                                     ipmi_base=16230, agent_base=19900),
    'e2e': lab_settings.Ports(ironic_api=26385, http=28080,
                              registry=25050, nfs=12249,
                              ipmi_base=26230, agent_base=29900),
}


def lab_settings_for(tier, profile=lab_settings.PROFILE_EMBEDDED, nodes=1,
                     **kwargs):
    return lab_settings.Settings(
        state_dir=os.path.join(BASE_DIR, '%s-%s' % (tier, profile)),
        profile=profile, nodes=nodes, ports=PORT_SETS[tier],
        name='bmc-%s' % tier, **kwargs)
