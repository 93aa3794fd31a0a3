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

"""tools/ci_summary.py: a failed e2e test's summary names why it failed
and shows its own lab's logs, not those of the lab that ran last."""

import importlib.util
import os
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="lab.bmc_lab.tests.e2e.test_container_runtime"
          name="test_walltime" time="95.0">
  <properties>
    <property name="lab_dir" value="/var/tmp/bmc-lab-ci/e2e-w1-embedded"/>
    <property name="node_boots" value="1"/>
  </properties>
  <failure message="AssertionError: assert 'finished' == 'failed'">
def test_walltime(lab):
&gt;       assert report['state'] == 'failed'
E       AssertionError: assert 'finished' == 'failed'
E         - failed
E         + finished
  </failure>
</testcase>
<testcase classname="lab.bmc_lab.tests.e2e.test_takeover" name="test_ok"
          time="30.0">
  <properties>
    <property name="lab_dir" value="/var/tmp/bmc-lab-ci/e2e-scaled"/>
  </properties>
</testcase>
</testsuite></testsuites>
"""


@pytest.fixture
def ci_summary():
    spec = importlib.util.spec_from_file_location(
        'ci_summary', os.path.join(ROOT, 'tools', 'ci_summary.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _log(path, text, mtime):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    os.utime(path, (mtime, mtime))


def test_failed_test_shows_why_and_its_own_labs_logs(ci_summary, tmp_path,
                                                     capsys):
    (tmp_path / 'junit-e2e.xml').write_text(JUNIT)
    now = time.time()
    _log(str(tmp_path / 'e2e-w1-embedded' / 'logs' / 'ironic.log'),
         'the runtime lab said this\n', now - 100)
    # The scaled lab ran last: its logs are the newest, and not the
    # failed test's.
    _log(str(tmp_path / 'e2e-scaled' / 'logs' / 'ironic.log'),
         'the scaled lab said that\n', now)
    log = tmp_path / 'run.log'
    log.write_text('')

    rc = ci_summary.main(['--log', str(log), '--junit-dir', str(tmp_path)])
    out = capsys.readouterr().out

    assert rc != 0 or 'FAILED' in out
    assert 'the runtime lab said this' in out
    assert 'the scaled lab said that' not in out
    why = out[out.index('-- why they failed:'):]
    assert 'test_walltime (lab e2e-w1-embedded)' in why
    assert "E       AssertionError: assert 'finished' == 'failed'" in why
    # Why comes after the logs, just before the closing line.
    assert out.rindex('the runtime lab said this') < out.index(
        '-- why they failed:') < out.rindex('-- FAILED: ')


def test_why_falls_back_to_the_message(ci_summary):
    import xml.etree.ElementTree as ET
    element = ET.fromstring('<error message="worker crashed">'
                            'no E lines here</error>')
    assert ci_summary.why_failed(element) == 'worker crashed'


SLOW_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="lab.bmc_lab.tests.e2e.test_faults" name="test_slow"
          time="700.0"/>
<testcase classname="lab.bmc_lab.tests.e2e.test_warm" name="test_quick"
          time="20.0"/>
<testcase classname="lab.bmc_lab.tests.e2e.test_wol" name="test_skipped"
          time="0.0"><skipped message="no WoL here"/></testcase>
</testsuite></testsuites>
"""

RUN_LOG = """== [00:00] root: building a clean Debian 12 root in /x
== [01:04] root: done in 01:04 (mm:ss)
== [01:04] quick start 3/3: tox
  e2e: OK (1900.00=setup[1.00]+cmd[1899.00] seconds)
  dashboard: OK (30.00=setup[1.00]+cmd[29.00] seconds)
"""


def _summary(ci_summary, tmp_path, capsys, *args, junit=SLOW_JUNIT,
             allowed=None):
    (tmp_path / 'junit-e2e.xml').write_text(junit)
    log = tmp_path / 'run.log'
    log.write_text(RUN_LOG)
    argv = ['--log', str(log), '--junit-dir', str(tmp_path)]
    if allowed is not None:
        skips = tmp_path / 'allowed-skips'
        skips.write_text(allowed)
        argv += ['--allowed-skips', str(skips)]
    rc = ci_summary.main(argv + list(args))
    return rc, capsys.readouterr().out


@pytest.mark.parametrize('phase,expected', [
    ('  tox -e e2e', 1800),
    ('  tox -e dashboard', 180),
    ('quick start 2/3: tox -e demo', 600),
    ('root: building a clean Debian 12 root in /x', 300),
    ('total', 2700),
    ('  tox -e recipes', None),
    ('quick start 9/9: echo', None),
])
def test_each_phase_is_held_to_its_budget(ci_summary, phase, expected):
    budgets = ci_summary.parse_budgets([
        'e2e=1800', 'dashboard=180', 'quickstart-2=600', 'root=300',
        'total=2700'])
    assert ci_summary.budget_of(phase, budgets) == expected


