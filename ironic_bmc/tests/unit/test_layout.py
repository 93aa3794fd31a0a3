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

"""The house rules of the conductor plugin's modules, checked on their
source: one way to reach the configuration."""

import ast
import os

import ironic_bmc

ROOT = os.path.dirname(os.path.abspath(ironic_bmc.__file__))


def _modules():
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in ('tests',
                                                         '__pycache__')]
        for name in sorted(filenames):
            if name.endswith('.py'):
                path = os.path.join(dirpath, name)
                with open(path) as f:
                    yield os.path.relpath(path, ROOT), ast.parse(f.read())


def test_conf_is_read_through_the_plugins_module():
    """``ironic_bmc.conf`` registers the ``[container]`` options when it is
    imported: a module that took Ironic's CONF directly would read them
    only if something else had imported ours first."""
    direct = []
    for path, tree in _modules():
        if path == os.path.join('conf', '__init__.py'):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.ImportFrom)
                    and node.module == 'ironic.conf'
                    and any(a.name == 'CONF' for a in node.names)):
                direct.append('%s:%d' % (path, node.lineno))
    assert direct == [], ('import CONF from ironic_bmc.conf instead: %s'
                          % ', '.join(direct))


#: The top layers: Ironic's interfaces (drivers) and the runs API.  What
#: they build on (the run record, groups, images, kernels, power, the
#: agent replies) never imports them.
TOP_LAYERS = ('drivers', 'api')


def _imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


def test_lower_layers_never_import_the_drivers_or_the_api():
    upward = []
    for path, tree in _modules():
        if path.split(os.sep)[0] in TOP_LAYERS:
            continue
        for lineno, module, names in _imports(tree):
            targets = [module] + ['%s.%s' % (module, n) for n in names]
            if any(t.startswith('ironic_bmc.%s' % top) for t in targets
                   for top in TOP_LAYERS):
                upward.append('%s:%d imports %s' % (path, lineno, module))
    assert upward == [], upward


STEP_DECORATORS = ('deploy_step', 'clean_step', 'service_step',
                   'verify_step', 'passthru')


def _decorator_name(node):
    func = node.func if isinstance(node, ast.Call) else node
    return getattr(func, 'attr', getattr(func, 'id', None))


def test_every_step_and_passthru_is_timed_as_ironic_times_its_own():
    """Ironic times each step of its interfaces with ``@METRICS.timer``
    (statsd or the log, ``[metrics]``): so does the plugin, outermost,
    named ``Interface.method``."""
    untimed = []
    steps = 0
    for path, tree in _modules():
        if not path.startswith('drivers' + os.sep):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            names = [_decorator_name(d) for d in node.decorator_list]
            if not any(n in STEP_DECORATORS for n in names):
                continue
            steps += 1
            first = node.decorator_list[0]
            ok = (isinstance(first, ast.Call)
                  and _decorator_name(first) == 'timer'
                  and getattr(first.func.value, 'id', None) == 'METRICS'
                  and isinstance(first.args[0], ast.Constant)
                  and first.args[0].value.endswith('.' + node.name))
            if not ok:
                untimed.append('%s:%d %s' % (path, node.lineno, node.name))
    assert steps >= 14, steps
    assert untimed == [], untimed
