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

"""The report's ``stream`` section: how a streamed root became local.

Started from the staging step's result (the bound of the node's block
cache, the background rate, why the image will not become local when the
cache is smaller than it), then brought up to date from the background
fetch's progress in the agent's workload status: when the image became
fully local, how long after the workload started, what was fetched.
"""

from bmc_common import protocol
from ironic_bmc import report as run_report


def start(node, report, result):
    """The section as staging left it (a no-op outside stream mode)."""
    stream = result.get('stream')
    if not stream:
        return
    section = {
        'cache_max': stream.get('cache_max'),
        'background_rate': stream.get('background_rate'),
        'fully_local': False,
        'fully_local_after_start_s': None,
        'background_fetch_s': None,
        'bytes_fetched': result.get('bytes'),
    }
    if stream.get('not_local_reason'):
        section['not_local_reason'] = stream['not_local_reason']
    run_report.update(node, report, stream=section)


def news(report, status):
    """Whether ``status`` says something the report must keep now: the
    image became fully local, or the background fetch failed."""
    section = report.get('stream')
    progress = (status or {}).get('stream')
    if not section or not progress:
        return False
    return bool((progress.get('fully_local_at') and not section['fully_local'])
                or (progress.get('error')
                    and progress['error'] != section.get('error')))


def record(node, report, status):
    """Bring the section up to date from a workload status."""
    section = report.get('stream')
    progress = (status or {}).get('stream')
    if not section or not progress:
        return
    section = dict(section)
    if section.get('cache_max'):
        # Blocks dropped from a bounded cache are fetched again when read:
        # what crossed the wire is at least what the cache holds.
        section['bytes_fetched'] = None
        section['bytes_cached'] = progress.get('cached_bytes')
    else:
        # Each block is fetched once and kept.
        section['bytes_fetched'] = progress.get('cached_bytes',
                                                section['bytes_fetched'])
    section['background_bytes'] = progress.get('bytes')
    section['background_yielded_s'] = progress.get('yielded_s')
    if progress.get('error'):
        section['error'] = progress['error']
    local_at = progress.get('fully_local_at')
    if local_at:
        section['fully_local'] = True
        if progress.get('started'):
            section['background_fetch_s'] = round(
                local_at - progress['started'], 3)
        started = {s['name']: s for s in report['stages']}.get(
            protocol.STAGE_WORKLOAD_STARTED)
        if started:
            # Blocks read before the start were fetched on demand; the
            # image may even have been local by then (a small one).
            section['fully_local_after_start_s'] = round(
                max(0.0, local_at - started['end']), 3)
    run_report.update(node, report, stream=section)
