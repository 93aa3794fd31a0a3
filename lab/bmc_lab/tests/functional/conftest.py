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

"""Tests that call the conductor's image pipeline in this process (not
through a lab's Ironic, whose configuration the lab writes)."""

import os

import pytest

from ironic_bmc.conf import CONF


@pytest.fixture(autouse=True)
def loopback_registries_listed():
    """The tests' registries are on loopback: listed, as an operator lists
    the registries of its own network (the lab's ironic.conf does the
    same), and trusted with credentials."""
    CONF.set_override('allowed_registries', ['127.0.0.1'], 'container')
    CONF.set_override('credential_registries', ['127.0.0.1'], 'container')
    yield
    CONF.clear_override('allowed_registries', 'container')
    CONF.clear_override('credential_registries', 'container')


#: The tier's longest module (a whole cloud comes up: about 160 of its 350
#: seconds), collected first so that one worker starts on it while the
#: other runs the rest (pytest-xdist hands out modules in collection order).
LONGEST_FIRST = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             'test_cloud_profile.py')


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: str(item.path) != LONGEST_FIRST)
