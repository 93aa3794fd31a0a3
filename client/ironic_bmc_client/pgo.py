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

"""Profile-guided kernel optimisation for one application: the loop's
parts that talk to nothing (the command is ``osc/pgo.py``).

The loop (PGKO, SC17): build the node kernel plain and instrumented
(gcov); run the application once on the instrumented kernel, which keeps
the kernel's arc counts; rebuild the kernel with them (``pgo``); run the
application on the plain and on the optimised kernel, ``repeat`` times
each, and compare.  The build costs time once; each run of the
application gains (or loses) ``t_plain - t_pgo``: the build pays for
itself after ``build_s / (t_plain - t_pgo)`` runs, and never when the
optimised kernel is not faster.
"""

import json
import os
import time

from bmc_common import protocol

#: The two cells of the comparison, and the sweep's names for them.
PLAIN = 'plain'
PGO = 'pgo'
STATE = 'pgo.json'
COLUMNS = ('kernel', 'build', 'build s', 'uname -v', 'ok/runs',
           'metric median', 'change', 'workload s', 'T_ready s',
           'BMC J (workload)', 'break-even (runs)')

TCG_NOTE = ('TCG: no gain can be measured. The node is emulated (QEMU '
            'TCG, which models no caches or branch predictors): this run '
            'shows the loop works, not what the optimised kernel gains. '
            'Measure on hardware or KVM.')


class PgoError(Exception):
    """The loop cannot go on; the message says why and what to do."""


def wait_build(call, build_id, timeout, interval, say, sleep=time.sleep,
               clock=time.monotonic):
    """Poll a kernel build until it ends; its status when it succeeded.

    :param call: ``call(method, args)`` -> the node's vendor method's
        answer (a dict).
    :raises: PgoError naming the build, with the end of its log, when it
        failed or did not end within ``timeout``.
    """
    deadline = clock() + timeout
    last_step = None
    while True:
        status = call('kernel_build_status', {'build_id': build_id})
        state = status.get('state')
        if state == 'succeeded':
            return status
        if state == 'failed':
            raise PgoError('kernel build %s (%s) failed: %s\n%s' % (
                build_id, status.get('variant'), status.get('error'),
                _tail(status.get('log_tail') or '', 15)))
        where = status.get('step') or state
        if where != last_step:
            last_step = where
            say('  kernel build %s (%s): %s' % (
                build_id, status.get('variant'), where))
        if clock() > deadline:
            raise PgoError('kernel build %s did not end within %d s (state '
                           '%s, step %s); its log: %s' % (
                               build_id, timeout, state,
                               status.get('step'), status.get('log')))
        sleep(interval)


def _tail(text, lines):
    return '\n'.join(text.rstrip('\n').split('\n')[-lines:])


def profile_key(image, patch, gcov_build):
    """What a profile depends on: the image, the workload's keys, the
    instrumented kernel."""
    return json.dumps({'image': image, 'patch': patch,
                       'gcov_build': gcov_build}, sort_keys=True)


def load_state(directory):
    try:
        with open(os.path.join(directory, STATE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_state(directory, state):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, STATE)
    with open(path + '.tmp', 'w') as f:
        json.dump(state, f, indent=1, sort_keys=True)
        f.write('\n')
    os.replace(path + '.tmp', path)


def check_profile(report):
    """The ``kernel_profile`` section of a profiling run's report.

    :raises: PgoError when the run failed or kept no profile.
    """
    section = report.get('kernel_profile') or {}
    if report.get('state') != protocol.RUN_FINISHED or report.get(
            'workload_exit_code') != 0:
        raise PgoError('the profiling run %s did not finish cleanly (state '
                       '%s, exit code %s): %s' % (
                           report.get('deploy_id'), report.get('state'),
                           report.get('workload_exit_code'),
                           report.get('error') or 'see its output'))
    if not section or section.get('error'):
        raise PgoError('the profiling run %s kept no kernel profile: %s' % (
            report.get('deploy_id'),
            section.get('error') or 'the report has no kernel_profile'))
    return section


def break_even_runs(build_seconds, base_seconds, pgo_seconds):
    """Runs of the application after which the build has paid for
    itself, or None when the optimised kernel is not faster."""
    if None in (build_seconds, base_seconds, pgo_seconds):
        return None
    gain = base_seconds - pgo_seconds
    if gain <= 0:
        return None
    return build_seconds / gain


def change(base, value, higher_is_better=True):
    """The metric's relative change against the plain kernel, signed so
    that + is better."""
    if base in (None, 0) or value is None:
        return None
    delta = (value - base) / abs(base)
    return delta if higher_is_better else -delta


def _num(value, fmt='%.1f'):
    return '-' if value is None else fmt % value


def table(summary, builds, higher_is_better=True):
    """The before/after rows (:data:`COLUMNS`) from the sweep's cell
    summary and the builds' statuses (``{"plain": status, "pgo":
    status}``, each with the ``uname_v`` of its runs)."""
    cells = {entry['kernel']: entry for entry in summary}
    base = cells.get(PLAIN) or {}
    rows = []
    for name in (PLAIN, PGO):
        entry = cells.get(name)
        if entry is None:
            continue
        build = builds.get(name) or {}
        seconds = build.get('seconds')
        if name == PLAIN:
            delta, even = 'baseline', 'baseline'
        else:
            moved = change(base.get('metric_median'),
                           entry.get('metric_median'), higher_is_better)
            delta = '-' if moved is None else '%+.1f %%' % (moved * 100)
            runs = break_even_runs(build.get('loop_seconds', seconds),
                                   base.get('workload_s'),
                                   entry.get('workload_s'))
            even = _num(runs, '%.3g') if runs is not None else (
                'never' if entry.get('ok') else '-')
        rows.append((
            name, build.get('build_id', '-'),
            '%s%s' % (_num(seconds), ' (cached)' if build.get('cached')
                      else ''),
            build.get('uname_v') or '-',
            '%d/%d' % (entry.get('ok', 0), entry.get('runs', 0)),
            _num(entry.get('metric_median'), '%.4g'), delta,
            _num(entry.get('workload_s')), _num(entry.get('t_ready_s')),
            _num(entry.get('bmc_joules_workload')), even))
    return rows


def where_measured(machine):
    """One line: where the runs were measured, and what that allows."""
    machine = machine or {}
    if machine.get('emulated'):
        return TCG_NOTE
    what = machine.get('cpu_model') or 'an unknown CPU'
    if machine.get('hypervisor'):
        return ('Measured in a virtual machine (%s, clocksource %s): a '
                'gain there may differ on hardware.'
                % (what, machine.get('clocksource') or '?'))
    return 'Measured on hardware: %s.' % what
