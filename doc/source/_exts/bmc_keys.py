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

"""Tables of the deploy's keys and the run report's fields, generated from
``bmc_common.reference`` (``INSTANCE_INFO_KEYS``, ``IMAGE_PROPERTY_KEYS``,
``REPORT_FIELDS``), so that the reference never drifts from the code::

    .. bmc-instance-info-keys::
       :who: tenant              (optional: only the keys a tenant may set)

    .. bmc-image-property-keys::

    .. bmc-report-fields::
"""

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from bmc_common import reference

WHO = {
    reference.WHO_OPERATOR: 'operator',
    reference.WHO_TENANT: 'operator, tenant',
}


def _cell(text, first=False):
    """The lines of one list-table cell (reStructuredText)."""
    lead = '   * - ' if first else '     - '
    lines = str(text).splitlines() or ['']
    return [lead + lines[0]] + ['       ' + line for line in lines[1:]]


class _Table(SphinxDirective):
    has_content = False
    header = ()
    widths = ''

    def rows(self):
        raise NotImplementedError

    def run(self):
        lines = ['.. list-table::', '   :header-rows: 1',
                 '   :class: bmc-reference',
                 '   :widths: ' + self.widths, '']
        for row in [self.header] + list(self.rows()):
            for i, cell in enumerate(row):
                lines += _cell(cell, first=(i == 0))
        content = StringList(lines, source=self.get_source_info()[0])
        container = nodes.container()
        self.state.nested_parse(content, self.content_offset, container)
        return container.children


def _key_rows(keys):
    for key in keys:
        value = key.type
        if key.default:
            value += '\n\nDefault: ' + key.default
        yield '``%s``' % key.name, WHO[key.who], value, key.description


class InstanceInfoKeys(_Table):
    """The ``instance_info`` keys, optionally only those of one party."""

    option_spec = {'who': lambda arg: directives.choice(
        arg, (reference.WHO_OPERATOR, reference.WHO_TENANT))}
    header = ('Key', 'Set by', 'Value', 'Meaning')
    widths = '28 11 19 42'

    def rows(self):
        who = self.options.get('who')
        return _key_rows(k for k in reference.INSTANCE_INFO_KEYS
                         if who in (None, k.who))


class ImagePropertyKeys(_Table):
    """The Glance image properties that are not ``instance_info`` keys."""

    header = InstanceInfoKeys.header
    widths = InstanceInfoKeys.widths

    def rows(self):
        return _key_rows(reference.IMAGE_PROPERTY_KEYS)


class ReportFields(_Table):
    """The top-level fields of a run report."""

    header = ('Field', 'Value', 'Meaning')
    widths = '20 14 66'

    def rows(self):
        for field in reference.REPORT_FIELDS:
            yield '``%s``' % field.name, field.type, field.description


def setup(app):
    app.add_directive('bmc-instance-info-keys', InstanceInfoKeys)
    app.add_directive('bmc-image-property-keys', ImagePropertyKeys)
    app.add_directive('bmc-report-fields', ReportFields)
    return {'version': '1.0', 'parallel_read_safe': True,
            'parallel_write_safe': True}
