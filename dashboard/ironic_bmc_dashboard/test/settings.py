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

"""Horizon's test settings with this plugin enabled:
``DJANGO_SETTINGS_MODULE=ironic_bmc_dashboard.test.settings``.

An operator copies the enabled file into Horizon's enabled directory;
here the plugin's ``enabled`` directory is added to the path of
``openstack_dashboard.enabled``, which Horizon's test settings read
(``pkgutil.iter_modules`` over the package's ``__path__``), so the file
is read exactly as a copied one would be.
"""

import os

import openstack_dashboard.enabled

import ironic_bmc_dashboard.enabled

openstack_dashboard.enabled.__path__.extend(
    ironic_bmc_dashboard.enabled.__path__)

from openstack_dashboard.test.settings import *  # noqa: E402,F403

# The plugin's log lines with Horizon's (not on the console of a test
# run).
LOGGING['loggers']['ironic_bmc_dashboard'] = {  # noqa: F405
    'handlers': ['test'], 'propagate': False}

# JUnit of the run when tox -e dashboard runs unittest-xml-reporting's
# runner: where the other tiers write theirs (tox sets BMC_JUNIT_DIR), for
# .ci/run's summary.
TEST_OUTPUT_DIR = os.environ.get('BMC_JUNIT_DIR', 'junit')
TEST_OUTPUT_FILE_NAME = 'junit-dashboard.xml'
TEST_OUTPUT_DESCRIPTIONS = False
