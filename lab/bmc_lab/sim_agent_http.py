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

"""The simulated agents' HTTP side: IPA's command API, one per node.

One TLS server on loopback answers for every simulated node under
``/<node uuid>/v1/commands/`` (the conductor reaches each through the
``agent_url`` the node looked up with); :mod:`bmc_lab.sim_agent` runs the
commands.
"""

import datetime
import http.server
import ipaddress
import json
import ssl
import sys
import urllib.parse

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
from cryptography.x509.oid import NameOID


def self_signed_pem():
    """(certificate, key) in PEM for 127.0.0.1, valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                         'bmc-lab simulated agents')])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address('127.0.0.1'))]),
                critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM).decode(),
            key.private_bytes(serialization.Encoding.PEM,
                              serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    #: Hundreds of nodes' conductor calls may arrive at once.
    request_queue_size = 1024

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError)):
            return      # the conductor hung up (a reply it refused)
        super().handle_error(request, client_address)


class Handler(http.server.BaseHTTPRequestHandler):
    """``/<node uuid>/v1/commands/``: IPA's command API per node."""

    sim = None
    protocol_version = 'HTTP/1.1'

    def log_message(self, fmt, *args):
        pass

    def _node(self):
        path = urllib.parse.urlsplit(self.path).path.strip('/').split('/')
        if len(path) >= 3 and path[1:3] == ['v1', 'commands']:
            return self.sim.nodes.get(path[0])
        return None

    def _reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self, node):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if node.token and query.get('agent_token') == [node.token]:
            return True
        self._reply(401, {'faultstring': 'Invalid or missing agent_token'})
        return False

    def do_GET(self):
        node = self._node()
        if node is None:
            return self._reply(404, {'faultstring': 'not found'})
        if self._authorized(node):
            with node.lock:
                commands = list(node.commands)
            self._reply(200, {'commands': commands})

    def do_POST(self):
        node = self._node()
        length = int(self.headers.get('Content-Length') or 0)
        body = json.loads(self.rfile.read(length) or b'{}')
        if node is None:
            return self._reply(404, {'faultstring': 'not found'})
        if not self._authorized(node):
            return None
        with node.lock:
            busy = any(c['command_status'] == 'RUNNING'
                       for c in node.commands)
        if busy:
            return self._reply(409, {'faultstring': 'Agent is busy'})
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        record = self.sim.command(node, body.get('name', ''),
                                  body.get('params') or {},
                                  query.get('wait') == ['true'])
        self._reply(200, record)
