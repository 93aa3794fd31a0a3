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

"""Check that one part of the repository installs alone, where it runs.

Run inside a virtualenv that holds only that part (tox -e packaging-agent,
tox -e packaging-conductor, tox -e packaging-client)::

    python tools/check_packaging.py agent|conductor|client

``agent``: the node side (ironic-bmc-agent + ironic-bmc-common) imports,
its hardware manager entry point loads, and nothing was installed beyond
ironic-python-agent's own dependency closure; no conductor, lab or tempest
code is present.

``conductor``: the conductor plugin (ironic-bmc + ironic-bmc-common) loads
every entry point Ironic uses; the lab (package and ``bmc-lab`` script),
the node side and the tempest plugin are absent.

``client``: the CLI plugin (ironic-bmc-client + ironic-bmc-common) loads
its OSC entry points and draws a chart without a display; Ironic, the
conductor plugin, the node side, the lab and the tempest plugin are
absent.

Exit status 0 when every check holds; otherwise each failure is printed.
"""

import importlib
import importlib.metadata as md
import importlib.util
import os
import re
import sys
import sysconfig

OURS = {'ironic-bmc', 'ironic-bmc-common', 'ironic-bmc-agent',
        'ironic-bmc-lab', 'ironic-bmc-tempest-plugin', 'ironic-bmc-client'}
# Installed with every virtualenv, not by the part under test.
TOOLING = {'pip', 'setuptools', 'wheel', 'distribute'}

EXPECTED = {
    'agent': {
        'distributions': {'ironic-bmc-agent', 'ironic-bmc-common'},
        'import': ['bmc_common.protocol', 'bmc_common.tunables.profiles',
                   'ipa_hardware_manager.manager'],
        'absent': ['ironic_bmc', 'bmc_lab', 'ironic_bmc_tempest_plugin',
                   'ironic'],
        'entry_points': ['ironic_python_agent.hardware_managers'],
        'closure_of': 'ironic-python-agent',
        # Package data the node reads at run time.
        'files': [('bmc_common.tunables.profiles', 'SHIPPED_DIR',
                   'hpc-compute.conf')],
    },
    'conductor': {
        'distributions': {'ironic-bmc', 'ironic-bmc-common'},
        'import': ['ironic_bmc.drivers.container_deploy',
                   'bmc_common.protocol'],
        'absent': ['bmc_lab', 'ironic_bmc.lab', 'ipa_hardware_manager',
                   'ironic_bmc_tempest_plugin'],
        'entry_points': ['ironic.hardware.types',
                         'ironic.hardware.interfaces.deploy',
                         'ironic.hardware.interfaces.vendor',
                         'oslo.config.opts',
                         # ironic-bmc-deploy-templates
                         'console_scripts'],
        'scripts_absent': ['bmc-lab'],
        'files': [('bmc_common.tunables.profiles', 'SHIPPED_DIR',
                   'thp-never.conf'),
                  ('ironic_bmc.drivers.boot_files', 'TEMPLATE', None),
                  # The node kernel config of the kernel builds.
                  ('ironic_bmc.kernel.builds', 'PACKAGE_CONFIGS',
                   'bmc-node.config'),
                  ('ironic_bmc.kernel.builds', 'PACKAGE_CONFIGS',
                   'gcov.config')],
    },
    'client': {
        'distributions': {'ironic-bmc-client', 'ironic-bmc-common'},
        'import': ['ironic_bmc_client.charts', 'ironic_bmc_client.runs',
                   'ironic_bmc_client.osc.plugin'],
        'absent': ['ironic', 'ironic_bmc', 'bmc_lab',
                   'ipa_hardware_manager', 'ironic_bmc_tempest_plugin'],
        'entry_points': ['openstack.cli.extension',
                         'openstack.baremetal_container.v1'],
        'chart': True,
    },
}


def canonical(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def installed():
    return {canonical(d.metadata['Name']): d for d in md.distributions()}


def closure(root, dists):
    """Names of ``root`` and every distribution it requires, recursively
    (environment markers evaluated; extras not followed)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # a clean virtualenv: pip's own copy
        from pip._vendor.packaging.requirements import Requirement
    seen, todo = set(), [canonical(root)]
    while todo:
        name = todo.pop()
        if name in seen or name not in dists:
            continue
        seen.add(name)
        for spec in dists[name].requires or ():
            req = Requirement(spec)
            if req.marker and not req.marker.evaluate({'extra': ''}):
                continue
            todo.append(canonical(req.name))
    return seen


def check(part):
    want = EXPECTED[part]
    errors = []
    dists = installed()

    ours = {n for n in dists if n in OURS}
    if ours != want['distributions']:
        errors.append('distributions of this repository installed: %s; '
                      'expected exactly %s'
                      % (sorted(ours), sorted(want['distributions'])))

    if part == 'agent':
        # As ironic-python-agent does before it loads hardware managers.
        try:
            from ironic_python_agent import config
            config.populate_config()
        except Exception as e:
            errors.append('ironic-python-agent does not load: %s: %s'
                          % (type(e).__name__, e))

    for module in want['import']:
        try:
            importlib.import_module(module)
        except Exception as e:
            errors.append('import %s failed: %s: %s'
                          % (module, type(e).__name__, e))

    for module in want['absent']:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            errors.append('%s is installed here but must not be' % module)

    for group in want['entry_points']:
        eps = [ep for ep in md.entry_points(group=group)
               if ep.dist is not None
               and canonical(ep.dist.metadata['Name']) in OURS]
        if not eps:
            errors.append('no entry point of ours in %s' % group)
        for ep in eps:
            try:
                ep.load()
            except Exception as e:
                errors.append('entry point %s = %s does not load: %s: %s'
                              % (ep.name, ep.value, type(e).__name__, e))

    for module, attr, name in want.get('files', ()):
        try:
            path = getattr(importlib.import_module(module), attr)
            if name:
                path = os.path.join(path, name)
        except Exception as e:
            errors.append('%s.%s: %s: %s' % (module, attr,
                                              type(e).__name__, e))
            continue
        if not os.path.exists(path):
            errors.append('package data %s (%s.%s) is not installed'
                          % (path, module, attr))

    if want.get('chart'):
        # The charts draw without a display and without pyplot.
        try:
            from ironic_bmc_client import charts
            png = charts.stage_timeline(
                {'deploy_id': 'check', 'stages': [
                    {'name': 'power-on', 'start': 0.0, 'end': 3.5}]}, 'png')
            if not png.startswith(b'\x89PNG'):
                errors.append('the timeline chart is not a PNG')
        except Exception as e:
            errors.append('the timeline chart failed: %s: %s'
                          % (type(e).__name__, e))

    scripts = sysconfig.get_path('scripts')
    for script in want.get('scripts_absent', ()):
        if os.path.exists(os.path.join(scripts, script)):
            errors.append('%s is installed in %s but must not be'
                          % (script, scripts))

    if 'closure_of' in want:
        allowed = (closure(want['closure_of'], dists) | ours | TOOLING
                   | {'packaging'})
        extra = sorted(set(dists) - allowed)
        if extra:
            errors.append('installed beyond %s and our packages: %s'
                          % (want['closure_of'], ', '.join(extra)))
    return errors


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in EXPECTED:
        print('usage: check_packaging.py %s' % '|'.join(EXPECTED),
              file=sys.stderr)
        return 2
    errors = check(argv[0])
    for error in errors:
        print('check_packaging %s: FAIL: %s' % (argv[0], error))
    if not errors:
        print('check_packaging %s: ok (%s)'
              % (argv[0], ', '.join(sorted(EXPECTED[argv[0]]
                                           ['distributions']))))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
