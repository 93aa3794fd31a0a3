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

"""Replies of a running node, bounded: a real HTTP server on loopback
plays the hostile agent; Ironic's own AgentClient reads it."""

import base64
import gzip
import http.server
import json
import threading
import time
import types
import zlib

from ironic.common import exception
import pytest

from bmc_common import protocol
from ironic_bmc import agent_replies

NODE = types.SimpleNamespace(uuid='6a7c1d2e-0b4f-4c55-9d1e-2f3a4b5c6d7e')
MiB = 1024 * 1024


class _Agent(http.server.BaseHTTPRequestHandler):
    """Answers every request as the test says (server.answer)."""

    def _answer(self):
        length = int(self.headers.get('Content-Length') or 0)
        if length:
            self.rfile.read(length)
        kind, body = self.server.answer
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        if kind == 'gzip':
            self.send_header('Content-Encoding', 'gzip')
        if kind == 'drip':
            self.send_header('Content-Length', str(len(body) * 100))
            self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(body)
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass
            return
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def agent():
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Agent)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _node(server):
    port = server.server_address[1]
    return types.SimpleNamespace(
        uuid=NODE.uuid, driver_info={}, driver_internal_info={
            'agent_url': 'http://127.0.0.1:%d' % port,
            'agent_secret_token': 'token'})


def _commands(result):
    return json.dumps({'commands': [{
        'id': 'c1', 'command_name': 'execute_deploy_step',
        'command_status': 'SUCCEEDED', 'command_error': None,
        'command_result': result}]}).encode()


def test_reply_within_the_bound_is_read(agent):
    agent.answer = ('plain', _commands({'deploy_result': {'ok': True}}))
    client = agent_replies.bounded_client(MiB, 10)
    commands = client.get_commands_status(_node(agent))
    assert commands[0]['command_result'] == {'deploy_result': {'ok': True}}


def test_reply_past_the_bound_is_refused_by_ironics_client(agent):
    agent.answer = ('plain', _commands({'deploy_result': {
        'output': 'x' * (2 * MiB)}}))
    client = agent_replies.bounded_client(MiB, 10)
    with pytest.raises(agent_replies.ReplyRefused) as ctx:
        client.get_commands_status(_node(agent), retry_connection=False)
    assert 'larger than %d bytes' % MiB in str(ctx.value)
    # Ironic's command path wraps it in its own error; still told apart
    # from an agent that does not answer.
    with pytest.raises(exception.IronicException) as ctx:
        client.execute_deploy_step({'step': 'x'}, _fake_node(agent), [])
    assert agent_replies.refused(ctx.value)


def _fake_node(server):
    node = _node(server)
    node.as_dict = lambda secure, mask_configdrive: {}
    return node


def test_gzip_bomb_content_encoding_is_refused_at_its_decoded_size(agent):
    # 256 MiB of zeros in 256 KiB: only what fits the bound is inflated.
    bomb = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    body = b''.join(bomb.compress(b'\0' * (16 * MiB)) for _ in range(16))
    body += bomb.flush()
    agent.answer = ('gzip', body)
    client = agent_replies.bounded_client(4 * MiB, 30)
    with pytest.raises(agent_replies.ReplyRefused):
        client.get_commands_status(_node(agent), retry_connection=False)


def test_reply_that_never_ends_is_cut_at_the_deadline(agent):
    agent.answer = ('drip', b' ' * 100)
    client = agent_replies.bounded_client(MiB, 1)
    with pytest.raises(agent_replies.ReplyRefused) as ctx:
        client.get_commands_status(_node(agent), retry_connection=False)
    assert 'still arriving after 1 s' in str(ctx.value)


# --- the collect step's data fields ---------------------------------------

def test_unpack_round_trip():
    assert agent_replies.unpack(NODE, protocol.pack(b'hello'), 5,
                                'output') == b'hello'


