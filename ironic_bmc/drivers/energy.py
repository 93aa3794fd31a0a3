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

"""BMC power sampling over a container run, and its energy in the report.

Sampling starts at power-on and stops at power-off (job mode) or tear
down; the report gets the energy of the whole run and of the workload
window only (firmware, boot and shutdown excluded), with the method,
sample count and period.  A BMC without power readings leaves the deploy
alone: the report says why there is no energy.  Samples live in the
conductor's memory: a conductor restart during a run loses them, and the
report says so.

A node without a BMC (power interface ``wol``) is never sampled: its
section says so from the start (``bmc: "unavailable: no BMC
(Wake-on-LAN node)"``, ``in_band_only: true``), and its energy is the
agent's RAPL measurement alone, added when the run ends.
"""

from oslo_log import log

from ironic_bmc.conf import CONF
from ironic_bmc.power import energy
from ironic_bmc.power import readers
from ironic_bmc.power import sampler
from ironic_bmc.drivers import wol_power
from ironic_bmc import run_store

LOG = log.getLogger(__name__)

#: Power interfaces of nodes without a BMC, and what the report calls
#: such a node.
NO_BMC = {wol_power.NAME: 'Wake-on-LAN node'}


def in_band_only(kind):
    """The energy section of a node without a BMC, before its RAPL."""
    return {'available': False,
            'bmc': 'unavailable: no BMC (%s)' % kind,
            'in_band_only': True,
            'reason': 'no BMC (%s): the energy is measured in-band only '
                      '(RAPL)' % kind}


def start(node):
    """Start sampling; returns None, or the energy section if impossible."""
    no_bmc = NO_BMC.get(getattr(node, 'power_interface', None))
    if no_bmc:
        return in_band_only(no_bmc)
    if not CONF.container.power_sampling:
        return {'available': False,
                'reason': '[container]power_sampling is disabled'}
    try:
        reader = readers.reader_for_node(node)
    except readers.PowerReadingUnavailable as exc:
        return {'available': False, 'reason': str(exc)}
    sampler.stop(node.uuid)
    sampler.start(node.uuid, reader, period=CONF.container.power_sample_period)
    return None


def finish(node, workload_start, workload_end, rapl=None, deploy_id=None):
    """Stop sampling; the report's energy section.

    With ``deploy_id``, the power curve is kept beside the run's report
    (:func:`ironic_bmc.run_store.save_power_series`) for its charts.
    """
    samples = sampler.stop(node.uuid)
    if samples is None:
        section = {'available': False,
                   'reason': 'no power samples on this conductor (sampling '
                             'was not started, or the conductor restarted '
                             'during the run)'}
    else:
        section = energy.summarize(samples, workload_start, workload_end)
        curve = energy.series(samples, workload_start, workload_end,
                              CONF.container.power_series_points)
        if deploy_id and curve:
            run_store.save_power_series(node.uuid, deploy_id, curve)
            section['power_series_points'] = len(curve['points'])
    section['rapl'] = _rapl(rapl)
    if section['rapl']['available']:
        section['rapl_joules_workload'] = section['rapl'].get('joules')
    return section


def with_rapl(section, rapl=None):
    """An energy section without BMC readings (``start`` gave it), with
    the agent's RAPL result added: in-band energy is reported whatever the
    BMC could give."""
    section = dict(section, rapl=_rapl(rapl))
    if section['rapl']['available']:
        section['rapl_joules_workload'] = section['rapl'].get('joules')
    return section


def _rapl(rapl):
    """The agent's RAPL result, as the report words it."""
    if not rapl:
        return {'available': False,
                'reason': 'the agent reported no RAPL measurement'}
    section = {k: v for k, v in rapl.items() if k != 'state'}
    section['available'] = rapl.get('state') == 'measured'
    return section


def stop(node):
    sampler.stop(node.uuid)
