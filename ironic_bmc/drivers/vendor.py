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

"""Vendor passthru of container nodes: run reports, kernel builds.

    openstack baremetal node passthru call --http-method GET NODE run_report
    openstack baremetal node passthru call --http-method GET NODE run_group
    openstack baremetal node passthru call NODE kernel_build \
        --arg variant=gcov
    openstack baremetal node passthru call NODE kernel_build_status \
        --arg build_id=ID

Node vendor passthru is the operator's under Ironic's default policy
(``baremetal:node:vendor_passthru``: system admins).  A kernel build runs
on the conductor of the node, where that node fetches its boot files;
it holds no lock of the node (:mod:`ironic_bmc.kernel.builds`).
"""

import base64
import hashlib

from ironic.common import exception
from ironic.common import metrics_utils
from ironic.common.i18n import _
from ironic.drivers import base
from oslo_utils import uuidutils

from ironic_bmc.group import summary as group_summary
from ironic_bmc.kernel import builds
from ironic_bmc.kernel import run_profile
from ironic_bmc import report as run_report
from ironic_bmc import run_files

METRICS = metrics_utils.get_metrics_logger(__name__)

METHODS = ('run_report', 'run_group', 'run_output', 'kernel_build',
           'kernel_build_status')


class ContainerVendor(base.VendorInterface):
    """Run reports of container deploys."""

    def get_properties(self):
        return {}

    @METRICS.timer('ContainerVendor.validate')
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
        for key in ('deploy_id', 'profile_run'):
            value = kwargs.get(key)
            if value is not None and not uuidutils.is_uuid_like(value):
                raise exception.InvalidParameterValue(
                    _('%(key)s must be the UUID of a deploy (the report\'s '
                      '"deploy_id"), got %(value)r')
                    % {'key': key, 'value': value})
        if method == 'kernel_build_status' and not kwargs.get('build_id'):
            raise exception.MissingParameterValue(
                _('kernel_build_status needs build_id (kernel_build '
                  'returned it)'))

    @METRICS.timer('ContainerVendor.run_report')
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

    @METRICS.timer('ContainerVendor.run_group')
    @base.passthru(['GET', 'POST'], async_call=False,
                   require_exclusive_lock=False,
                   description=_('The group report of the run group the '
                                 'current or last container deploy of the '
                                 'node (or the one named by "deploy_id") '
                                 'belongs to.'))
    def run_group(self, task, deploy_id=None, **kwargs):
        return group_summary.build(self.run_report(task, deploy_id))

    # POST too: clients send a GET without arguments (``passthru call
    # --arg result=...`` posts).
    @METRICS.timer('ContainerVendor.run_output')
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

    @METRICS.timer('ContainerVendor.kernel_build')
    @base.passthru(['POST'], async_call=False, require_exclusive_lock=False,
                   description=_('Start a kernel build on the node\'s '
                                 'conductor, or return the same build made '
                                 'or under way: "variant" (plain, gcov, '
                                 'pgo), "source" (a tarball in '
                                 '[container]kernel_source_dirs), "config" '
                                 '(a fragment name, default bmc-node), and '
                                 'for pgo "profile_run" (the deploy_id of '
                                 'this node\'s profiling run).'))
    def kernel_build(self, task, variant=builds.worker.PLAIN, source=None,
                     config=None, profile_run=None, **kwargs):
        # (kwargs: what Ironic adds, e.g. http_method.)
        given = [k for k in ('deploy_id', 'result') if kwargs.get(k)]
        if given:
            raise exception.InvalidParameterValue(
                _('kernel_build takes variant, source, config and '
                  'profile_run; not %s') % ', '.join(given))
        profile = None
        if profile_run:
            profile = run_profile.for_build(task.node.uuid, profile_run)
        if variant == builds.worker.PGO and (source or config):
            raise exception.InvalidParameterValue(
                _('kernel build source/config: a pgo build uses the source '
                  'and config of the gcov build that counted its profile; '
                  'do not give them'))
        spec = builds.plan(variant, source=source,
                           config=config or builds.DEFAULT_CONFIG,
                           profile=profile)
        return builds.start(spec)

    @METRICS.timer('ContainerVendor.kernel_build_status')
    @base.passthru(['GET', 'POST'], async_call=False,
                   require_exclusive_lock=False,
                   description=_('What kernel build "build_id" is doing or '
                                 'made: its state, step, time, and once it '
                                 'succeeded the URLs of its kernel and '
                                 'modules (for instance_info/kernel and '
                                 'kernel_modules); a failed build adds the '
                                 'end of its log.'))
    def kernel_build_status(self, task, build_id=None, **kwargs):
        found = builds.status(build_id)
        if found is None:
            raise exception.NotFound(
                _('Kernel build %(id)s is not on the conductor of node '
                  '%(node)s') % {'id': build_id, 'node': task.node.uuid})
        if found['state'] == builds.worker.FAILED:
            found['log_tail'] = builds.log_tail(build_id)
        return found
