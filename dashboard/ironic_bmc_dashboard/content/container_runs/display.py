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

"""What a run's page shows of a report: the summary, the tunables read
back, the output and the two charts (drawn by ironic_bmc_client.charts
as SVG, laid inline into the page)."""

import datetime
import json
import logging
import re

from django.utils import safestring
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from bmc_common import protocol
from ironic_bmc_client import charts

LOG = logging.getLogger(__name__)

#: Characters of output shown on the page; the download has all of it.
OUTPUT_SHOWN = 256 * 1024
#: The charts, in the order the page shows them: kind, title, and the
#: function of ironic_bmc_client.charts that draws it.
CHARTS = (('timeline', _('Stage timeline'), 'stage_timeline'),
          ('power', _('Power curve'), 'power_curve'))
NO_VALUE = '-'
#: What the SVG is inlined without: its XML declaration and doctype.
_PROLOG = re.compile(r'\A\s*(?:<\?xml[^>]*\?>\s*)?(?:<!DOCTYPE[^>]*>\s*)?')
#: What a chart must not hold to be inlined (it never does: matplotlib
#: escapes the report's texts; this keeps it so).
_ACTIVE = re.compile(r'<script|<foreignObject|<iframe|\son[a-z]+\s*=|'
                     r'javascript:', re.IGNORECASE)


def seconds(value):
    if value is None:
        return NO_VALUE
    return '%.1f s' % value


def joules(value):
    if value is None:
        return NO_VALUE
    return '{:,.0f} J'.format(value)


def when(epoch):
    """An epoch time as an aware datetime in the user's time zone."""
    if epoch is None:
        return None
    return timezone.localtime(datetime.datetime.fromtimestamp(
        epoch, datetime.timezone.utc))


def exit_code(value):
    return NO_VALUE if value is None else value


def workload_seconds(report):
    """How long the workload ran, or None."""
    for stage in report.get('stages') or ():
        if stage.get('name') == protocol.STAGE_WORKLOAD_EXITED:
            if stage.get('duration_s') is not None:
                return stage['duration_s']
            if stage.get('end') is not None:
                return stage['end'] - stage['start']
    return (report.get('energy') or {}).get('workload_s')


def summary(report):
    """(label, value) rows of a run's summary."""
    energy = report.get('energy') or {}
    bmc = joules(energy.get('bmc_joules_workload'))
    if bmc == NO_VALUE and energy.get('available') is False:
        # Why there are no BMC figures (no BMC, no readings).
        bmc = energy.get('reason') or NO_VALUE
    rows = [
        (_('State'), report.get('state') or NO_VALUE),
        (_('Exit code'), exit_code(report.get('workload_exit_code'))),
        (_('T_ready'), seconds(report.get('t_ready_s'))),
        (_('Workload'), seconds(workload_seconds(report))),
        # The workload's energy and power, then the whole run's.
        (_('BMC energy'), bmc),
        (_('Mean power'),
         NO_VALUE if energy.get('mean_watts_workload') is None
         else '%.1f W' % energy['mean_watts_workload']),
        (_('RAPL energy'), joules(energy.get('rapl_joules_workload'))),
        (_('BMC, whole run'), joules(energy.get('bmc_joules_run'))),
        (_('Image'), report.get('image') or NO_VALUE),
        (_('Mode'), report.get('mode') or NO_VALUE),
        (_('Root file system'), report.get('rootfs') or NO_VALUE),
        (_('Node'), report.get('node_name') or report.get('node')
         or NO_VALUE),
        (_('Deploy ID'), report.get('deploy_id') or NO_VALUE),
        (_('Created'), when(report.get('created')) or NO_VALUE),
    ]
    if report.get('error'):
        rows.append((_('Error'), report['error']))
    return rows


def _shown(value):
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return NO_VALUE if value is None else str(value)


def tunables(report):
    """Rows of the tunables read back: knob, requested, actual, status
    (ok, mismatch, not applied, unsupported) and why."""
    rows = []
    for knob, item in sorted((report.get('tunables') or {}).items()):
        if not isinstance(item, dict):
            rows.append({'knob': knob, 'requested': NO_VALUE,
                         'actual': _shown(item), 'status': _('ok'),
                         'ok': True, 'why': ''})
            continue
        row = {'knob': knob, 'requested': _shown(item.get('requested')),
               'actual': _shown(item.get('actual')), 'why': ''}
        if item.get('supported') is False:
            row.update(status=_('unsupported'), ok=None,
                       why=item.get('reason') or '')
        elif item.get('ok') is False:
            row.update(status=_('not applied'), ok=False,
                       why=item.get('error') or '')
        elif ('requested' in item and 'actual' in item
              and item['requested'] != item['actual']):
            row.update(status=_('mismatch'), ok=False)
        else:
            row.update(status=_('ok'), ok=True)
        rows.append(row)
    return rows


def output(text, full):
    """The output as the page shows it: the last OUTPUT_SHOWN characters,
    whether it is the whole kept output, and whether it was cut here."""
    text = text or ''
    cut = len(text) > OUTPUT_SHOWN
    return {'text': text[-OUTPUT_SHOWN:] if cut else text, 'full': full,
            'cut': cut, 'shown_kib': OUTPUT_SHOWN // 1024}


def chart(report, kind, title, draw):
    """A chart of the report as inline SVG: ``{"kind", "title", "svg"}``,
    or ``{"kind", "title", "reason"}`` when the report has no data for it
    (``ChartUnavailable``) or it could not be drawn."""
    out = {'kind': kind, 'title': title, 'svg': None, 'reason': None}
    try:
        svg = getattr(charts, draw)(report, 'svg').decode('utf-8')
    except charts.ChartUnavailable as exc:
        out['reason'] = exc.reason
        return out
    except Exception:
        LOG.exception('The %s chart of run %s could not be drawn', kind,
                      report.get('deploy_id'))
        out['reason'] = _('The chart could not be drawn; the log of '
                          'Horizon says why.')
        return out
    svg = _PROLOG.sub('', svg, count=1)
    if not svg.startswith('<svg') or _ACTIVE.search(svg):
        LOG.error('The %s chart of run %s is not an SVG to inline',
                  kind, report.get('deploy_id'))
        out['reason'] = _('The chart could not be shown.')
        return out
    # Its own class (sized by the page) and its style rules kept to it.
    svg = svg.replace('<svg ', '<svg class="bmc-chart bmc-chart-%s" '
                      'role="img" ' % kind, 1)
    svg = svg.replace('*{stroke-linejoin', '.bmc-chart *{stroke-linejoin', 1)
    # Drawn here from numbers and texts that matplotlib escapes, and
    # checked above for anything active.
    out['svg'] = safestring.mark_safe(svg)  # noqa: S308
    return out


def all_charts(report):
    return [chart(report, kind, title, draw)
            for kind, title, draw in CHARTS]
