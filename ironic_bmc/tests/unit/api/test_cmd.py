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

"""ironic-bmc-api as a process: it serves, and SIGTERM stops it."""

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _wait_for(url, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.load(response)
        except OSError:
            time.sleep(0.2)
    raise AssertionError('%s did not answer within %ss' % (url, timeout))


def test_serves_and_stops_on_sigterm(tmp_path):
    port = _free_port()
    conf = tmp_path / 'api.conf'
    conf.write_text('[container]\nreport_dir = %s\n'
                    '[container_api]\nhost_ip = 127.0.0.1\nport = %d\n'
                    'auth_strategy = noauth\n' % (tmp_path / 'reports', port))
    proc = subprocess.Popen(
        [sys.executable, '-c', 'import sys; from ironic_bmc.api import cmd; '
         'sys.exit(cmd.main(sys.argv[1:]))', '--config-file', str(conf)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        versions = _wait_for('http://127.0.0.1:%d/' % port, proc)
        assert versions['versions'][0]['id'] == 'v1'
        runs = _wait_for('http://127.0.0.1:%d/v1/runs' % port, proc)
        assert runs == {'runs': []}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
