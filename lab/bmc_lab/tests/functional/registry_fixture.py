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

"""Run the Debian ``docker-registry`` (distribution 2.8) for tests.

It listens on a free 127.0.0.1 port with a temporary config and storage
directory, optionally with htpasswd (Basic) authentication, and is
stopped (only the process this fixture started) on exit.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import requests

BINARY = '/usr/bin/docker-registry'


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class DockerRegistry:
    def __init__(self, user=None, password=None):
        self.user = user
        self.password = password
        self.dir = None
        self.proc = None
        self.port = None

    @staticmethod
    def available():
        return os.access(BINARY, os.X_OK)

    @property
    def address(self):
        return f'127.0.0.1:{self.port}'

    @property
    def storage(self):
        return os.path.join(self.dir, 'storage')

    def _config(self):
        lines = ['version: 0.1', 'log:', '  level: error',
                 '  accesslog:', '    disabled: true', 'storage:',
                 '  filesystem:', f'    rootdirectory: {self.storage}',
                 '  delete:', '    enabled: true', 'http:',
                 f'  addr: {self.address}']
        if self.user:
            import bcrypt
            hashed = bcrypt.hashpw(self.password.encode(),
                                   bcrypt.gensalt(prefix=b'2a')).decode()
            path = os.path.join(self.dir, 'htpasswd')
            with open(path, 'w') as f:
                f.write(f'{self.user}:{hashed}\n')
            lines += ['auth:', '  htpasswd:', '    realm: test',
                      f'    path: {path}']
        return '\n'.join(lines) + '\n'

    def start(self, timeout=30):
        self.dir = tempfile.mkdtemp(prefix='bmc-registry-')
        os.mkdir(self.storage)
        self.port = free_port()
        config = os.path.join(self.dir, 'config.yml')
        with open(config, 'w') as f:
            f.write(self._config())
        self._log = open(  # noqa: SIM115 (closed in stop())
            os.path.join(self.dir, 'registry.log'), 'wb')
        self.proc = subprocess.Popen([BINARY, 'serve', config],
                                     stdout=self._log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                requests.get(f'http://{self.address}/v2/', timeout=1)
                return self
            except requests.ConnectionError:
                time.sleep(0.1)
        log = self.log()
        self.stop()
        raise RuntimeError(f'docker-registry did not start: {log}')

    def log(self):
        try:
            with open(os.path.join(self.dir, 'registry.log'), 'rb') as f:
                return f.read().decode(errors='replace')[-3000:]
        except OSError:
            return ''

    def blob_path(self, digest):
        hexd = digest.split(':', 1)[1]
        return os.path.join(self.storage, 'docker/registry/v2/blobs/sha256',
                            hexd[:2], hexd, 'data')

    def corrupt_blob(self, digest, data):
        """Make the registry serve other bytes under ``digest``."""
        with open(self.blob_path(digest), 'wb') as f:
            f.write(data)

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            self._log.close()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *args):
        self.stop()
