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

"""bmc_lab.tests.deadline: tests not started by the deadline fail at
once, without their fixtures, and the tier still writes its JUnit."""

import time
import xml.etree.ElementTree as ET

import pytest

from bmc_lab.tests import deadline

pytest_plugins = ['pytester']

TESTS = '''
import pytest

SET_UP = []


@pytest.fixture
def lab():
    SET_UP.append(1)
    yield


def test_first(lab):
    pass


def test_second(lab):
    assert False, 'never reached'
'''


def test_no_variable_no_deadline():
    assert deadline.deadline({}) is None
    assert deadline.refusal(time.time(), None) is None


def test_a_bad_value_is_an_error_naming_the_variable():
    with pytest.raises(pytest.UsageError, match='BMC_TEST_DEADLINE'):
        deadline.deadline({deadline.ENV: 'tomorrow'})


def test_refusal_says_how_late():
    assert deadline.refusal(100.0, 200.0) is None
    why = deadline.refusal(200.0 + 125, 200.0)
    assert why.startswith('not started: ')
    assert 'passed 2:05 ago' in why


def test_past_the_deadline_tests_fail_unset_and_junit_names_them(
        pytester, monkeypatch):
    pytester.makepyfile(test_tier=TESTS)
    monkeypatch.setenv(deadline.ENV, str(time.time() - 60))
    result = pytester.runpytest('-p', 'bmc_lab.tests.deadline',
                                '--junitxml=junit.xml')
    result.assert_outcomes(errors=2)
    result.stdout.no_fnmatch_line('*never reached*')
    cases = ET.parse(pytester.path / 'junit.xml').getroot().iter('testcase')
    messages = {c.get('name'): c.find('error').get('message')
                for c in cases}
    assert set(messages) == {'test_first', 'test_second'}
    assert all('not started' in m for m in messages.values())


def test_before_the_deadline_tests_run(pytester, monkeypatch):
    pytester.makepyfile(test_tier=TESTS)
    monkeypatch.setenv(deadline.ENV, str(time.time() + 3600))
    result = pytester.runpytest('-p', 'bmc_lab.tests.deadline')
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(['*never reached*'])
