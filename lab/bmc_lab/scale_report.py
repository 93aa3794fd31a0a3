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

"""The scale benchmark's numbers: a run's result, its table rows, its JSON.

:func:`summarize` makes a run's result from what it measured (deploys
per minute, CPU per deploy against Ironic's ``fake`` deploy, the
plugin's share, peak RSS, builds, HTTP bytes, T_ready, failures);
:func:`format_rows` and :func:`json_fields` are how ``bmc-lab scale``
and ``bmc-lab bench`` print them.
"""

from bmc_common import protocol


def _stage_end(report, name):
    return next((s['end'] for s in report.get('stages', ())
                 if s['name'] == name), None)


def summarize(count, conductors, requested, seconds, done, failed, reports,
              used, rss, builds, fake, agents, http_total, http_artifacts,
              profile=None):
    for uuid, report in reports.items():
        if uuid in done and (report.get('state') != 'finished'
                             or report.get('workload_exit_code') != 0):
            failed[uuid] = 'run report %s, exit code %s' % (
                report.get('state'), report.get('workload_exit_code'))
    t_ready = sorted(
        _stage_end(r, protocol.STAGE_WORKLOAD_STARTED) - requested[u]
        for u, r in reports.items()
        if _stage_end(r, protocol.STAGE_WORKLOAD_STARTED))
    cpu = sum(v for k, v in used.items() if k != 'ironic-api')
    per_deploy = cpu * 1000 / count
    return {
        'nodes': count,
        'conductors': conductors,
        'seconds': round(seconds, 1),
        # Only the runs that ended as asked.
        'deploys_per_min': round(len(
            [u for u in done if u not in failed]) * 60 / seconds, 1),
        'conductor_cpu_ms_per_deploy': round(per_deploy, 1),
        'fake_deploy_cpu_ms_per_deploy': fake['cpu_ms_per_deploy'],
        'conductor_cpu_ms_per_deploy_over_fake': round(
            per_deploy - fake['cpu_ms_per_deploy'], 1),
        'api_cpu_ms_per_deploy': round(used['ironic-api'] * 1000 / count, 1),
        # The plugin's own share of it (see cpu_profile), or why unknown.
        'plugin_cpu_ms_per_deploy': (
            round(per_deploy * profile['plugin'], 1)
            if profile and 'plugin' in profile else None),
        'cpu_profile': profile or {'error': 'not sampled'},
        'conductor_peak_rss_mb': round(max(
            v for k, v in rss.items() if k != 'ironic-api'), 1),
        'builds_per_conductor': builds,
        'http_bytes': http_total,
        'http_artifact_bytes': http_artifacts,
        't_ready_p50_s': (round(t_ready[len(t_ready) // 2], 2)
                          if t_ready else None),
        't_ready_max_s': round(t_ready[-1], 2) if t_ready else None,
        'failures': len(failed),
        'failed': dict(list(failed.items())[:5]),
        'agent_errors': agents.errors[:5],
        'agent_stats': dict(agents.stats),
    }


def format_rows(runs):
    rows = []
    for r in runs:
        head = 'scale: %d nodes, %d conductor(s)' % (r['nodes'],
                                                     r['conductors'])
        rows += [
            (head, '%.1f deploys/min (%.1f s for all; T_ready p50 %s s, '
             'max %s s)' % (r['deploys_per_min'], r['seconds'],
                            r['t_ready_p50_s'], r['t_ready_max_s'])),
            ('  conductor CPU per deploy', '%.1f ms (Ironic\'s fake deploy '
             '%.1f ms; over it %.1f ms; goal <= 50)' % (
                 r['conductor_cpu_ms_per_deploy'],
                 r['fake_deploy_cpu_ms_per_deploy'],
                 r['conductor_cpu_ms_per_deploy_over_fake'])),
            ('  of it the plugin\'s own code (py-spy, goal <= 50)',
             _plugin_row(r)),
            ('  ironic-api CPU per deploy',
             '%.1f ms' % r['api_cpu_ms_per_deploy']),
            ('  conductor peak RSS', '%.1f MB' % r['conductor_peak_rss_mb']),
            ('  rootfs builds per conductor (goal 1)',
             ', '.join('%s %d' % kv for kv in
                       sorted(r['builds_per_conductor'].items()))),
            ('  HTTP-root bytes served', '%.1f MB (artifacts %.1f MB)' % (
                r['http_bytes'] / 1e6, r['http_artifact_bytes'] / 1e6)),
            ('  nodes per conductor (hash ring)', ', '.join(
                '%s %d' % kv for kv in sorted(
                    r.get('nodes_per_conductor', {}).items()))),
            ('  failures (goal 0)', str(r['failures'])),
        ]
    return rows


def _plugin_row(r):
    profile = r.get('cpu_profile') or {}
    if r.get('plugin_cpu_ms_per_deploy') is None:
        return 'unknown: %s' % profile.get('error', 'not sampled')
    top = ', '.join('%s %.0f%%' % (f.split(' ')[0], share * 100)
                    for f, share in profile['plugin_top'][:3])
    return '%.1f ms (%.1f%% of %d samples; most in %s)' % (
        r['plugin_cpu_ms_per_deploy'], profile['plugin'] * 100,
        profile['samples'], top)



def json_fields(runs):
    """The bench's JSON keys: ``scale_*`` of the one-conductor run, and
    ``scale<N>c_*`` of the others."""
    out = {}
    for r in runs:
        prefix = 'scale_' if r['conductors'] == 1 else 'scale%dc_' % (
            r['conductors'])
        out.update({
            prefix + 'nodes': r['nodes'],
            prefix + 'deploys_per_min': r['deploys_per_min'],
            prefix + 'conductor_cpu_ms_per_deploy':
                r['conductor_cpu_ms_per_deploy'],
            prefix + 'conductor_cpu_ms_per_deploy_over_fake':
                r['conductor_cpu_ms_per_deploy_over_fake'],
            prefix + 'plugin_cpu_ms_per_deploy':
                r.get('plugin_cpu_ms_per_deploy'),
            prefix + 'conductor_peak_rss_mb': r['conductor_peak_rss_mb'],
            prefix + 'builds_per_image': max(
                r['builds_per_conductor'].values()),
            prefix + 'http_bytes': r['http_bytes'],
            prefix + 'failures': r['failures'],
        })
    return out
