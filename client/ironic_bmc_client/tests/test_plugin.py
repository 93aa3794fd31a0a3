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

"""The OSC plugin: what python-openstackclient needs of it."""

import argparse
import importlib.metadata
from unittest import mock

from ironic_bmc_client.osc import plugin
from ironic_bmc_client import runs


def test_make_client():
    instance = mock.Mock(session=mock.sentinel.session, interface='internal',
                         region_name='RegionOne')
    instance.get_configuration.return_value = {
        'baremetal_container_endpoint_override': 'http://10.0.0.1:6390'}
    with mock.patch.object(runs, 'RunsClient', autospec=True) as client:
        assert plugin.make_client(instance) is client.return_value
    client.assert_called_once_with(
        mock.sentinel.session, service_type='baremetal-container',
        interface='internal', region_name='RegionOne',
        endpoint_override='http://10.0.0.1:6390')


def test_api_version_option(monkeypatch):
    monkeypatch.delenv('OS_BAREMETAL_CONTAINER_API_VERSION', raising=False)
    parser = plugin.build_option_parser(argparse.ArgumentParser())
    parsed = parser.parse_args([])
    assert getattr(parsed, plugin.API_VERSION_OPTION) == '1'
    assert plugin.API_VERSIONS['1'] == 'ironic_bmc_client.runs.RunsClient'


def test_entry_points_load():
    eps = importlib.metadata.entry_points(group='openstack.cli.extension')
    assert [ep.load() for ep in eps
            if ep.name == plugin.API_NAME] == [plugin]
    commands = {ep.name: ep.load() for ep in importlib.metadata.entry_points(
        group='openstack.baremetal_container.v1')}
    assert sorted(commands) == [
        'baremetal_container_%s' % name for name in
        ('chart', 'group_run', 'group_show', 'list', 'logs', 'noise', 'pgo',
         'results', 'run', 'show', 'sweep')]
