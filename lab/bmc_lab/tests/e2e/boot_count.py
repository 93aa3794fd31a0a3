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

"""Node boots per e2e test: what the tier's time goes to.

libvirt writes a "starting up" line to a domain's log each time it starts
its QEMU process, i.e. at every power-on through the node's BMC.  A test's
boots are the lines added to this worker's lab domains' logs between its
setup and its teardown; each test's count goes into its report (the
``node_boots`` property of the JUnit XML file) and the session prints the
total and the tests that booted most.
"""

import glob
import os

import pytest

from bmc_lab.tests import labfixture

#: Where libvirtd (qemu:///system) writes each domain's log.
QEMU_LOG_DIR = '/var/log/libvirt/qemu'
PROPERTY = 'node_boots'
BEFORE = pytest.StashKey[int]()

#: nodeid -> boots, as the reports came in.
BOOTS = {}


def boots():
    """QEMU starts of this worker's e2e lab domains so far, or None."""
    if not os.path.isdir(QEMU_LOG_DIR):
        return None
    prefix = labfixture.lab_name('e2e', labfixture.worker_index())
    total = 0
    for path in glob.glob(os.path.join(QEMU_LOG_DIR,
                                       prefix + '-node-*.log')):
        try:
            with open(path, 'rb') as f:
                total += sum(1 for line in f if b': starting up ' in line)
        except FileNotFoundError:
            continue
    return total


def collect(nodeid, user_properties):
    for name, value in user_properties:
        if name == PROPERTY:
            BOOTS[nodeid] = BOOTS.get(nodeid, 0) + int(value)


def lines(top=10):
    if not BOOTS:
        return ['not counted (no %s)' % QEMU_LOG_DIR]
    out = ['%d node boots in %d tests; most:' % (sum(BOOTS.values()),
                                                 len(BOOTS))]
    ranked = sorted(BOOTS.items(), key=lambda kv: -kv[1])[:top]
    out += ['  %3d  %s' % (n, nodeid) for nodeid, n in ranked if n]
    return out
