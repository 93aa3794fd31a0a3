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

"""[container] options: run groups (network, size, barrier, polling)."""

from oslo_config import cfg

opts = [
    # --- run groups (one job across nodes) ---
    cfg.StrOpt('group_physical_network', default='bmc-group',
               help=('The physical_network of the port that joins a node '
                      'to the run-group network: a second NIC on a segment '
                      'only the group members share.  The port\'s '
                      'extra/bmc_group_address is the node\'s address '
                      'there (A.B.C.D/prefix).  A node without such a port '
                      'cannot deploy with instance_info/container_group.')),
    cfg.IntOpt('group_max_size', default=32, min=2, max=32,
               help=('The most nodes one run group may have.  Each '
                     'member keeps the group\'s plan (every member\'s '
                     'address and host key) in its driver_internal_info, '
                     'a 64 KiB column: 32 members take about 24 KiB.')),
    cfg.IntOpt('group_barrier_timeout', default=600, min=30, max=86400,
               help=('Seconds the members of a run group that have staged '
                      'their root wait for the others; then the whole group '
                      'fails, naming the members that did not arrive.  Keep '
                      'it below [conductor]deploy_callback_timeout, which '
                      'fails a waiting node with a less helpful message.')),
    cfg.IntOpt('group_poll_interval', default=10, min=1, max=600,
               help=('Seconds between the checks of the run groups this '
                      'conductor holds nodes of: members waiting at the '
                      'barrier (a lost wake-up, the timeout, a member that '
                      'failed) and running groups whose member ended.')),
    cfg.IntOpt('group_peer_wait', default=120, min=0, max=3600,
               help=('With the ssh launcher: seconds rank 0 waits for '
                      'every other member\'s sshd before its command '
                      'starts.')),
]
