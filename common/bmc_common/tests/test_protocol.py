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

"""The protocol's key and report-field descriptions (the documentation's
references are generated from them): complete, and in step with the
conductor's code, read as source (this package never imports it)."""

import ast
import importlib.util
import os

from bmc_common import protocol
from bmc_common import reference

II_CONSTANTS = {name: value for name, value in vars(protocol).items()
                if name.startswith('II_')}
ALL_KEYS = reference.INSTANCE_INFO_KEYS + reference.IMAGE_PROPERTY_KEYS


def test_every_ii_constant_has_exactly_one_entry():
    names = [k.name for k in reference.INSTANCE_INFO_KEYS]
    assert II_CONSTANTS
    for const, value in II_CONSTANTS.items():
        assert names.count(value) == 1, const


def test_keys_are_unique_and_described():
    names = [k.name for k in ALL_KEYS]
    assert len(names) == len(set(names))
    for key in ALL_KEYS:
        assert key.who in (reference.WHO_OPERATOR, reference.WHO_TENANT), key
        assert key.type and key.description.strip(), key.name
        assert key.default is None or key.default.strip(), key.name


def test_report_fields_are_unique_and_described():
    names = [f.name for f in reference.REPORT_FIELDS]
    assert len(names) == len(set(names))
    for field in reference.REPORT_FIELDS:
        assert field.type and field.description.strip(), field.name
    stages = next(f for f in reference.REPORT_FIELDS if f.name == 'stages')
    for stage in protocol.STAGES:
        assert '``%s``' % stage in stages.description


def _conductor_source(*parts):
    """The AST of a module of the conductor plugin (ironic_bmc), found
    where it is installed (editable, in the test environments)."""
    spec = importlib.util.find_spec('ironic_bmc')
    assert spec and spec.submodule_search_locations, (
        'ironic_bmc is not installed next to bmc_common')
    root = list(spec.submodule_search_locations)[0]
    with open(os.path.join(root, *parts)) as f:
        return ast.parse(f.read())


def _conductor_trees():
    """(file name, AST) of every module of the conductor plugin but its
    tests."""
    spec = importlib.util.find_spec('ironic_bmc')
    root = list(spec.submodule_search_locations)[0]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ('tests',
                                                         '__pycache__')]
        for name in filenames:
            if name.endswith('.py'):
                with open(os.path.join(dirpath, name)) as f:
                    yield name, ast.parse(f.read())


def _run_report_updates(tree):
    """The ``run_report.update(...)`` calls of a module."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == 'update'
                and getattr(node.func.value, 'id', None) == 'run_report'):
            yield node


def _names(node):
    """The key names of a tuple of strings and protocol.II_* constants."""
    out = []
    for elt in node.elts:
        if isinstance(elt, ast.Constant):
            out.append(elt.value)
        else:
            assert isinstance(elt, ast.Attribute), ast.dump(elt)
            out.append(getattr(protocol, elt.attr))
    return out


def _assigned(tree, name):
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign)
                and any(getattr(t, 'id', None) == name
                        for t in node.targets)):
            return node.value
    raise AssertionError('%s is not assigned' % name)


def test_who_matches_what_the_conductor_enforces():
    """A key documented as a tenant's is one the conductor takes from a
    Glance image; one documented as the operator's is refused there
    (ironic_bmc.image_properties), or, as kernel_append_params, not read
    from the image at all."""
    tree = _conductor_source('image_properties.py')
    tenant = set(_names(_assigned(tree, 'TENANT_KEYS')))
    operator = set(_names(_assigned(tree, 'OPERATOR_KEYS')))
    boot = _assigned(tree, 'BOOT_IMAGE_KEYS')
    boot_props = {k.value for k in boot.keys}
    for key in reference.INSTANCE_INFO_KEYS:
        if key.who == reference.WHO_TENANT:
            assert key.name in tenant, key.name
        else:
            assert key.name not in tenant, key.name
    assert operator <= {k.name for k in reference.INSTANCE_INFO_KEYS
                        if k.who == reference.WHO_OPERATOR}
    assert boot_props == {k.name for k in reference.IMAGE_PROPERTY_KEYS}


def test_every_field_the_conductor_writes_is_described():
    """The fields of a new report (ironic_bmc.report.new) and every field
    a module of the conductor sets with ``update(node, report, field=)``
    have an entry."""
    documented = {f.name for f in reference.REPORT_FIELDS}
    written = set()
    new = next(n for n in ast.walk(_conductor_source('report.py'))
               if isinstance(n, ast.FunctionDef) and n.name == 'new')
    ret = next(n for n in ast.walk(new) if isinstance(n, ast.Return))
    written.update(k.value for k in ret.value.keys)
    for _name, tree in _conductor_trees():
        for node in _run_report_updates(tree):
            written.update(k.arg for k in node.keywords if k.arg)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Subscript)
                    and getattr(node.value, 'id', None) == 'report'
                    and isinstance(node.ctx, ast.Store)
                    and isinstance(node.slice, ast.Constant)):
                written.add(node.slice.value)
            elif (isinstance(node, ast.Assign)
                    and any(getattr(t, 'id', None) == 'fields'
                            for t in node.targets)
                    and isinstance(node.value, ast.Dict)):
                written.update(k.value for k in node.value.keys)
            elif (isinstance(node, ast.Subscript)
                    and getattr(node.value, 'id', None) == 'fields'
                    and isinstance(node.ctx, ast.Store)
                    and isinstance(node.slice, ast.Constant)):
                written.add(node.slice.value)
    assert len(written) > 20, written
    assert written <= documented, sorted(written - documented)


def test_run_states_are_the_reference_and_the_conductor_writes_only_them():
    """A run's states have one definition (protocol.RUN_*): the report
    reference names each, and every ``state=`` the conductor writes with
    ``run_report.update`` is one of them, never a bare string."""
    field = next(f for f in reference.REPORT_FIELDS if f.name == 'state')
    for state in protocol.RUN_STATES:
        assert '``%s``' % state in field.description, state
    assert set(protocol.RUN_FINAL_STATES) < set(protocol.RUN_STATES)
    written = []
    for name, tree in _conductor_trees():
        for node in _run_report_updates(tree):
            for kw in node.keywords:
                if kw.arg != 'state':
                    continue
                leaves = [kw.value]
                while any(isinstance(v, ast.IfExp) for v in leaves):
                    leaves = [x for v in leaves for x in (
                        [v.body, v.orelse] if isinstance(v, ast.IfExp)
                        else [v])]
                for leaf in leaves:
                    where = '%s:%d' % (name, node.lineno)
                    assert (isinstance(leaf, ast.Attribute)
                            and getattr(leaf.value, 'id', None) == 'protocol'
                            and leaf.attr.startswith('RUN_')), where
                    written.append(getattr(protocol, leaf.attr))
    assert set(written) >= {protocol.RUN_RUNNING, protocol.RUN_EXITED,
                            protocol.RUN_FAILED, protocol.RUN_FINISHED,
                            protocol.RUN_UNDEPLOYED}, written
    assert set(written) <= set(protocol.RUN_STATES)


def test_the_agents_workload_states_are_the_conductors():
    """The workload status the agent returns and the conductor accepts
    (agent_replies) come from one list."""
    from ironic_bmc import agent_replies
    assert agent_replies.WORKLOAD_STATES is protocol.WORKLOAD_STATES
