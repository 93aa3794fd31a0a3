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

"""A lab node as a machine without a BMC, for a while.

What an operator does for such a machine: the ``container-wol`` hardware
type (``wol`` power, ``noop`` management), ``driver_info/wol_host`` and
``wol_port`` where its magic packets go (here the lab's listener,
:mod:`bmc_lab.wol_listener`).  :func:`wol_node` switches a lab node over
and, when its block ends, back to its virtual BMC, AVAILABLE with no run,
as the lab's other tests expect (as :func:`bmc_lab.warm_run.warm_node`
does).
"""

import contextlib

from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import logcursor
from bmc_lab import nodes
from bmc_lab import wol_listener

#: The node's fields the switch changes (the API masks no secret here;
#: driver_info is rebuilt, its IPMI password being masked).
_SAVED = ('driver', 'power_interface', 'management_interface',
          'boot_interface', 'deploy_interface', 'vendor_interface')


def _patch(fields, driver_info):
    patch = [{'op': 'replace', 'path': '/' + k, 'value': v}
             for k, v in fields.items()]
    patch.append({'op': 'replace', 'path': '/driver_info',
                  'value': driver_info})
    return patch


def listener_cursor(settings):
    """Mark the listener's log now; ``wol_listener.events(c.text())`` are
    the packets it got since."""
    return logcursor.Cursor(wol_listener.log_path(settings))


@contextlib.contextmanager
def wol_node(settings, index=0, out=print):
    """Lab node ``index`` as ``container-wol`` inside the block (its
    container deploys boot on the listener's start of its domain)."""
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    container_job.reclaim(settings, index, out=out)
    node = cli.node.get(name, fields=list(_SAVED))
    saved = {k: getattr(node, k) for k in _SAVED}
    out('Switching %s to %s (Wake-on-LAN to udp://127.0.0.1:%d) ...'
        % (name, nodes.WOL_DRIVER, settings.ports.wol))
    cli.node.update(name, _patch(dict(
        nodes.WOL_INTERFACES, driver=nodes.WOL_DRIVER,
        boot_interface='ipxe', deploy_interface='container',
        vendor_interface='container'),
        nodes.wol_driver_info(settings, index)))
    try:
        yield cli
    finally:
        container_job.reclaim(settings, index, out=out)
        out('Switching %s back to %s' % (name, saved['driver']))
        cli.node.update(name, _patch(saved, nodes.ipmi_driver_info(
            settings, index)))
