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

"""The python-openstackclient plugin: ``openstack baremetal container``.

OSC finds it through the ``openstack.cli.extension`` entry point and
its commands under ``openstack.baremetal_container.v1``; the client it
makes (``client_manager.baremetal_container``) is a
:class:`ironic_bmc_client.runs.RunsClient` on OSC's session, for the
``baremetal-container`` endpoint of the catalog, or the one
``baremetal_container_endpoint_override`` sets in clouds.yaml.
"""

from osc_lib import utils

from ironic_bmc_client import runs

API_NAME = 'baremetal_container'
API_VERSION_OPTION = 'os_baremetal_container_api_version'
DEFAULT_API_VERSION = '1'
API_VERSIONS = {'1': 'ironic_bmc_client.runs.RunsClient'}


def make_client(instance):
    """The runs API client of an OSC session (a ClientManager)."""
    config = instance.get_configuration() or {}
    return runs.RunsClient(
        instance.session, service_type=runs.SERVICE_TYPE,
        interface=instance.interface, region_name=instance.region_name,
        endpoint_override=config.get('%s_endpoint_override' % API_NAME))


def build_option_parser(parser):
    """OSC's global option for this API's version."""
    parser.add_argument(
        '--os-baremetal-container-api-version',
        metavar='<baremetal-container-api-version>',
        default=utils.env('OS_BAREMETAL_CONTAINER_API_VERSION',
                          default=DEFAULT_API_VERSION),
        choices=sorted(API_VERSIONS),
        help='Bare-metal container runs API version, default=%s '
             '(Env: OS_BAREMETAL_CONTAINER_API_VERSION)'
             % DEFAULT_API_VERSION)
    return parser
