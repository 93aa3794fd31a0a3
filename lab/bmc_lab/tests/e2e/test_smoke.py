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

"""Smoke: a real QEMU node booted through IPMI (virtualbmc) and iPXE.

Ironic's own ``ramdisk`` deploy interface and ``ipxe`` boot interface
deploy the lab kernel and a tiny initrd onto a lab node of the embedded
profile, on the lab that profile's other tests use (labpool).  The other
profiles are not smoked apart: their first tests boot their nodes
through the same IPMI and iPXE, and check the power is off after the
undeploy (``scaled``: test_takeover; ``cloud``: test_tenant's Nova job),
so a smoke boot there showed nothing those do not (two boots, about six
minutes of CI).  The node
proves it ran the initrd by printing the nonce from its kernel command
line on the serial console and fetching a call-back URL from the lab's
HTTP server.
"""

import pytest

from bmc_lab import smoke


@pytest.mark.parametrize('profile', ['embedded'])
def test_ramdisk_deploy_boots_node(lab_pool, profile):
    # (labpool.SMOKE_GROUPS runs each with its profile's other tests.)
    settings = lab_pool.get(profile)
    assert settings.profile == profile
    result = smoke.run(settings, index=0)
    print(result)
    # Ironic served the kernel and initrd, the node called back ...
    assert '/kernel' in result['http_requests_seen']
    assert '/ramdisk' in result['http_requests_seen']
    assert '/callback/' + result['nonce'] in result['http_requests_seen']
    # ... went through deploying to active ...
    states = [t[1] for t in result['transitions']]
    assert 'active' in states
    # ... and undeploy left it powered off, as its BMC tells, with the
    # deploy interface it had before.
    assert result['power_after_undeploy'] == 'off'
    assert (result['deploy_interface_after']
            == result['deploy_interface_before'])
