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

"""The PGKO loop on the lab (``bmc-lab bench --pgo``).

Not in CI: three kernel builds (about 5, 6 and 6 minutes on two cores)
and a profiling run plus the comparison runs on TCG nodes take about half
an hour, more than CI has left.  The loop runs twice: the first builds,
profiles and compares; the second, with the same image and workload,
must find every build cached and reuse the profile.

The workload is kernel work on purpose (the demo image's busybox): it
forks and execs ``true`` ``PGO_N`` times and copies 100000 blocks of 64
bytes through ``dd`` (about 200000 read and write calls), and prints
``{"seconds", "forks_per_s"}``.
"""

import json
import os
import subprocess

from bmc_lab import container_job
from bmc_lab import osc
from bmc_lab import procs

PACKAGES = ('linux-source-6.1', 'flex', 'bison', 'libelf-dev', 'bc')
HOST_SETUP = os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), 'tools', 'host-setup.sh')

WORKLOAD = (
    "n=${PGO_N:-1500}; t0=$(awk '{print $1}' /proc/uptime); i=0; "
    "while [ $i -lt $n ]; do /bin/true; i=$((i+1)); done; "
    "/bin/busybox dd if=/dev/zero of=/dev/null bs=64 count=100000 "
    "2>/dev/null; t1=$(awk '{print $1}' /proc/uptime); uname -v; "
    "awk -v n=$n -v a=$t0 -v b=$t1 'BEGIN{d=b-a; if (d<=0) d=0.01; "
    "printf \"{\\\"seconds\\\": %.2f, \\\"forks_per_s\\\": %.1f}\\n\", d, "
    "n/d}'")


def ensure_packages(out=print):
    """What a kernel build needs on the conductor host (Debian)."""
    missing = [p for p in PACKAGES if subprocess.run(
        ['dpkg-query', '-W', '-f=${Status}', p], capture_output=True,
        text=True, check=False).stdout.find('ok installed') < 0]
    if not missing:
        return
    out('Installing what kernel builds need: %s' % ' '.join(missing))
    env = dict(os.environ, BMC_HOST_KERNEL_BUILD='1')
    if subprocess.run(['bash', HOST_SETUP], env=env,
                      check=False).returncode != 0:
        raise procs.LabError('tools/host-setup.sh could not install %s'
                             % ' '.join(missing))


def loop(settings, image, out_dir, repeat, reprofile=False):
    """One ``openstack baremetal container pgo``; its pgo.json."""
    args = ['baremetal', 'container', 'pgo',
            '--node', settings.node_name(0), '--image', image,
            '--command', json.dumps(['/bin/sh', '-c', WORKLOAD]),
            '--metric-json', 'forks_per_s', '--repeat', str(repeat),
            '--output-dir', out_dir, '--timeout', '1200',
            '--interval', '3', '-f', 'json']
    if reprofile:
        args.append('--reprofile')
    code, stdout, stderr = osc.openstack(settings, *args, capture=True,
                                         timeout=4 * 3600)
    if code != 0:
        raise procs.LabError('the pgo loop failed: %s' % stderr[-2000:])
    with open(os.path.join(out_dir, 'pgo.json')) as f:
        state = json.load(f)
    state['table'] = json.loads(stdout)
    state['progress'] = stderr
    return state


def _row(state, kernel):
    return next((r for r in state['table'] if r['kernel'] == kernel), {})


def _round(value, digits=2):
    return None if value is None else round(value, digits)


def summarize(first, second):
    """The bench's JSON fields from the two loops."""
    builds = first['builds']
    cells = {c['kernel']: c for c in first.get('summary') or ()}
    pgo_build = builds['pgo'].get('build') or {}
    used = pgo_build.get('profile') or {}
    return {
        'pgo_build_s': {k: builds[k].get('seconds')
                        for k in ('plain', 'gcov', 'pgo')},
        'pgo_profile_files': first['profile'].get('files'),
        'pgo_profile_bytes': first['profile'].get('bytes'),
        'pgo_profile_objects_without_profile':
            used.get('objects_without_profile'),
        'pgo_uname_v': first.get('uname_v'),
        'pgo_metric_median': {k: cells.get(k, {}).get('metric_median')
                              for k in ('plain', 'pgo')},
        'pgo_workload_s': {k: _round(cells.get(k, {}).get('workload_s'))
                           for k in ('plain', 'pgo')},
        'pgo_change': _row(first, 'pgo').get('change'),
        'pgo_break_even_runs': _row(first, 'pgo').get('break-even (runs)'),
        'pgo_loop_s': _round(first.get('loop_seconds')),
        'pgo_where_measured': first.get('where_measured'),
        'pgo_second_loop_cached': {
            k: bool(second['builds'][k].get('cached'))
            for k in ('plain', 'gcov', 'pgo')},
        'pgo_second_loop_profile_reused': (
            second['profile']['deploy_id']
            == first['profile']['deploy_id']),
    }


def run(settings, out=print, repeat=2):
    """Both loops on lab node 0; the bench's JSON fields."""
    ensure_packages(out=out)
    container_job.reclaim(settings, out=out)
    image = container_job.push_demo_image(settings)
    out_dir = settings.path('pgo')
    out('PGKO loop 1 (builds, profile, %d runs per kernel) ...' % repeat)
    first = loop(settings, image, out_dir, repeat, reprofile=True)
    out(first['progress'])
    out('PGKO loop 2 (same image and workload: cached builds) ...')
    second = loop(settings, image, out_dir, 1)
    out(second['progress'])
    return summarize(first, second)


def format_rows(result):
    """The loop's lines of the bench's table."""
    builds = result.get('pgo_build_s') or {}
    metric = result.get('pgo_metric_median') or {}
    work = result.get('pgo_workload_s') or {}
    cached = result.get('pgo_second_loop_cached') or {}
    lines = [
        'PGKO (node 0, the demo image forking and copying):',
        '  kernel builds (s): plain %s, gcov %s, pgo %s' % (
            builds.get('plain'), builds.get('gcov'), builds.get('pgo')),
        '  profile: %s .gcda files, %s bytes; %s objects compiled without '
        'profile data' % (result.get('pgo_profile_files'),
                          result.get('pgo_profile_bytes'),
                          result.get('pgo_profile_objects_without_profile')),
        '  forks/s (median): plain %s, pgo %s (%s); workload s: plain %s, '
        'pgo %s' % (metric.get('plain'), metric.get('pgo'),
                    result.get('pgo_change'), work.get('plain'),
                    work.get('pgo')),
        '  loop %s s; break-even %s runs' % (
            result.get('pgo_loop_s'), result.get('pgo_break_even_runs')),
        '  uname -v: %s' % json.dumps(result.get('pgo_uname_v')),
        '  second loop: builds cached %s, profile reused %s' % (
            json.dumps(cached), result.get('pgo_second_loop_profile_reused')),
        '  ' + str(result.get('pgo_where_measured')),
    ]
    return '\n'.join(lines)
