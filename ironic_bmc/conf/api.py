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

"""[container_api] options: the container runs API (ironic-bmc-api)."""

from oslo_config import cfg

GROUP = 'container_api'

opts = [
    # All addresses by default, as ironic-api's [api]host_ip.
    cfg.HostAddressOpt('host_ip', default='0.0.0.0',  # noqa: S104
                       help='Address the container runs API '
                            '(ironic-bmc-api) listens on.'),
    cfg.PortOpt('port', default=6388,
                help='Port the container runs API listens on.'),
    cfg.StrOpt('auth_strategy', default='keystone',
               choices=[('keystone', 'Keystone tokens, checked by '
                                     'keystonemiddleware with the '
                                     '[keystone_authtoken] options.'),
                        ('noauth', 'No authentication: every request is '
                                   'the operator\'s.  For tests only.')],
               help='How callers of the container runs API are '
                    'authenticated.'),
    cfg.IntOpt('max_list', default=200, min=1, max=10000,
               help='Most runs one list request returns.'),
    cfg.IntOpt('workers', default=16, min=1, max=256,
               help='Threads of the container runs API\'s WSGI server.'),
]
