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

"""Simulated agents for the scale benchmark: IPA's API, no machine.

Nodes of the ``container-fake-hardware`` type have fake power: powering
one on starts nothing.  :class:`SimAgents` stands in for the machines and
their agent ramdisks.  It watches the Ironic API, and when a node enters
``wait call-back`` it "boots" it: fetches the node's boot files from the
HTTP root as iPXE would, looks the node up and heartbeats, exactly as
ironic-python-agent does.  One HTTP server on 127.0.0.1 answers IPA's
command API for every node (each node's ``callback_url`` is the server
with the node's UUID as path) and runs the container steps of
:mod:`bmc_common.protocol`: the rootfs artifact is really downloaded
from the conductor's HTTP root and its digest checked; the workload is a
timer.  Only the ``ramfs`` rootfs mode is simulated; other steps fail
with a message saying so.

Like IPA's automatic TLS, the server has a self-signed certificate
(for 127.0.0.1) that each heartbeat hands to Ironic as ``agent_verify_ca``:
the conductor talks TLS to every agent, as in production
(``[agent]require_tls``).

Everything stays on loopback: the nodes' view of the host
(:data:`bmc_lab.settings.GUEST_HOST_ADDRESS`) is rewritten to 127.0.0.1,
and any other address is refused.
"""

import collections
import os
import random
import ssl
import tempfile
import threading
import time
import uuid as uuidlib

import requests
import tenacity

from bmc_common import protocol
from bmc_lab import sim_agent_http
from bmc_lab import sim_agent_steps

#: (The steps' side: sim_agent_steps.)
StepFailed = sim_agent_steps.StepFailed
loopback_url = sim_agent_steps.loopback_url
OUTPUT = sim_agent_steps.OUTPUT
HUGE_BYTES = sim_agent_steps.HUGE_BYTES

AGENT_VERSION = '13.0.0'
MANAGER = 'BmcContainerHardwareManager'
MANAGER_VERSION = '1'
#: The steps the real hardware manager offers (priority 0: the conductor
#: asks for each explicitly).
STEPS = (protocol.STEP_STAGE_ROOTFS, protocol.STEP_START_WORKLOAD,
         protocol.STEP_WORKLOAD_STATUS, protocol.STEP_STOP_WORKLOAD,
         protocol.STEP_COLLECT_OUTPUT, protocol.STEP_QUIET_AGENT,
         protocol.STEP_APPLY_TUNABLES, protocol.STEP_NOISE_PROBE)
#: Headers of the simulated machines' and the benchmark's raw API calls.
API_HEADERS = {'X-OpenStack-Ironic-API-Version': 'latest'}
#: Seconds IPA keeps trying its lookup (ipa-lookup-timeout's default).
LOOKUP_TIMEOUT = 300
#: Provision states in which a powered-on machine stays up.
_ALIVE = ('deploying', 'wait call-back', 'active')
#: What a node whose workload replaced its agent may send once the
#: workload runs (Node.hostile):
#: bomb: the collected output is 64 MiB of zeros in 64 KiB of gzip;
#: huge: the workload status is a 60 MB JSON document;
#: types: the status has an exit code of the wrong type;
#: unasked: the collect returns a result file the run did not ask for.
HOSTILE = ('bomb', 'huge', 'types', 'unasked')


def _step_name(record):
    return ((record.get('command_params') or {}).get('step') or {}).get(
        'step')


class Node:
    """One simulated machine: its boot generation, commands, workload."""

    def __init__(self, uuid, mac):
        self.uuid = uuid
        self.mac = mac
        self.lock = threading.Lock()
        self.generation = 0
        self.token = None
        self.commands = []
        self.heartbeats = True
        self.notify_exit = False
        self.workload = None
        self.alive = False
        self.interval = 300.0
        self.next_heartbeat = 0.0
        #: None, or one of HOSTILE: how this node's workload answers in
        #: its agent's place once it runs (the hostile-node tier).
        self.hostile = None

    def boot(self):
        with self.lock:
            self.generation += 1
            self.token = None
            self.commands = []
            self.heartbeats = True
            self.notify_exit = False
            self.workload = None
            return self.generation


