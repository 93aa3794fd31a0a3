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

"""Vendor passthru of container nodes: run reports.

    openstack baremetal node passthru call --http-method GET NODE run_report
"""

import base64
import hashlib

from ironic.common import exception
from ironic.common.i18n import _
from ironic.drivers import base
from oslo_utils import uuidutils

from ironic_bmc import report as run_report
from ironic_bmc import run_files

METHODS = ('run_report', 'run_output')


class ContainerVendor(base.VendorInterface):
    """Run reports of container deploys."""

    def get_properties(self):
        return {}

    def validate(self, task, method=None, **kwargs):
        if method not in METHODS:
            raise exception.InvalidParameterValue(
                _('Unknown vendor method %(method)s; available: '
                  '%(methods)s') % {'method': method,
                                    'methods': ', '.join(METHODS)})
        result = kwargs.get('result')
        if result is not None and (not isinstance(result, str)
                                   or not result.startswith('/')):
            raise exception.InvalidParameterValue(
                _('result must be the absolute path of a result file inside '
                  'the container, as the report\'s "results" names it, got '
                  '%r') % (result,))
        deploy_id = kwargs.get('deploy_id')
        if deploy_id is not None and not uuidutils.is_uuid_like(deploy_id):
            raise exception.InvalidParameterValue(
                _('deploy_id must be the UUID of a deploy, got %r')
                % deploy_id)

    @base.passthru(['GET'], async_call=False, require_exclusive_lock=False,
                   description=_('The run report of the current or last '
                                 'container deploy of the node, or of the '
                                 'deploy named by "deploy_id".'))
    def run_report(self, task, deploy_id=None, **kwargs):
        node = task.node
        current = run_report.get(node)
        if current and (deploy_id is None
                        or current['deploy_id'] == deploy_id):
            return current
        found = run_report.load(node.uuid, deploy_id)
        if found is None:
            raise exception.NotFound(
                _('Node %(node)s has no run report%(which)s')
                % {'node': node.uuid,
                   'which': ' for deploy %s' % deploy_id if deploy_id
                   else ''})
        return found

    # POST too: clients send a GET without arguments (``passthru call
    # --arg result=...`` posts).
    @base.passthru(['GET', 'POST'], async_call=False,
                   require_exclusive_lock=False,
                   description=_('The whole kept output of the current or '
                                 'last container run of the node (or of '
                                 '"deploy_id"), or with "result" one of its '
                                 'result files, base64-encoded.'))
    def run_output(self, task, deploy_id=None, result=None, **kwargs):
        report = self.run_report(task, deploy_id=deploy_id)
        deploy_id = report['deploy_id']
        if result is None:
            data = run_files.read_output(task.node.uuid, deploy_id)
            section = report.get('output') or {}
            return {'deploy_id': deploy_id,
                    'output': data.decode('utf-8', errors='replace'),
                    'bytes': section.get('bytes', len(data)),
                    'dropped': section.get('dropped', 0)}
        data = run_files.read_result(task.node.uuid, deploy_id, result)
        return {'deploy_id': deploy_id, 'path': result, 'size': len(data),
                'sha256': hashlib.sha256(data).hexdigest(),
                'data_base64': base64.b64encode(data).decode('ascii')}
