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

"""A warm lab node: fast track on, cleaned, its agent left up.

What an operator does (``driver_info/fast_track``, ``automated_clean``,
``manage`` then ``provide``), for the benchmark and the e2e tier;
:func:`warm_node` undoes the node's settings when it ends, so the node's
next runs are cold and without cleaning, as the lab's other tests expect.
"""

import contextlib

from bmc_lab import client as lab_client
from bmc_lab import container_job


def clean(settings, index=0, out=print, timeout=600):
    """manage, then provide: cleaning boots the agent (and, with fast
    track, leaves it up)."""
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    watcher = lab_client.StateWatcher(cli, name)
    out('Cleaning %s (manage, provide) ...' % name)
    cli.node.set_provision_state(name, 'manage')
    watcher.wait('manageable', 120)
    cli.node.set_provision_state(name, 'provide')
    watcher.wait('available', timeout, fail_states=('clean failed',))
    return cli.node.get(name)


@contextlib.contextmanager
def warm_node(settings, index=0, out=print):
    """Fast track and automated cleaning on lab node ``index`` inside the
    block; the node is AVAILABLE with no run when the block ends."""
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    container_job.reclaim(settings, index, out=out)
    cli.node.update(name, [
        # Cleaning boots the agent through the node's deploy interface:
        # the container one (the lab's nodes are enrolled with direct).
        {'op': 'add', 'path': '/deploy_interface', 'value': 'container'},
        {'op': 'add', 'path': '/vendor_interface', 'value': 'container'},
        {'op': 'add', 'path': '/driver_info/fast_track', 'value': True},
        {'op': 'replace', 'path': '/automated_clean', 'value': True}])
    try:
        yield cli
    finally:
        cli.node.update(name, [
            {'op': 'remove', 'path': '/driver_info/fast_track'},
            {'op': 'replace', 'path': '/automated_clean', 'value': None}])
        container_job.reclaim(settings, index, out=out)