class SimAgents(sim_agent_steps.ContainerSteps):
    """The simulated agents of every fake node behind one API server."""

    def __init__(self, api_url, http_port, port, job_seconds=5.0,
                 boot_seconds=1.0, poll_interval=1.0):
        self.api_url = api_url.rstrip('/')
        self.http_port = http_port
        self.port = port
        self.job_seconds = job_seconds
        self.boot_seconds = boot_seconds
        self.poll_interval = poll_interval
        self.nodes = {}
        self.stats = collections.Counter()
        self.errors = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = None
        self.cert = None
        self._threads = []

    # -- lifecycle ---------------------------------------------------------

    def add_node(self, uuid, mac):
        self.nodes[uuid] = Node(uuid, mac)

    def start(self):
        agents = self

        class Handler(sim_agent_http.Handler):
            sim = agents

        self._server = sim_agent_http.Server(('127.0.0.1', self.port),
                                             Handler)
        self.cert, key = sim_agent_http.self_signed_pem()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as tmp:
            paths = [os.path.join(tmp, n) for n in ('cert.pem', 'key.pem')]
            for path, pem in zip(paths, (self.cert, key), strict=True):
                with open(path, 'w') as f:
                    f.write(pem)
            context.load_cert_chain(*paths)
        # The TLS handshake happens in each request's thread, not in the
        # one that accepts (hundreds of agents connect at once).
        self._server.socket = context.wrap_socket(
            self._server.socket, server_side=True,
            do_handshake_on_connect=False)
        self.port = self._server.server_address[1]
        for target in (self._server.serve_forever, self._watch,
                       self._heartbeat_loop):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self):
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def count(self, key, n=1):
        with self._lock:
            self.stats[key] += n

    def error(self, node, msg):
        with self._lock:
            self.errors.append('%s: %s' % (
                getattr(node, 'uuid', None), msg))

    # -- the machines: boot on "wait call-back" ------------------------------

    def _watch(self):
        session = requests.Session()
        while not self._stop.wait(self.poll_interval):
            try:
                resp = session.get(
                    self.api_url + '/v1/nodes', headers=API_HEADERS,
                    params={'fields': 'uuid,provision_state,power_state'},
                    timeout=30)
                resp.raise_for_status()
            except requests.RequestException:
                self.count('api_poll_errors')
                continue
            try:
                items = resp.json()['nodes']
            except (ValueError, KeyError):
                self.count('api_poll_errors')
                continue
            for item in items:
                self._guarded(self.nodes.get(item['uuid']), self.observe,
                              item)

    def observe(self, item):
        """One node as the API lists it: boot it when it was powered on
        for a deploy; True when it boots now."""
        node = self.nodes.get(item['uuid'])
        if node is None:
            return False
        state = item['provision_state']
        powered = item['power_state'] == 'power on'
        if node.alive and (not powered or state not in _ALIVE):
            # Powered off (a job's end, an undeploy): the machine
            # and its agent are gone.
            node.alive = False
        elif (not node.alive and powered
                and state == 'wait call-back'):
            # Powered on for a deploy: it boots, once.  The node
            # comes back to "wait call-back" after each step; the
            # machine does not boot again for that.
            node.alive = True
            generation = node.boot()
            threading.Thread(target=self._boot, daemon=True,
                             args=(node, generation)).start()
            return True
        return False

    def _boot(self, node, generation):
        """Firmware, then the agent: boot files, lookup, heartbeat."""
        session = requests.Session()
        try:
            for label in ('deploy_kernel', 'deploy_ramdisk', 'bmc_modules'):
                resp = session.get('http://127.0.0.1:%d/%s/%s' % (
                    self.http_port, node.uuid, label), timeout=60)
                if resp.status_code == 200:
                    self.count('boot_file_bytes', len(resp.content))
            time.sleep(self.boot_seconds)
            config = self._lookup(session, node)
            with node.lock:
                if node.generation != generation:
                    return
                node.token = config['agent_token']
                # IPA's period: 0.3-0.6 of Ironic's heartbeat timeout.
                node.interval = config.get('heartbeat_timeout', 300) * (
                    random.uniform(0.3, 0.6))
                node.next_heartbeat = time.monotonic() + node.interval
            self.count('lookups')
        except Exception as exc:
            self.error(node, 'boot: %r' % exc)
            return
        self.heartbeat(node)

    def _lookup(self, session, node):
        """IPA's lookup: tried again on any refusal (409 while the
        conductor holds the node, 404 before the deploy waits for it),
        with IPA's random exponential wait (at most 30 s) between tries,
        for up to LOOKUP_TIMEOUT seconds (ipa-lookup-timeout)."""
        def get():
            return session.get(self.api_url + '/v1/lookup',
                               headers=API_HEADERS, timeout=60,
                               params={'addresses': node.mac,
                                       'node_uuid': node.uuid})

        def refused(state):
            state.outcome.result().raise_for_status()
            raise requests.HTTPError(
                'lookup: %d' % state.outcome.result().status_code)

        resp = tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda r: r.status_code != 200),
            wait=tenacity.wait_random_exponential(multiplier=1, max=30),
            stop=tenacity.stop_after_delay(LOOKUP_TIMEOUT),
            before_sleep=lambda state: self.count('lookup_retries'),
            retry_error_callback=refused,
            sleep=time.sleep)(get)
        return resp.json()['config']

    def heartbeat(self, node):
        with node.lock:
            token = node.token
        if not token:
            return
        try:
            resp = requests.post(
                '%s/v1/heartbeat/%s' % (self.api_url, node.uuid),
                headers=API_HEADERS, timeout=60,
                json={'callback_url': self.callback_url(node),
                      'agent_token': token,
                      'agent_verify_ca': self.cert,
                      'agent_version': AGENT_VERSION})
            self.count('heartbeats' if resp.status_code == 202
                       else 'heartbeats_refused')
        except requests.RequestException as exc:
            self.count('heartbeats_refused')
            self.error(node, 'heartbeat: %s' % exc)

    def callback_url(self, node):
        return 'https://127.0.0.1:%d/%s' % (self.port, node.uuid)

    def _heartbeat_loop(self):
        """IPA's periodic heartbeat, for nodes not told to be quiet."""
        while not self._stop.wait(1.0):
            now = time.monotonic()
            for node in list(self.nodes.values()):
                if node.token and node.heartbeats and (
                        now >= node.next_heartbeat):
                    node.next_heartbeat = now + node.interval
                    self.count('periodic_heartbeats')
                    self._guarded(node, self.heartbeat, node)

    def _guarded(self, node, func, *args):
        """``func(*args)``; a failure is recorded, never ends a loop."""
        try:
            return func(*args)
        except Exception as exc:
            self.count('sim_errors')
            self.error(node, '%s: %r' % (func.__name__, exc))
            return None

    def describe(self, uuid):
        """What the simulated agent of a node saw, for a failure."""
        node = self.nodes.get(uuid)
        if node is None:
            return 'not simulated'
        with node.lock:
            last = node.commands[-1] if node.commands else {}
            return ('agent: booted %d time(s), token %s, heartbeats %s, '
                    'last command %s %s' % (
                        node.generation, 'yes' if node.token else 'no',
                        'on' if node.heartbeats else 'off',
                        _step_name(last) or last.get('command_name'),
                        last.get('command_status')))

    # -- IPA's command API ---------------------------------------------------

    def command(self, node, name, params, wait):
        """Run command ``name``; IPA's command record (a dict)."""
        record = {'id': str(uuidlib.uuid4()), 'command_name':
                  name.split('.', 1)[-1], 'command_params': {},
                  'command_status': 'RUNNING', 'command_error': None,
                  'command_result': None}
        self.count('command:%s' % (
            (params.get('step') or {}).get('step') or name))
        if name == 'deploy.get_deploy_steps':
            record.update(command_status='SUCCEEDED', command_result={
                'deploy_steps': {MANAGER: [
                    {'step': s, 'priority': 0, 'interface': 'deploy',
                     'reboot_requested': False, 'abortable': False,
                     'argsinfo': None} for s in STEPS]},
                'hardware_manager_version': {MANAGER: MANAGER_VERSION}})
            return record
        if name != 'deploy.execute_deploy_step':
            record.update(command_status='FAILED', command_error={
                'type': 'InvalidCommandError', 'code': 400,
                'message': 'the simulated agent has no command %s' % name,
                'details': ''})
            return record
        step = params.get('step') or {}
        with node.lock:
            if step.get('step') == protocol.STEP_WORKLOAD_STATUS:
                # As the real agent: each poll's result is read once.
                node.commands = [
                    c for c in node.commands
                    if _step_name(c) != protocol.STEP_WORKLOAD_STATUS
                    or c['command_status'] == 'RUNNING']
            record['command_params'] = {'step': step}
            node.commands.append(record)
        runner = threading.Thread(target=self._run_step, daemon=True,
                                  args=(node, record, step))
        runner.start()
        if wait:
            runner.join()
        return record

    def _run_step(self, node, record, step):
        try:
            handler = getattr(self, '_step_' + step.get('step', ''), None)
            if handler is None:
                raise StepFailed('the simulated agent does not run step %s'
                                 % step.get('step'))
            result = handler(node, step.get('args') or {})
            record.update(command_status='SUCCEEDED', command_result={
                'deploy_result': result, 'deploy_step': step})
        except Exception as exc:
            record.update(command_status='FAILED', command_error={
                'type': 'DeploymentError', 'code': 500,
                'message': '%s: %s' % (step.get('step'), exc),
                'details': str(exc)})
            self.error(node, '%s: %s' % (step.get('step'), exc))
        if node.heartbeats and step.get('step') != (
                protocol.STEP_WORKLOAD_STATUS):
            # IPA heartbeats as soon as a command ends.
            self.heartbeat(node)
