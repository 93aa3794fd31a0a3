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

"""A test tier that ends, with its JUnit written, before CI's hard limit.

CI kills what is still running at its limit: a pytest killed that way
writes no JUnit file, and the run's summary cannot say which test ran
long.  ``.ci/run`` therefore gives the lab tiers a deadline
(``BMC_TEST_DEADLINE``, seconds since the epoch): a test that has not
started by then fails at once, without its fixtures, saying so; a test
already running is bounded by pytest-timeout's per-test limit
(``--timeout`` in tox.ini).  The tier then ends normally and its JUnit
names the tests that ran long and those that never started.

Loaded with ``-p bmc_lab.tests.deadline``; without the variable it does
nothing.
"""

import os
import time

import pytest

#: The environment variable that holds the deadline.
ENV = 'BMC_TEST_DEADLINE'
#: Where the session keeps the deadline it read.
_KEY = pytest.StashKey()


def deadline(environ=None):
    """The deadline in seconds since the epoch, or None; a value that is
    not a number is an error, not "no deadline"."""
    value = (os.environ if environ is None else environ).get(ENV, '').strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise pytest.UsageError(
            '%s=%r: expected seconds since the epoch (date +%%s)'
            % (ENV, value))


def refusal(now, when):
    """Why a test that would start at ``now`` does not start, or None."""
    if when is None or now < when:
        return None
    late = int(now - when)
    return ('not started: the tier\'s deadline (%s) passed %d:%02d ago; '
            '.ci/run sets it so the tier ends, with its JUnit written, '
            'before CI\'s hard limit: see the slowest tests of this tier'
            % (ENV, late // 60, late % 60))


def pytest_configure(config):
    config.stash[_KEY] = deadline()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    why = refusal(time.time(), item.config.stash.get(_KEY, None))
    if why:
        pytest.fail(why, pytrace=False)

