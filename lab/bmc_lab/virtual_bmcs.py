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

"""The nodes' virtual BMCs, one process per node.

Each is ``python -m bmc_lab.dcmi_bmc`` on the node's IPMI port (UDP,
127.0.0.1): virtualbmc's power and boot-device commands on the node's
libvirt domain, plus DCMI power readings.  Started, waited for and
stopped here; the supervisor starts one that died again.
"""

import sys
import time

from bmc_lab import host_libvirt
from bmc_lab import procs


def bmc_name(index):
    return 'bmc-%d' % index


def start_bmc(settings, index, timeout=30):
    """One virtual BMC per node: virtualbmc's, answering DCMI power too."""
    name = bmc_name(index)
    if procs.running(settings, name):
        return
    port = settings.ports.ipmi(index)
    proc = procs.spawn(settings, name, [
        sys.executable, '-m', 'bmc_lab.dcmi_bmc',
        '--domain', settings.node_name(index), '--port', str(port),
        '--address', '127.0.0.1', '--username', 'admin',
        '--password', 'password', '--libvirt-uri', host_libvirt.LIBVIRT_URI])
    deadline = time.monotonic() + timeout
    while not procs.udp_port_in_use(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise procs.LabError(
                'the virtual BMC of node %d did not start on UDP '
                '127.0.0.1:%d; see %s' % (index, port,
                                          settings.log(name + '.log')))
        time.sleep(0.2)


def stop_bmc(settings, index):
    return procs.stop(settings, bmc_name(index))
