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
