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

"""[container] options: the BMC power samples of a run."""

from oslo_config import cfg

opts = [
    cfg.BoolOpt('power_sampling', default=True,
                help='Sample the node\'s power through its BMC (IPMI DCMI '
                     'or Redfish) during container runs and report the '
                     'energy used.'),
    cfg.FloatOpt('power_sample_period', default=2.0, min=0.2,
                 help='Seconds between two BMC power readings.  IPMI '
                      'readings go through Ironic\'s ipmitool path, so '
                      'they are never closer than '
                      '[ipmi]min_command_interval to any other command '
                      'sent to the same BMC.'),
    cfg.IntOpt('power_series_points', default=1000, min=10, max=100000,
               help='Power samples of a run kept beside its report for '
                    'the power chart; more are averaged down to this '
                    'many.'),
]
