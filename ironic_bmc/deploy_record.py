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

"""The container deploy's own record on its node.

What one deploy decided and must remember across its steps, its
heartbeats and a conductor take-over (the artifact, the kernel
arguments, the group's member record, the stream's cache size, ...)
lives in the node's ``driver_internal_info`` under one key, ``KEY``.
The deploy step creates it; the undeploy's clean-up removes it.  Every
module that reads or writes it names it from here, so no layer above
the drivers (the groups, the kernel profiles) imports a driver for it.
"""

#: driver_internal_info key of the container deploy's record.
KEY = 'bmc_deploy'


def get(node):
    """The node's deploy record, or an empty dict when there is none."""
    return node.driver_internal_info.get(KEY) or {}


def update(node, **fields):
    """Set ``fields`` in the node's deploy record (which must exist); the
    caller saves the node."""
    info = node.driver_internal_info[KEY]
    info.update(fields)
    node.set_driver_internal_info(KEY, info)
    return info
