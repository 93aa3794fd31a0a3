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

"""Whose run is this, and is this the operator: decided here, once.

Every surface that must know who a run is for (the run report and the
runs API's index, run group scopes, the operator-only gates: the
unikernel interface, kernel profiling, ``file://`` boot files, the agent
ramdisk) asks this module, and this module answers only from fields a
project cannot write to make itself someone else.

Under Ironic's default policy (Ironic 39):

* ``node.owner`` is set by the system only (``baremetal:node:update:
  owner``).
* ``node.lessee`` and ``node.instance_uuid`` by the system, the service
  role (Nova) or the owner's members, never by a lessee.  Ironic itself
  makes the Nova instance's project the lessee when a deploy starts on a
  node without one (``[conductor]automatic_lessee_source=instance``).
* ``instance_info`` by the system, the service role, the owner's members
  *and the lessee's admins and managers*, with no restriction per key:
  ``instance_info/project_id`` is therefore believed only on a node that
  has no lessee (then only the system, Nova or the owner wrote it) and
  that an instance holds.

Hence the run's project (:func:`run_project`):

1. the node's lessee (with Ironic's automatic lessee, the Nova
   instance's project);
2. else, on a node an instance holds, Nova's ``instance_info/project_id``;
3. else the node's owner;
4. else nobody: the run is the operator's.

The owner may lend its node to any project (it may set the lessee), so
what the owner can do here it could do through Ironic already; the run
group scope adds the owner to its key for that reason
(:func:`group_scope`).

Whether a *request* is the operator's is the runs API's policy's to say
(``ironic_bmc.api.policy``: system scope, never a project that happens
to be None); deploy-time decisions read the node, since a deploy's later
steps run on the agent's heartbeat contexts, not the requester's.
"""

from ironic.common import exception
from ironic.common.i18n import _

#: The scope of the operator's runs in keys (run groups).
OPERATOR_SCOPE = '-'


def _project(value):
    return value if isinstance(value, str) and value else None


def _decided(node):
    """``(project or None, why)``: the rule of the module's docstring,
    with the reason for messages."""
    lessee = _project(node.lessee)
    if lessee:
        return lessee, _('the node\'s lessee')
    if node.instance_uuid:
        nova = _project((node.instance_info or {}).get('project_id'))
        if nova:
            return nova, (_('the project of instance %s')
                          % node.instance_uuid)
    owner = _project(node.owner)
    if owner:
        return owner, _('the node\'s owner')
    return None, _('no lessee and no owner')


def run_project(node):
    """The project a run on ``node`` is for, or None: the operator's.

    See the module's docstring for why these fields and this order.
    """
    return _decided(node)[0]


def source(node):
    """Why :func:`run_project` says what it says, for messages."""
    return _decided(node)[1]


def is_operators(node):
    """Whether a run on ``node`` is the operator's own (no project)."""
    return run_project(node) is None


def require_operator(node, what):
    """Refuse an operator-only feature on a node deployed for a project.

    :param what: what is refused, as the error's subject (e.g.
        ``'instance_info/container_kernel_profile: kernel profiling'``).
    :raises: InvalidParameterValue naming ``what``, the project and what
        to do instead.
    """
    project, why = _decided(node)
    if project is None:
        return
    raise exception.InvalidParameterValue(
        _('%(what)s is the operator\'s: node %(node)s is deployed for '
          'project %(project)s (%(why)s); deploy it as the operator on a '
          'node with no lessee and no owner') % {
            'what': what, 'node': node.uuid, 'project': project,
            'why': why})


def group_scope(node, nova=False):
    """What a run group's key is scoped by on ``node``.

    The run's project; with the node's owner beside it when the owner is
    another project, so an owner that lends its nodes to a project (and
    could lend them to any) forms groups only with its own nodes.  A
    Nova group (``nova``) is scoped by the server request too, which the
    caller adds: Nova places a request's servers on any owner's nodes.
    """
    project = run_project(node)
    if project is None:
        return OPERATOR_SCOPE
    owner = _project(node.owner)
    if nova or owner in (None, project):
        return project
    return '%s~%s' % (project, owner)