def test_unpack_refuses_a_bomb_without_inflating_it():
    bomb = protocol.pack(b'\0' * (64 * MiB))
    assert len(bomb) < 100 * 1024
    with pytest.raises(agent_replies.AgentReplyInvalid) as ctx:
        agent_replies.unpack(NODE, bomb, MiB, 'result /out')
    assert 'result /out: expands to more than %d bytes' % MiB in str(
        ctx.value)


@pytest.mark.parametrize('text,why', [
    (12, 'is a int, not a string'),
    ('%%%', 'not base64'),
    (base64.b64encode(b'plain text').decode(), 'not gzip'),
    (base64.b64encode(gzip.compress(b'x' * 1000, mtime=0)[:-12]).decode(),
     'truncated gzip'),
    ('A' * (3 * MiB), 'bytes of base64, more than'),
])
def test_unpack_refuses_what_is_not_a_data_field(text, why):
    with pytest.raises(agent_replies.AgentReplyInvalid) as ctx:
        agent_replies.unpack(NODE, text, MiB, 'output')
    assert why in str(ctx.value)


# --- workload statuses ------------------------------------------------------

def _status(**fields):
    status = {'state': 'exited', 'exit_code': 0, 'output_tail': 'done\n',
              'output': {'bytes': 5, 'dropped': 0}, 'pid': 7,
              'mode': 'job', 'cpus': None, 'privileged': True,
              'walltime': None, 'stop': None,
              'rapl': {'state': 'absent', 'reason': 'no RAPL'},
              'stages': [protocol.stage(protocol.STAGE_WORKLOAD_STARTED,
                                        1.0, 1.0),
                         protocol.stage(protocol.STAGE_WORKLOAD_EXITED,
                                        1.0, 2.0)]}
    status.update(fields)
    return status


def test_agents_own_status_passes():
    status = _status(stop={'reason': 'walltime', 'signal': 'SIGTERM',
                           'grace': 10, 'killed': True})
    assert agent_replies.workload_status(NODE, status, 'status') is status


@pytest.mark.parametrize('fields,why', [
    ({'state': 'pwned'}, 'unknown state'),
    ({'exit_code': '0'}, 'exit_code is'),
    ({'exit_code': True}, 'exit_code is'),
    ({'output_tail': 'x' * 5000}, 'output_tail is not a string of at most'),
    ({'stages': [{'name': 'reboot', 'start': 1, 'end': 2}]},
     'unknown stage'),
    ({'stages': [{'name': 'workload-exited', 'start': '1', 'end': 2}]},
     'stage workload-exited start is'),
    ({'stages': 'all'}, 'stages is not a list'),
    ({'stop': {'reason': 'because', 'signal': 'SIGTERM'}},
     'unknown stop reason'),
    ({'integrity': 'x' * 3000}, 'integrity is not a string'),
    ({'stream': {'fully_local_at': 'soon'}}, 'stream fully_local_at is'),
    ({'rapl': {'joules': ['x' * 1000] * 100}}, 'more than 65536'),
])
def test_forged_status_is_refused(fields, why):
    with pytest.raises(agent_replies.AgentReplyInvalid) as ctx:
        agent_replies.workload_status(NODE, _status(**fields),
                                      'the workload status')
    assert why in str(ctx.value)
    assert NODE.uuid in str(ctx.value)


def test_connect_timeout_is_short_whatever_the_read_timeout():
    seen = []

    class Inner:
        def send(self, request, stream=False, timeout=None, **kwargs):
            seen.append(timeout)
            raise agent_replies.ReplyRefused('stop here')

    adapter = agent_replies.BoundedAdapter(Inner(), MiB, 60)
    for given, expected in ((60, (10, 60)), ((30, 90), (10, 90)),
                            ((5, 90), (5, 90)), (None, None)):
        with pytest.raises(agent_replies.ReplyRefused):
            adapter.send(object(), timeout=given)
        assert seen[-1] == expected
