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

"""The noise unikernel on a lab node, through Ironic (operator).

The image is built from ``unikernel/`` (gcc, seconds) into the lab's
images directory, which the conductor may read ``file://`` URLs from;
the node gets the ``unikernel`` deploy interface for the run and the
``container`` one back after it (its run report is read through the
container vendor passthru, as a container run's).
"""

import os

from bmc_common import protocol
from bmc_lab import client as lab_client
from bmc_lab import container_job
from bmc_lab import procs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, 'unikernel', 'build.sh')
IMAGE = 'bmc-noise-unikernel.elf'


def build(settings, out=print):
    """Build the noise unikernel into the lab's images; its path."""
    os.makedirs(settings.images_dir, exist_ok=True)
    out('Building the noise unikernel (%s) ...' % BUILD)
    procs.run(['bash', BUILD, settings.images_dir], 'unikernel build',
              log_path=settings.log('unikernel-build.log'))
    return os.path.join(settings.images_dir, IMAGE)


def _newest_id(cli, name):
    try:
        report = cli.node.vendor_passthru(name, 'run_report',
                                          http_method='GET')
    except Exception:
        return None     # no run yet
    report = report.to_dict() if hasattr(report, 'to_dict') else report
    return (report or {}).get('deploy_id')


def run(settings, args, index=0, out=print, timeout=600):
    """Boot the noise unikernel on lab node ``index`` with ``args``; its
    finished (or failed) run report.  The node is undeployed after, and
    has the container deploy interface again."""
    image = build(settings, out=out)
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    if cli.node.get(name).provision_state != 'available':
        container_job.reclaim(settings, index, out=out)
    previous = _newest_id(cli, name)
    cli.node.update(name, [
        {'op': 'add', 'path': '/deploy_interface', 'value': 'unikernel'},
        {'op': 'add', 'path': '/vendor_interface', 'value': 'container'},
        {'op': 'add', 'path': '/instance_info/%s' % protocol.II_UNIKERNEL,
         'value': 'file://' + image},
        {'op': 'add', 'path': '/instance_info/%s'
         % protocol.II_UNIKERNEL_ARGS, 'value': args}])
    out('Booting the noise unikernel (%s) on %s ...' % (args, name))
    try:
        cli.node.set_provision_state(name, 'active')
        lab_client.StateWatcher(cli, name).wait('active', timeout)
        def ended(report):
            """the unikernel run's end"""
            return (report.get('deploy_id') != previous
                    and report.get('kind') == 'unikernel'
                    and report.get('state') in ('finished', 'failed'))
        return container_job.wait_report(settings, index, timeout=timeout,
                                         until=ended)
    finally:
        container_job.undeploy(settings, index)
        container_job.use_container_interfaces(settings, name)
