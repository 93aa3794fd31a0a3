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

"""The lab's Ironic API client and a provision-state watcher.

The watcher records every state a node passes through so that a failed
wait can say how the node got where it is.
"""

import time

from ironicclient import client as ironic_client
from ironicclient.common.apiclient import exceptions as client_exc

from bmc_lab.cloud import profile as cloud_profile
from bmc_lab import procs

API_VERSION = '1.81'


def get_client(settings):
    """An Ironic client of the lab: noauth, or in the cloud profile the
    cloud's admin with a system-scoped Keystone token."""
    auth = ({'session': cloud_profile.keystone_session(settings)}
            if settings.is_cloud else {'auth_type': 'none'})
    return ironic_client.get_client(
        1, endpoint=settings.api_url, os_ironic_api_version=API_VERSION,
        max_retries=30, retry_interval=2, **auth)


def wait_api(settings, timeout=120):
    """Wait until the API answers and a conductor serves the lab drivers."""
    cli = get_client(settings)
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            names = {d.name for d in cli.driver.list()}
            if 'ipmi' in names:
                return cli
            last = 'no conductor has registered the ipmi hardware type yet'
        except Exception as exc:  # noqa: BLE001 - retried, reported below
            last = exc
        time.sleep(1)
    raise procs.LabError('Ironic API at %s not ready within %ds: %s; see %s'
                         % (settings.api_url, timeout, last,
                            settings.log_dir))


class StateWatcher:
    """Wait for provision states, keeping the transitions seen."""

    def __init__(self, cli, node_ident):
        self.cli = cli
        self.node_ident = node_ident
        self.transitions = []

    def _record(self, node):
        entry = (node.provision_state, node.target_provision_state,
                 node.power_state)
        if not self.transitions or self.transitions[-1][1:] != entry:
            self.transitions.append((round(time.time(), 1),) + entry)

    def wait(self, states, timeout=600, fail_states=('deploy failed',
                                                      'clean failed',
                                                      'error',
                                                      'inspect failed')):
        states = (states,) if isinstance(states, str) else tuple(states)
        deadline = time.monotonic() + timeout
        node = None
        while time.monotonic() < deadline:
            try:
                node = self.cli.node.get(self.node_ident)
            except client_exc.ClientException:
                time.sleep(1)
                continue
            self._record(node)
            # A failed state keeps its target (e.g. "deploy failed" ->
            # "active"); a stable state has none.  Ironic may save a failed
            # state a moment before its last_error: wait for both.
            failed = node.provision_state.endswith('failed')
            if failed and node.provision_state in states:
                node.last_error = self.error_of(node)
            if (node.provision_state in states
                    and (node.target_provision_state is None or failed)
                    and (not failed or node.last_error)):
                return node
            if node.provision_state in fail_states:
                break
            time.sleep(1)
        raise procs.LabError(
            'node %s did not reach %s; last_error: %s\n%s'
            % (self.node_ident, '/'.join(states),
               node.last_error if node else 'n/a', self.describe()))

    def error_of(self, node):
        """The node's last_error, else the newest error in its history.

        With node history on (the default), Ironic clears last_error at
        the next power state sync; the error stays in the history.
        """
        if node.last_error:
            return node.last_error
        try:
            events = self.cli.node.get_history_list(self.node_ident,
                                                    detail=True)
        except Exception:  # noqa: BLE001 - the caller polls again
            return None
        errors = sorted((e for e in events if e.get('severity') == 'ERROR'),
                        key=lambda e: e.get('created_at') or '')
        return errors[-1].get('event') if errors else None

    def describe(self):
        lines = ['provision-state transitions (time, state, target, power):']
        for t, state, target, power in self.transitions:
            lines.append('  %s  %-16s -> %-10s power=%s' % (
                time.strftime('%H:%M:%S', time.localtime(t)), state,
                target, power))
        try:
            for ev in self.cli.node.get_history_list(self.node_ident,
                                                     detail=True):
                lines.append('  history: %s %s %s' % (
                    ev.get('created_at'), ev.get('event_type'),
                    ev.get('event')))
        except Exception:  # noqa: BLE001 - diagnostics only
            pass
        return '\n'.join(lines)
