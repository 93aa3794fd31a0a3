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

"""Energy from BMC power samples.

Power is taken to vary linearly between two samples, so energy is the
trapezoid rule over (timestamp, watts) samples.  A window [start, end] is
clipped to what the samples cover, with the power at each edge
interpolated between the samples either side of it.  Beyond the first
and last sample the nearest reading may be held for at most ``hold``
seconds (``summarize`` uses one sampling period, so a workload that
starts or ends between two polls is not cut short); the rest of a window
is reported as not covered rather than guessed.  Gaps (failed reads) are
bridged linearly and reported as ``max_gap_s``.
"""

import bisect

METHOD_UNKNOWN = 'unknown'


def _interpolate(points, t):
    """Watts at ``t`` within [points[0].t, points[-1].t]."""
    times = [p[0] for p in points]
    i = bisect.bisect_left(times, t)
    if i < len(points) and times[i] == t:
        return points[i][1]
    (t0, w0), (t1, w1) = points[i - 1], points[i]
    return w0 + (w1 - w0) * (t - t0) / (t1 - t0)


def integrate(samples, start=None, end=None, hold=0.0):
    """Joules of ``samples`` over [start, end].

    :param samples: (timestamp, watts) pairs in time order.
    :param start, end: the window; None means the first/last sample.
    :param hold: seconds the first/last reading may be held beyond the
        samples to fill the window.
    :returns: dict with ``joules``, ``covered_s`` (seconds of the window
        the samples cover), ``samples`` (how many lie in the window) and
        ``max_gap_s`` (longest interval between samples in the window).
    """
    points = sorted((float(t), float(w)) for t, w in samples)
    # Equal timestamps: keep the last reading.
    dedup = []
    for p in points:
        if dedup and dedup[-1][0] == p[0]:
            dedup[-1] = p
        else:
            dedup.append(p)
    points = dedup
    measured = [t for t, _ in points]
    empty = {'joules': 0.0, 'covered_s': 0.0, 'samples': 0,
             'max_gap_s': 0.0}
    if not points:
        return empty
    start = points[0][0] if start is None else float(start)
    end = points[-1][0] if end is None else float(end)
    if end < start:
        raise ValueError('the energy window ends (%s) before it starts '
                         '(%s)' % (end, start))
    count = sum(1 for t, _ in points if start <= t <= end)
    hold = max(0.0, float(hold))
    first_t, first_w = points[0]
    last_t, last_w = points[-1]
    if hold and start < first_t:
        points.insert(0, (max(start, first_t - hold), first_w))
    if hold and end > last_t:
        points.append((min(end, last_t + hold), last_w))
    lo = max(start, points[0][0])
    hi = min(end, points[-1][0])
    if hi <= lo:
        return dict(empty, samples=count)
    inner = [p for p in points if lo < p[0] < hi]
    path = [(lo, _interpolate(points, lo))] + inner + [
        (hi, _interpolate(points, hi))]
    joules = 0.0
    max_gap = 0.0
    for (t0, w0), (t1, w1) in zip(path, path[1:], strict=False):
        joules += (w0 + w1) / 2.0 * (t1 - t0)
    real = [t for t in measured if lo <= t <= hi]
    # Gaps between actual samples (edges are interpolated, not gaps).
    for a, b in zip(real, real[1:], strict=False):
        max_gap = max(max_gap, b - a)
    return {'joules': joules, 'covered_s': hi - lo, 'samples': count,
            'max_gap_s': max_gap}


def _r(value, digits=3):
    return None if value is None else round(value, digits)


def summarize(samples, workload_start=None, workload_end=None,
              start_mark='workload_start', end_mark='workload_end'):
    """The BMC energy section of a run report.

    :param samples: a :class:`ironic_bmc.power.sampler.Samples`.
    :param workload_start, workload_end: the workload window (epoch
        seconds); by default the marks ``start_mark`` / ``end_mark``.  A
        window without an end runs to the last sample.
    :returns: ``{"available": false, "reason": ...}`` when there are no
        samples, else a dict with ``method``, ``bmc_joules_run``,
        ``bmc_joules_workload``, ``bmc_samples``, ``bmc_samples_workload``,
        ``period_s``, ``mean_watts_workload``, ``errors`` and details
        (``first_error``, ``run_s``, ``workload_s``,
        ``workload_covered_s``, ``max_gap_s``, ``dropped``).
    """
    points = list(samples.samples or ())
    if not points:
        reason = samples.first_error
        if not reason:
            reason = 'no BMC power samples were taken'
            if samples.started_at and samples.stopped_at:
                reason += (' (sampling ran for %.1f s)'
                           % (samples.stopped_at - samples.started_at))
        return {'available': False, 'reason': reason,
                'method': samples.method or METHOD_UNKNOWN,
                'errors': samples.errors}
    marks = samples.marks or {}
    if workload_start is None:
        workload_start = marks.get(start_mark)
    if workload_end is None:
        workload_end = marks.get(end_mark)
    period = samples.period_s or 0.0
    run = integrate(points)
    result = {
        'available': True,
        'method': samples.method or METHOD_UNKNOWN,
        'bmc_joules_run': _r(run['joules']),
        'bmc_samples': len(points),
        'period_s': period,
        'errors': samples.errors,
        'first_error': samples.first_error,
        'run_s': _r(run['covered_s']),
        'max_gap_s': _r(run['max_gap_s']),
        'dropped': samples.dropped,
        'bmc_joules_workload': None,
        'bmc_samples_workload': 0,
        'mean_watts_workload': None,
        'workload_s': None,
        'workload_covered_s': None,
    }
    if workload_start is None:
        return result
    end = workload_end
    if end is None:
        end = max(points[-1][0], workload_start)
    workload = integrate(points, workload_start, end, hold=period)
    covered = workload['covered_s']
    result.update({
        'bmc_joules_workload': _r(workload['joules']),
        'bmc_samples_workload': workload['samples'],
        'mean_watts_workload': _r(workload['joules'] / covered)
        if covered > 0 else None,
        'workload_s': _r(end - workload_start),
        'workload_covered_s': _r(covered),
    })
    return result


def series(samples, workload_start=None, workload_end=None, max_points=1000):
    """The power curve of a run, for charts: ``{"t0", "period_s",
    "points": [[seconds after t0, watts], ...], "workload": [start, end],
    "averaged": n}`` (workload bounds in seconds after t0, None when
    unknown), or None without samples.

    More than ``max_points`` samples are averaged in consecutive groups of
    ``averaged`` samples (time and watts), so the curve keeps its shape
    and its area.
    """
    points = list(samples.samples or ())
    if not points:
        return None
    group = max(1, -(-len(points) // max(1, max_points)))
    t0 = points[0][0]
    reduced = []
    for i in range(0, len(points), group):
        chunk = points[i:i + group]
        reduced.append([_r(sum(p[0] for p in chunk) / len(chunk) - t0),
                        _r(sum(p[1] for p in chunk) / len(chunk), 1)])
    marks = samples.marks or {}
    if workload_start is None:
        workload_start = marks.get('workload_start')
    if workload_end is None:
        workload_end = marks.get('workload_end')
    return {
        't0': t0,
        'period_s': samples.period_s,
        'points': reduced,
        'averaged': group,
        'workload': [None if t is None else _r(t - t0)
                     for t in (workload_start, workload_end)],
    }
