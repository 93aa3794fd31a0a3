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

"""The canvas every chart of the CLI and Horizon plugins draws on.

A figure of its own per chart, the title block, and the rendering to PNG
or SVG, without pyplot and without choosing a backend for the process:
each chart is a :class:`matplotlib.figure.Figure` drawn by the Agg
canvas (PNG) or the SVG one, so importing this module changes nothing
for a program (Horizon, a notebook) that uses matplotlib itself.  The
output holds no date, software version or random id: the same data
gives the same bytes.  The run charts (:mod:`.charts`), the noise
histogram (:mod:`.noise_chart`) and the sweep's charts
(:mod:`.sweep_charts`) all draw with it.
"""

import io

import matplotlib
from matplotlib.backends import backend_agg
from matplotlib import figure

FORMATS = ('png', 'svg')

DPI = 110
# No date or software version in the files: the same report gives the
# same bytes.
_METADATA = {'png': {'Software': None},
             'svg': {'Date': None, 'Creator': None}}


class ChartUnavailable(Exception):
    """The report holds no data for this chart; the message says why."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def check_format(fmt):
    if fmt not in FORMATS:
        raise ValueError('unknown chart format %r; one of: %s'
                         % (fmt, ', '.join(FORMATS)))


def new_figure(width, height):
    """A figure of ``width`` x ``height`` inches, laid out by matplotlib."""
    fig = figure.Figure(figsize=(width, height), dpi=DPI,
                        layout='constrained')
    fig.get_layout_engine().set(h_pad=0.12, w_pad=0.12)
    return fig


def title(ax, what, report, summary):
    """The chart's title (what, the node, the deploy) and the image and
    ``summary`` under it."""
    node = report.get('node_name') or report.get('node') or '?'
    deploy = report.get('deploy_id') or '?'
    ax.figure.suptitle('%s - node %s, deploy %s'
                       % (what, node, deploy[:8]),
                       x=0.02, ha='left', fontsize=11, fontweight='bold')
    lines = [report.get('image') or '', summary or '']
    ax.set_title('\n'.join(line for line in lines if line), loc='left',
                 fontsize=8.5, color='#444444')


def render(fig, fmt):
    """The figure's bytes as ``fmt`` (one of FORMATS)."""
    backend_agg.FigureCanvasAgg(fig)
    out = io.BytesIO()
    # The SVG's element ids from a fixed salt, not a random one.
    with matplotlib.rc_context({'svg.hashsalt': 'ironic-bmc-client'}):
        fig.savefig(out, format=fmt, metadata=_METADATA[fmt])
    return out.getvalue()
