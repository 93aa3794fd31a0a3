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

"""The spec-level differential: the project's runtime spec of a case's
image against the one the OCI image spec's conversion rules give.

The reference is ``umoci unpack``'s ``config.json`` (umoci converts an
image config to a runtime spec by the image spec's rules, users with
runc's own library), with what it does not cover from Docker's
documented behaviour (:mod:`bmc_lab.fidelity.views`): no ``TERM``
(umoci's spec has a terminal, ``docker run`` without ``-t`` none),
``PATH`` and ``HOME`` when the image gives none, ``HOSTNAME`` (the
node's: host network), ``container_args`` after the ENTRYPOINT and
``container_env`` over the Env.

The project's spec is what a deploy makes of the same image: the
conductor's :func:`ironic_bmc.start_args.workload_args` from the image
config (as :class:`ironic_bmc.image.pipeline.ImageConfig` reads it),
then the agent's :func:`ipa_hardware_manager.oci_spec.build` on umoci's
unpacked root.  Compared: ``process.args``, ``env``, ``cwd``, ``user``
(uid, gid, additionalGids).
"""

import inspect
import json
import os
import shutil
import subprocess

from bmc_lab.fidelity import images
from bmc_lab.fidelity import views

#: The hostname the node has in the comparison.
NODE_HOSTNAME = 'node-0'
#: The environment of the reference that is umoci's, not Docker's.
UMOCI_ONLY_ENV = ('TERM',)


def umoci_available():
    return shutil.which('umoci') is not None


def unpack(case, workdir):
    """Write the case's image as an OCI layout and ``umoci unpack`` it;
    the bundle directory (``config.json``, ``rootfs/``)."""
    layout = os.path.join(workdir, 'layout')
    bundle = os.path.join(workdir, 'bundle')
    images.write_layout(case.image(), layout, 'case')
    cmd = ['umoci', 'unpack', '--image', layout + ':case', bundle]
    if os.geteuid() != 0:
        cmd.insert(2, '--rootless')
    subprocess.run(cmd, check=True, capture_output=True)
    return bundle


def _user(process):
    user = process.get('user') or {}
    return {'uid': user.get('uid', 0), 'gid': user.get('gid', 0),
            'additionalGids': sorted(set(user.get('additionalGids') or ()))}


def reference_process(case, config):
    """The process of umoci's ``config.json`` with Docker's additions: a
    dict of args, env (a dict), cwd, uid, gid, additionalGids."""
    process = config['process']
    env = dict(item.partition('=')[::2] for item in process.get('env', ()))
    for name in UMOCI_ONLY_ENV:
        env.pop(name, None)
    for item in case.run_env:
        name, _, value = item.partition('=')
        env[name] = value
    env.setdefault('PATH', views.DOCKER_PATH)
    # umoci sets HOME only from a passwd entry; Docker's default is /.
    env.setdefault('HOME', '/')
    env['HOSTNAME'] = NODE_HOSTNAME
    args = list(process.get('args') or ())
    if case.run_args is not None:
        args = list(case.entrypoint) + list(case.run_args)
    return dict(args=args, env=env, cwd=process.get('cwd') or '/',
                **_user(process))


def project_process(case, rootfs, privileged=True):
    """The process of the spec the project writes for the case (the
    conductor's start arguments, then the agent's spec on ``rootfs``)."""
    # Imported here: the lab's other modules need neither side.
    from ipa_hardware_manager import oci_spec
    from ironic_bmc import deploy_info
    from ironic_bmc.image import pipeline

    config = pipeline.ImageConfig.from_config(case.image().config)
    container = deploy_info.ContainerInfo(
        image='registry.lab/fidelity/%s:1' % case.name, mode='job',
        env=dict(item.partition('=')[::2] for item in case.run_env),
        privileged=privileged)
    if case.run_args is not None:
        container.args = list(case.run_args)
    args = deploy_info.workload_args(container, config)
    extra = {}
    if 'hostname' in inspect.signature(oci_spec.build).parameters:
        # (An agent before the node's hostname was the container's has
        # none: the comparison then shows it.)
        extra['hostname'] = NODE_HOSTNAME
    spec = oci_spec.build(
        rootfs, args['command'], env=args['env'], workdir=args['workdir'],
        user=args['user'], privileged=args['privileged'],
        rlimits=args.get('rlimits'), **extra)
    process = spec['process']
    env = dict(item.partition('=')[::2] for item in process['env'])
    return dict(args=list(process['args']), env=env, cwd=process['cwd'],
                **_user(process))


#: What the project's spec means to have that the reference has not.
INTENDED = {'env:container': 'bmc'}
#: (case, field) -> (the project's value, why it differs): divergences
#: not meant, known and not fixed yet.  The test fails when one is gone
#: (remove it here) as when a new one appears.
KNOWN_DIVERGENCES = {}


def flatten(process):
    out = {k: v for k, v in process.items() if k != 'env'}
    out['args'] = tuple(out['args'])
    out['additionalGids'] = tuple(out['additionalGids'])
    for name, value in process['env'].items():
        out['env:' + name] = value
    return out


def differential(case, workdir):
    """The mismatches of the project's process against the reference,
    intended differences applied (:data:`INTENDED`)."""
    bundle = unpack(case, workdir)
    with open(os.path.join(bundle, 'config.json')) as f:
        config = json.load(f)
    reference = flatten(reference_process(case, config))
    got = flatten(project_process(case, os.path.join(bundle, 'rootfs')))
    expected = dict(reference, **INTENDED)
    reasons = {field: 'intended' for field in INTENDED}
    return views.compare(expected, got, reference, reasons), reference, got
