#!/usr/bin/env python3
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

"""The end of a .ci/run: where its time went, what failed, the budgets.

Reads the run's log (what .ci/run printed) and the JUnit XML files the
test tiers wrote, and prints, last, so that a truncated log still shows
it:

- the phases: the root build, each line of the quick start, each tox
  environment (tox's own summary lines), with their budgets;
- the slowest tests of the e2e tier and how many node boots it made;
- the failed tests of every tier, and the tails of the lab logs of each
  failed e2e test's lab;
- whether a phase went over its budget (exit 1, naming the phase and,
  for a test tier, its slowest tests).

Standard library only: it runs on the CI host, outside the root.

  ci_summary.py --log LOG --junit-dir DIR [--logs-root ROOT]
                [--budget PHASE=SECONDS ...]
"""

import argparse
import fnmatch
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

#: .ci/run's phase lines: "== [mm:ss] <phase>: done in mm:ss (mm:ss)".
PHASE_RE = re.compile(r'^== \[(\d+):(\d\d)\] (.+?): (done|passed|FAILED[^)]*'
                      r'\)?) in (\d+):(\d\d) \(mm:ss\)')
#: The quick start's step headers: "== [mm:ss] quick start 2/3: CMD".
STEP_RE = re.compile(r'^== \[\d+:\d\d\] quick start (\d+/\d+): (.*)$')
STEP_END_RE = re.compile(r'^== \[\d+:\d\d\] quick start (\d+/\d+): '
                         r'(done in|FAILED)')
#: tox 4's summary: "  py3: OK (12.34=setup[..]+cmd[..] seconds)".
TOX_RE = re.compile(r'^\s+([\w.-]+): (OK|FAIL|SKIP)\b.*?\(([\d.]+)'
                    r'(?:=[^)]*)? seconds\)')


#: Lab logs that never tell why a test failed.
QUIET_LOGS = ('dbsync.log', 'nginx.log', 'ganesha.log', 'virsh.log')


