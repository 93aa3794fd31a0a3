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

"""The e2e tier: labs handed from module to module (labpool), the
fault table, and the tests' order.

Run on two workers with ``tox -e e2e -- -n 2`` (what CI does): each
worker runs its own labs (labfixture.worker_index) and whole groups of
tests (labpool.GROUPS).
"""

import pytest

from bmc_lab.tests.e2e import boot_count
from bmc_lab.tests.e2e import fault_table
from bmc_lab.tests.e2e import labpool


def pytest_collection_modifyitems(config, items):
    labpool.order_items(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return labpool.make_scheduler(config, log)


@pytest.fixture(scope='session')
def lab_pool():
    pool = labpool.Pool()
    yield pool
    pool.close()


@pytest.fixture(scope='module')
def lab(lab_pool):
    """The embedded-profile lab with one node; modules that need another
    lab (faults, take-over, tenant, runtime) ask the pool for theirs."""
    return lab_pool.get('embedded')


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[boot_count.BEFORE] = boot_count.boots()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # What a test measured travels with its report (to the xdist
    # controller, which prints the summaries; into the JUnit XML file):
    # the fault rows it recorded, the node boots its setup, call and
    # teardown made.
    if call.when == 'call':
        item.user_properties.extend(
            (fault_table.PROPERTY, row) for row in fault_table.take())
        lab_dir = _lab_dir(item)
        if lab_dir:
            item.user_properties.append((LAB_DIR_PROPERTY, lab_dir))
    elif call.when == 'teardown':
        before = item.stash.get(boot_count.BEFORE, None)
        now = boot_count.boots()
        if before is not None and now is not None:
            item.user_properties.append((boot_count.PROPERTY, now - before))
    yield


#: JUnit property: the state directory of the lab a test ran on (CI's
#: summary prints the tails of that lab's logs when the test fails).
LAB_DIR_PROPERTY = 'lab_dir'


def _lab_dir(item):
    for value in getattr(item, 'funcargs', {}).values():
        # A lab's settings, or a fixture's tuple that holds them.
        for candidate in (value if isinstance(value, tuple) else (value,)):
            state_dir = getattr(candidate, 'state_dir', None)
            if isinstance(state_dir, str):
                return state_dir
    return None


def pytest_runtest_logreport(report):
    if report.when == 'call':
        fault_table.collect(report.user_properties)
    elif report.when == 'teardown':
        boot_count.collect(report.nodeid, report.user_properties)


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section('node boots')
    for line in boot_count.lines():
        terminalreporter.write_line(line)
    if not fault_table.ROWS:
        return
    terminalreporter.section('fault table')
    for line in fault_table.lines():
        terminalreporter.write_line(line)
