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

"""A tiny in-process OCI registry for unit tests (127.0.0.1 only).

Serves manifests and blobs from dicts, with optional Basic or Bearer
authentication, and lets tests serve wrong bytes on purpose.
"""

import base64
import http.server
import json
import threading
from urllib import parse

from bmc_lab import ociimage


class FakeRegistry:
    def __init__(self, auth=None, user='user', password='secret'):
        #: None, 'basic' or 'bearer'
        self.auth = auth
        self.user = user
        self.password = password
        self.token = 'tok-' + base64.b16encode(b'fake').decode()
        self.manifests = {}   # (repo, ref) -> (bytes, media_type)
        self.blobs = {}       # (repo, digest) -> bytes
        self.digest_header_override = {}  # (repo, ref) -> digest
        self.requests = []
        #: Where a bearer registry sends clients for tokens (itself by
        #: default): host:port of another FakeRegistry.
        self.realm = None
        self._server = None
        self._thread = None

    # --- content -------------------------------------------------------

    def add_image(self, repo, tag, image):
        for digest, data in image.blobs.items():
            self.blobs[(repo, digest)] = data
        entry = (image.manifest, ociimage.MEDIA_MANIFEST)
        self.manifests[(repo, image.digest)] = entry
        if tag:
            self.manifests[(repo, tag)] = entry
        return image.digest

    def add_index(self, repo, tag, index):
        for image in index.images:
            self.add_image(repo, None, image)
        entry = (index.manifest, ociimage.MEDIA_INDEX)
        self.manifests[(repo, index.digest)] = entry
        self.manifests[(repo, tag)] = entry
        return index.digest

    # --- server --------------------------------------------------------

    @property
    def address(self):
        return f'127.0.0.1:{self._server.server_address[1]}'

    def start(self):
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, body=b'', headers=None):
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _authorized(self):
                header = self.headers.get('Authorization', '')
                if registry.auth is None:
                    return True
                if registry.auth == 'basic':
                    creds = f'{registry.user}:{registry.password}'
                    good = base64.b64encode(creds.encode()).decode()
                    if header == 'Basic ' + good:
                        return True
                    self._send(401, b'{"errors":[]}', {
                        'WWW-Authenticate': 'Basic realm="fake"'})
                    return False
                if header == 'Bearer ' + registry.token:
                    return True
                self._send(401, b'{"errors":[]}', {
                    'WWW-Authenticate':
                        f'Bearer realm="http://'
                        f'{registry.realm or registry.address}/token",'
                        'service="fake"'})
                return False

            def do_GET(self):
                url = parse.urlparse(self.path)
                registry.requests.append(url.path)
                if url.path == '/token':
                    expected = 'Basic ' + base64.b64encode((
                        f'{registry.user}:{registry.password}'
                    ).encode()).decode()
                    if self.headers.get('Authorization') != expected:
                        return self._send(401, b'{}')
                    return self._send(200, json.dumps(
                        {'token': registry.token}).encode())
                if not self._authorized():
                    return
                if url.path == '/v2/':
                    return self._send(200, b'{}')
                parts = url.path[len('/v2/'):].split('/')
                if len(parts) < 3 or parts[-2] not in ('manifests',
                                                        'blobs'):
                    return self._send(404)
                repo = '/'.join(parts[:-2])
                kind, ref = parts[-2], parts[-1]
                if kind == 'manifests':
                    found = registry.manifests.get((repo, ref))
                    if found is None:
                        return self._send(404, b'{"errors":[{"code":'
                                          b'"MANIFEST_UNKNOWN"}]}')
                    body, mtype = found
                    digest = registry.digest_header_override.get(
                        (repo, ref), ociimage.digest_of(body))
                    return self._send(200, body, {
                        'Content-Type': mtype,
                        'Docker-Content-Digest': digest})
                data = registry.blobs.get((repo, ref))
                if data is None:
                    return self._send(404, b'{"errors":[{"code":'
                                      b'"BLOB_UNKNOWN"}]}')
                return self._send(200, data, {
                    'Content-Type': 'application/octet-stream'})

        self._server = http.server.ThreadingHTTPServer(('127.0.0.1', 0),
                                                       Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
