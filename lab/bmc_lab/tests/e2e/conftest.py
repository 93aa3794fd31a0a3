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

import pytest

from bmc_lab import agent
from bmc_lab import control
from bmc_lab.tests.e2e import fault_table
from bmc_lab.tests import labfixture


@pytest.fixture(scope='module')
def lab():
    """One embedded-profile lab with one node, per test module; modules
    that need another lab (faults, take-over, tenant) define their own."""
    settings = labfixture.lab_settings_for('e2e', deploy_callback_timeout=150)
    control.up(settings)
    agent.ensure(settings)
    yield settings
    control.down(settings)


def pytest_terminal_summary(terminalreporter):
    if not fault_table.ROWS:
        return
    terminalreporter.section('fault table')
    for line in fault_table.lines():
        terminalreporter.write_line(line)
