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

"""Hardware types that offer the container deploy interface.

Ironic accepts only the exact interface classes a hardware type lists, so
the ``container`` deploy and vendor interfaces need hardware types of
their own: ``ipmi`` and ``redfish`` plus these two;
``container-wol``, for machines without a BMC: woken by Wake-on-LAN and
powered off by their agent (:mod:`wol_power`), with no management
interface (the firmware is set to boot from the network first, by hand);
and ``container-fake-hardware``: Ironic's ``fake-hardware`` (power and
management that only record what they are asked) with them, for API
tests and the scale benchmark, whose nodes and agents are simulated.  It
boots through ``ipxe`` like the others: the conductor renders and
publishes every node's boot files for real.
"""

from ironic.drivers import fake_hardware
from ironic.drivers import generic
from ironic.drivers import ipmi
from ironic.drivers.modules import ipxe
from ironic.drivers.modules import noop_mgmt
from ironic.drivers import redfish

from ironic_bmc.drivers import container_deploy
from ironic_bmc.drivers import unikernel_deploy
from ironic_bmc.drivers import vendor
from ironic_bmc.drivers import wol_power


class _ContainerInterfaces:
    """The container deploy and vendor interfaces, ahead of the base's."""

    @property
    def supported_deploy_interfaces(self):
        """Container deploy first, then everything the base type offers."""
        return ([container_deploy.ContainerDeploy,
                 unikernel_deploy.UnikernelDeploy]
                + super().supported_deploy_interfaces)

    @property
    def supported_vendor_interfaces(self):
        """Run reports first, then everything the base type offers."""
        return [vendor.ContainerVendor] + super().supported_vendor_interfaces


class ContainerIPMIHardware(_ContainerInterfaces, ipmi.IPMIHardware):
    """IPMI hardware that can run container images from RAM."""


class ContainerRedfishHardware(_ContainerInterfaces,
                               redfish.RedfishHardware):
    """Redfish hardware that can run container images from RAM."""


class ContainerWakeOnLanHardware(_ContainerInterfaces,
                                 generic.GenericHardware):
    """Machines without a BMC that can run container images from RAM."""

    @property
    def supported_boot_interfaces(self):
        """iPXE, which the firmware reaches by booting the network."""
        return [ipxe.iPXEBoot]

    @property
    def supported_management_interfaces(self):
        """None to talk to: the boot order is the firmware's own."""
        return [noop_mgmt.NoopManagement]

    @property
    def supported_power_interfaces(self):
        """Wake-on-LAN on, the agent off."""
        return [wol_power.WakeOnLanPower]


class ContainerFakeHardware(_ContainerInterfaces,
                            fake_hardware.FakeHardware):
    """Fake power and management with the container interfaces (tests
    and the scale benchmark; never for real machines)."""
