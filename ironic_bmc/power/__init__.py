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

"""Whole-node power measured through the BMC, on the conductor side.

* :mod:`.readers` -- one reading in watts from a node's BMC: IPMI DCMI
  Get Power Reading (ipmitool) or Redfish (sushy); ``reader_for_node``.
* :mod:`.sampler` -- polls a reader in a thread per node and keeps the
  (timestamp, watts) samples and named marks (workload start/end).
* :mod:`.energy` -- integrates samples to joules over the run and over
  the workload window, for the run report.
"""
