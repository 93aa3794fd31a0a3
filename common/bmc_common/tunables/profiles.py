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

"""Named tunables profiles, TuneD style.

A profile is an INI file ``<name>.conf``::

    [main]
    summary = one line
    include = parent[, parent2]

    [knobs]
    thp = never
    sysctl.vm.swappiness = 10
    rps_cpus.eth0 = 0-1

Values are strings parsed by the knob schema; dict-valued knobs
(``sysctl``, ``rps_cpus``, ``rps_flow_cnt``) take one ``knob.key = value``
line per entry (``rps_cpus = all`` sets the entry for every NIC, ``*``).
Parents are applied in the order listed, then the profile's own knobs;
dict-valued knobs merge key by key, the later definition wins.  An empty
value (``thp_defrag =``) removes what a parent set.

Profiles are looked up in the operator's directories first, then in the
directory shipped with this package, so an operator's file of the same
name replaces the shipped one.  Standard library only.
"""

import configparser
import json
import os
import re

from bmc_common.tunables import schema

#: The profiles shipped with the package.
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'profiles')
SUFFIX = '.conf'
_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')
_UNSET = object()


def _error(message):
    return schema.TunableError('%s: %s' % (schema.PREFIX, message))


def _inner(exc):
    """A schema error's message without its ``container_tunables``."""
    text = str(exc)
    for lead in (schema.PREFIX + ': ', schema.PREFIX + '/'):
        if text.startswith(lead):
            return text[len(lead):]
    return text


def _dirs(search_dirs):
    dirs = [d for d in (search_dirs or ()) if d]
    if SHIPPED_DIR not in dirs:
        dirs.append(SHIPPED_DIR)
    return dirs


def available(search_dirs=None):
    """Names of every profile found, sorted."""
    names = set()
    for directory in _dirs(search_dirs):
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        names.update(e[:-len(SUFFIX)] for e in entries
                     if e.endswith(SUFFIX) and _NAME.match(e[:-len(SUFFIX)]))
    return sorted(names)


def find(name, search_dirs=None):
    """Path of profile ``name`` (first directory wins); TunableError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise _error('%r is not a profile name' % (name,))
    for directory in _dirs(search_dirs):
        path = os.path.join(directory, name + SUFFIX)
        if os.path.isfile(path):
            return path
    raise _error('unknown profile %r; available: %s' % (
        name, ', '.join(available(search_dirs)) or 'none'))


def _read(path, name):
    parser = configparser.ConfigParser(interpolation=None,
                                       delimiters=('=',),
                                       comment_prefixes=('#', ';'),
                                       inline_comment_prefixes=('#',))
    parser.optionxform = str  # sysctl and interface names keep their case
    try:
        with open(path) as f:
            parser.read_file(f, source=path)
    except (OSError, configparser.Error) as exc:
        raise _error('profile %r (%s) cannot be read: %s'
                     % (name, path, exc)) from exc
    unknown = set(parser.sections()) - {'main', 'knobs'}
    if unknown:
        raise _error('profile %r: unknown section(s) %s (expected [main] '
                     'and [knobs])' % (name, ', '.join(sorted(unknown))))
    main = parser['main'] if parser.has_section('main') else {}
    includes = [i.strip() for i in main.get('include', '').split(',')
                if i.strip()]
    raw = {}
    if parser.has_section('knobs'):
        for key, value in parser.items('knobs'):
            value = value.strip()
            knob, dot, sub = key.partition('.')
            if knob not in schema.KNOBS:
                # Let the schema say what is wrong (with a hint).
                try:
                    schema.validate({knob: value})
                except schema.TunableError as exc:
                    raise _error('profile %r: %s'
                                 % (name, _inner(exc))) from exc
            if knob in schema.DICT_KNOBS:
                if not dot and knob == 'sysctl':
                    raise _error('profile %r: sysctl takes one line per '
                                 'setting: sysctl.<name> = <value>' % name)
                entry = raw.setdefault(knob, {})
                entry[sub if dot else '*'] = value if value else _UNSET
            elif dot:
                raise _error('profile %r: %s takes a single value, not %s'
                             % (name, knob, key))
            else:
                raw[knob] = value if value else _UNSET
    return includes, raw, dict(main)


def _merge_into(target, raw):
    for knob, value in raw.items():
        if isinstance(value, dict):
            entry = target.get(knob)
            entry = dict(entry) if isinstance(entry, dict) else {}
            for key, item in value.items():
                if item is _UNSET or item is None:
                    entry.pop(key, None)
                else:
                    entry[key] = item
            if entry:
                target[knob] = entry
            else:
                target.pop(knob, None)
        elif value is _UNSET or value is None:
            target.pop(knob, None)
        else:
            target[knob] = value


def _collect(name, search_dirs, stack):
    if name in stack:
        raise _error('profile include cycle: %s'
                     % ' -> '.join(stack + [name]))
    path = find(name, search_dirs)
    includes, raw, _main = _read(path, name)
    merged = {}
    for parent in includes:
        _merge_into(merged, _collect(parent, search_dirs, stack + [name]))
    _merge_into(merged, raw)
    return merged


def load_raw(name, search_dirs=None):
    """The merged, not yet validated knobs of a profile (strings)."""
    return _collect(name, search_dirs, [])


def load(name, search_dirs=None):
    """The validated knobs of profile ``name`` (parents merged in)."""
    raw = load_raw(name, search_dirs)
    try:
        return schema.validate(raw)
    except schema.TunableError as exc:
        raise _error('profile %r: %s' % (name, _inner(exc))) from exc


def merge(knobs, overrides):
    """``knobs`` with ``overrides`` on top, validated.

    Dict-valued knobs merge key by key; a None override removes a knob.
    """
    merged = dict(schema.validate(knobs))
    checked = schema.validate(overrides)  # names checked, None dropped
    for name, value in (overrides or {}).items():
        if value is None:
            merged.pop(name, None)
    _merge_into(merged, checked)
    return schema.validate(merged)


def describe(name, search_dirs=None):
    """``{"name", "path", "summary", "include"}`` of one profile."""
    path = find(name, search_dirs)
    includes, _raw, main = _read(path, name)
    return {'name': name, 'path': path, 'summary': main.get('summary', ''),
            'include': includes}


def resolve(spec, search_dirs=None):
    """Validated knobs for a tunables spec.

    ``spec`` is a profile name, a dict of knobs that may name a
    ``"profile"`` (a name or a list of names, merged in order) which the
    other keys override (dict-valued knobs key by key; ``None`` removes a
    knob), a JSON text of either, or None.
    """
    if spec is None or spec == '':
        return {}
    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith('{'):
            try:
                spec = json.loads(text)
            except ValueError as exc:
                raise _error('not valid JSON: %s' % exc) from exc
        else:
            return load(text, search_dirs)
    if not isinstance(spec, dict):
        raise _error('expected a profile name or a mapping of knobs, got '
                     '%s' % type(spec).__name__)
    spec = dict(spec)
    names = spec.pop('profile', None) or []
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list):
        raise _error('profile must be a name or a list of names, got %r'
                     % (names,))
    merged = {}
    for name in names:
        _merge_into(merged, load_raw(name, search_dirs))
    # Normalise the overrides first, so their dict knobs merge per key
    # with the profile's (e.g. rps_cpus 'all' becomes {'*': 'all'}).
    # (validate checks every name and drops the None values).
    overrides = schema.validate(spec)
    for knob in spec:
        if spec[knob] is None:
            merged.pop(knob, None)
    _merge_into(merged, overrides)
    return schema.validate(merged)