def mmss(seconds):
    seconds = int(round(seconds))
    return '%02d:%02d' % (seconds // 60, seconds % 60)


def read_phases(log_path):
    """[(phase, seconds, status)] in the order they ended."""
    phases = []
    steps = {}
    with open(log_path, errors='replace') as f:
        for line in f:
            line = line.rstrip('\n')
            m = STEP_RE.match(line)
            if m and not STEP_END_RE.match(line):
                steps[m.group(1)] = m.group(2)
                continue
            m = PHASE_RE.match(line)
            if m:
                name = m.group(3)
                step = re.match(r'quick start (\d+/\d+)$', name)
                if step:
                    name = 'quick start %s: %s' % (
                        step.group(1), steps.get(step.group(1), '?'))
                seconds = int(m.group(5)) * 60 + int(m.group(6))
                phases.append((name, seconds, m.group(4)))
                continue
            m = TOX_RE.match(line)
            if m:
                phases.append(('  tox -e %s' % m.group(1),
                               float(m.group(3)), m.group(2)))
    return phases


def read_junit(path):
    """[(nodeid, seconds, outcome, properties)] of one JUnit XML file.

    A failed test's properties hold ``why``: the lines of its failure
    that say why (pytest's ``E`` lines, else the message).
    """
    tests = []
    root = ET.parse(path).getroot()
    for case in root.iter('testcase'):
        nodeid = '%s::%s' % (case.get('classname', ''), case.get('name'))
        outcome = 'passed'
        props = {p.get('name'): p.get('value')
                 for p in case.iter('property')}
        for child in case:
            if child.tag in ('failure', 'error'):
                if outcome in ('passed', 'skipped'):
                    props['why'] = why_failed(child)
                outcome = 'failed' if child.tag == 'failure' else 'error'
            elif child.tag == 'skipped' and outcome == 'passed':
                outcome = 'skipped'
                props['skip_reason'] = child.get('message') or ''
        tests.append((nodeid, float(case.get('time') or 0), outcome, props))
    return tests


def why_failed(element, max_lines=12):
    """The lines of a JUnit failure/error element that say why."""
    text = element.text or ''
    lines = [ln for ln in text.splitlines() if ln.startswith('E ')]
    if not lines:
        lines = (element.get('message') or text).splitlines()[-max_lines:]
    return '\n'.join(ln.rstrip()[:240] for ln in lines[:max_lines])


def tier_of(path):
    """'e2e' of .../junit-e2e.xml."""
    return os.path.basename(path)[len('junit-'):-len('.xml')]


def failed_lab_logs(logs_root, failed, per_lab=6):
    """The logs to show for the failed tests: those of each failed test's
    own lab (its ``lab_dir`` property), else those of its tier's labs;
    newest last, at most ``per_lab`` of each lab."""
    patterns = []
    for tier, (_nodeid, _s, _o, props) in failed:
        lab_dir = props.get('lab_dir')
        pattern = (os.path.join(logs_root, os.path.basename(lab_dir), 'logs',
                                '*.log')
                   if lab_dir else os.path.join(logs_root, '%s*' % tier,
                                                'logs', '*.log'))
        if pattern not in patterns:
            patterns.append(pattern)
    logs = []
    for pattern in patterns:
        found = [p for p in sorted(glob.glob(pattern), key=os.path.getmtime)
                 if os.path.getsize(p)
                 and os.path.basename(p) not in QUIET_LOGS]
        logs += [p for p in found[-per_lab:] if p not in logs]
    return logs


def read_allowed_skips(path):
    """Patterns (fnmatch, on "tier::test id") of the skips CI accepts: one
    per line, each after a comment that says why it may skip."""
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return [ln.strip() for ln in f
                if ln.strip() and not ln.lstrip().startswith('#')]


def parse_budgets(items):
    budgets = {}
    for item in items:
        name, _, seconds = item.partition('=')
        budgets[name] = int(seconds)
    return budgets


def budget_of(phase, budgets):
    """The budget a phase line is held to: by tox env ("py3"), quick
    start step number ("quickstart-2" for "quick start 2/3: ..."), or the
    word before the phase's first colon ("root", "total")."""
    m = re.match(r'\s*tox -e (\S+)', phase)
    if m:
        return budgets.get(m.group(1))
    m = re.match(r'quick start (\d+)/', phase)
    if m:
        return budgets.get('quickstart-%s' % m.group(1))
    return budgets.get(phase.split(':', 1)[0])


def slowest_named(phase, slowest, count=5):
    """The lines that name the slowest tests behind an over-budget phase:
    its tier's for a test tier, every tier's for the whole run."""
    m = re.match(r'\s*tox -e (\S+)', phase)
    if m:
        tests = [(m.group(1), t) for t in slowest.get(m.group(1), ())]
    elif phase == 'total':
        tests = sorted(((tier, t) for tier, ts in slowest.items()
                        for t in ts), key=lambda tt: -tt[1][1])
    else:
        return []
    if not tests:
        return []
    return ['its slowest tests: ' + '; '.join(
        '%s%s %s' % ('' if m else tier + ' ', nodeid.rsplit('::', 1)[-1],
                     mmss(seconds))
        for tier, (nodeid, seconds, _o, _p) in tests[:count])]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--log', required=True)
    parser.add_argument('--junit-dir', required=True)
    parser.add_argument('--logs-root', default=None,
                        help='where the test tiers\' lab state directories '
                             'are (default: --junit-dir)')
    parser.add_argument('--total', type=int, default=None,
                        help='the run\'s wall time so far, in seconds')
    parser.add_argument('--goal', type=int, default=None,
                        help='the whole run\'s goal in seconds (a note, '
                             'not a failure, when over)')
    parser.add_argument('--budget', action='append', default=[],
                        metavar='PHASE=SECONDS')
    parser.add_argument('--top', type=int, default=10)
    parser.add_argument('--allowed-skips', default=None,
                        help='file of the skips that may happen (any '
                             'other skip fails the run)')
    args = parser.parse_args(argv)
    budgets = parse_budgets(args.budget)
    logs_root = args.logs_root or args.junit_dir
    over = []

    print('\n== CI summary')
    print('-- phases (mm:ss; budget)')
    phases = read_phases(args.log) if os.path.exists(args.log) else []
    if args.total is not None:
        phases.append(('total', args.total, ''))
    for name, seconds, status in phases:
        budget = budget_of(name, budgets)
        flag = ''
        if budget is not None and seconds > budget:
            flag = '  OVER BUDGET'
            over.append((name, seconds, budget))
        print('  %-62s %6s  %-6s %s%s' % (
            name[:62], mmss(seconds),
            mmss(budget) if budget is not None else '-', status, flag))

    if (args.goal is not None and args.total is not None
            and args.total > args.goal):
        print('  NOTE: the run took %s, over its goal of %s: make room '
              'before adding a scenario' % (mmss(args.total),
                                            mmss(args.goal)))

    allowed = read_allowed_skips(args.allowed_skips)
    bad_skips = []
    junits = sorted(glob.glob(os.path.join(args.junit_dir, 'junit-*.xml')))
    failed = []
    slowest = {}
    for path in junits:
        tier = tier_of(path)
        try:
            tests = read_junit(path)
        except (ET.ParseError, OSError) as exc:
            print('-- %s: unreadable (%s)' % (path, exc))
            continue
        slowest[tier] = sorted(tests, key=lambda t: -t[1])[:args.top]
        counts = {}
        for t in tests:
            counts[t[2]] = counts.get(t[2], 0) + 1
        print('-- %s: %d tests, %s; %s in tests' % (
            tier, len(tests), ', '.join('%d %s' % (n, o) for o, n in
                                        sorted(counts.items())),
            mmss(sum(t[1] for t in tests))))
        if tier == 'e2e':
            boots = [int(t[3]['node_boots']) for t in tests
                     if 'node_boots' in t[3]]
            print('   node boots: %s' % (
                '%d (in %d of %d tests)' % (sum(boots),
                                           sum(1 for b in boots if b),
                                           len(tests))
                if boots else 'not counted'))
            print('   slowest %d:' % len(slowest[tier]))
            for nodeid, seconds, outcome, props in slowest[tier]:
                print('   %6s  %s%s%s' % (
                    mmss(seconds), nodeid,
                    ' (boots: %s)' % props['node_boots']
                    if 'node_boots' in props else '',
                    '' if outcome == 'passed' else ' ' + outcome.upper()))
        failed += [(tier, t) for t in tests if t[2] in ('failed', 'error')]
        for nodeid, _s, outcome, props in tests:
            if outcome != 'skipped':
                continue
            key = '%s::%s' % (tier, nodeid)
            ok = any(fnmatch.fnmatchcase(key, p) for p in allowed)
            print('   skipped%s: %s (%s)' % (
                '' if ok else ' (NOT ALLOWED)', nodeid,
                props.get('skip_reason', '')[:200]))
            if not ok:
                bad_skips.append(key)

    if failed:
        print('-- FAILED tests:')
        for tier, (nodeid, seconds, outcome, _p) in failed:
            print('   %s %s (%s, %s)' % (tier, nodeid, outcome, mmss(seconds)))
        for log in failed_lab_logs(logs_root, failed):
            print('---- %s (tail)' % log)
            with open(log, errors='replace') as f:
                for line in f.readlines()[-15:]:
                    print('     ' + line.rstrip('\n')[:240])
        # Last, where a truncated log still shows it: why each failed.
        print('-- why they failed:')
        for tier, (nodeid, _s, _o, props) in failed:
            lab = props.get('lab_dir')
            print('   %s %s%s:' % (tier, nodeid, ' (lab %s)'
                                   % os.path.basename(lab) if lab else ''))
            for line in (props.get('why') or '(no message)').splitlines():
                print('     ' + line)
        print('-- FAILED: %s' % ', '.join(
            nodeid.rsplit('.', 1)[-1] for _tier, (nodeid, *_r) in failed))

    if bad_skips and args.allowed_skips:
        print('-- SKIPPED, and not on the allow-list (%s): a skip can hide '
              'a regression; fix its cause, or add it there with a comment '
              'saying why it may skip:' % args.allowed_skips)
        for key in bad_skips:
            print('   ' + key)
    if over:
        print('-- OVER BUDGET (budgets are in .ci/run):')
        for name, seconds, budget in over:
            print('   %s took %s, budget %s' % (name.strip(), mmss(seconds),
                                               mmss(budget)))
            for line in slowest_named(name, slowest):
                print('   ' + line)
        return 1
    if bad_skips and args.allowed_skips:
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