def test_a_tier_over_budget_fails_naming_its_slowest_test(
        ci_summary, tmp_path, capsys):
    rc, out = _summary(ci_summary, tmp_path, capsys, '--budget', 'e2e=1800',
                       allowed='e2e::*test_wol::test_skipped\n')
    assert rc == 1
    over = out[out.index('-- OVER BUDGET'):]
    assert 'tox -e e2e took 31:40, budget 30:00' in over
    assert 'its slowest tests: test_slow 11:40; test_quick 00:20' in over


def test_the_whole_run_over_budget_names_every_tiers_slowest(
        ci_summary, tmp_path, capsys):
    rc, out = _summary(ci_summary, tmp_path, capsys, '--total', '2800',
                       '--budget', 'total=2700',
                       allowed='e2e::*test_wol::test_skipped\n')
    assert rc == 1
    over = out[out.index('-- OVER BUDGET'):]
    assert 'total took 46:40, budget 45:00' in over
    assert 'its slowest tests: e2e test_slow 11:40' in over


def test_within_budget_and_allowed_skips_pass(ci_summary, tmp_path, capsys):
    rc, out = _summary(ci_summary, tmp_path, capsys, '--total', '2000',
                       '--budget', 'total=2700', '--budget', 'e2e=2000',
                       allowed='# WoL needs a port\n'
                               'e2e::*test_wol::test_skipped\n')
    assert rc == 0, out
    assert 'skipped: lab.bmc_lab.tests.e2e.test_wol::test_skipped' in out
    assert 'OVER BUDGET' not in out


def test_a_skip_not_on_the_list_fails_the_run(ci_summary, tmp_path, capsys):
    rc, out = _summary(ci_summary, tmp_path, capsys,
                       allowed='# another test only\ne2e::*::test_other\n')
    assert rc == 1
    assert 'skipped (NOT ALLOWED): lab.bmc_lab.tests.e2e.test_wol' in out
    assert 'e2e::lab.bmc_lab.tests.e2e.test_wol::test_skipped' in out[
        out.index('-- SKIPPED, and not on the allow-list'):]


def test_comments_are_not_patterns(ci_summary, tmp_path):
    path = tmp_path / 'skips'
    path.write_text('# e2e::*\n\n  e2e::a::b  \n')
    assert ci_summary.read_allowed_skips(str(path)) == ['e2e::a::b']


def _ci_run():
    with open(os.path.join(ROOT, '.ci', 'run')) as f:
        return f.read()


def _ci_run_budgets():
    text = _ci_run()
    block = text[text.index('BUDGETS=(') + len('BUDGETS=('):]
    block = block[:block.index('\n)')]
    budgets = {}
    for line in block.splitlines():
        line = line.split('#', 1)[0].strip()
        if line:
            key, _, value = line.partition('=')
            budgets[key] = int(value)
    return budgets


def _tox_envlist():
    import configparser
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(os.path.join(ROOT, 'tox.ini'))
    return [e.strip() for e in tox['tox']['envlist'].split(',')]


def test_ci_run_budgets_every_phase_it_runs_and_nothing_else():
    budgets = _ci_run_budgets()
    envs = _tox_envlist()
    steps = {k for k in budgets if k.startswith('quickstart-')}
    assert set(budgets) - steps == set(envs) | {'root', 'total'}
    # The quick start's steps, from README.rst as .ci/run reads them.
    with open(os.path.join(ROOT, 'README.rst')) as f:
        readme = f.read()
    quick = readme[readme.index('.. begin-quick-start'):
                   readme.index('.. end-quick-start')]
    commands = [ln for ln in quick.splitlines()
                if ln.startswith('    ') and ln.strip()]
    assert steps <= {'quickstart-%d' % i
                     for i in range(1, len(commands) + 1)}
    # Every phase fits in the whole run, and the whole run in CI's limit
    # with the lab tiers' deadline margin (a test's limit and the end).
    assert all(v <= budgets['total'] for v in budgets.values())
    text = _ci_run()
    limit = int(text.split('LIMIT=${BMC_CI_TIMEOUT:-', 1)[1].split('}')[0])
    timeout = int(text.split('\nTEST_TIMEOUT=', 1)[1].split()[0])
    margin = int(text.split('\nEND_MARGIN=', 1)[1].split()[0])
    assert budgets['total'] + timeout + margin <= limit
    # The goal the budgets move to: 45 minutes.
    assert int(text.split('\nGOAL=', 1)[1].split()[0]) == 45 * 60
