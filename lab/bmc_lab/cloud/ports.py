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

"""TCP ports of the cloud profile's API services, all on 127.0.0.1."""

import dataclasses


@dataclasses.dataclass
class CloudPorts:
    """The usual OpenStack ports by default; the test tiers shift them
    (``CloudPorts.shifted(10000)``) so they never meet a running lab."""

    keystone: int = 5000
    glance: int = 9292
    placement: int = 8778
    nova: int = 8774
    neutron: int = 9696
    horizon: int = 8000

    @classmethod
    def shifted(cls, offset):
        """Every default port plus ``offset``."""
        return cls(**{f.name: f.default + offset
                      for f in dataclasses.fields(cls)})

    def named(self, horizon=False):
        """Ports with a human name each, for procs.check_ports_free."""
        names = {
            'Keystone API': self.keystone,
            'Glance API': self.glance,
            'Placement API': self.placement,
            'Nova API': self.nova,
            'Neutron API': self.neutron,
        }
        if horizon:
            names['Horizon'] = self.horizon
        return names
