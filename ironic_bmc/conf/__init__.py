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

"""Configuration of the conductor plugin and its runs API.

Registered once, here, on Ironic's global CONF when this package is
first imported; modules read it as ``from ironic_bmc.conf import CONF``.
One module per topic of the ``[container]`` group (as Ironic keeps one
per group in ``ironic/conf/``), and ``api`` for ``[container_api]``;
:mod:`.opts` lists them for ``oslo-config-generator --namespace
ironic_bmc``.
"""

from ironic.conf import CONF

from ironic_bmc.conf import api
from ironic_bmc.conf import boots
from ironic_bmc.conf import groups
from ironic_bmc.conf import images
from ironic_bmc.conf import kernels
from ironic_bmc.conf import nfs
from ironic_bmc.conf import power
from ironic_bmc.conf import reports
from ironic_bmc.conf import runs

GROUP = 'container'
API_GROUP = api.GROUP

#: The [container] options, topic by topic, in the reference's order.
TOPICS = (images, boots, runs, power, nfs, reports, kernels, groups)


def register_opts(conf):
    for topic in TOPICS:
        conf.register_opts(topic.opts, group=GROUP)
    conf.register_opts(api.opts, group=API_GROUP)


register_opts(CONF)
