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


"""The exports file and the reload of nfs-ganesha (a real process stands
in for the server: it counts the SIGHUPs it gets)."""

import os
import socket
import subprocess
import sys
import time

import pytest

from ironic_bmc.nfs import ganesha

HUP_COUNTER = """
import signal, sys, time
n = 0
def hup(*_):
    global n
    n += 1
    open(sys.argv[1], 'w').write(str(n))
signal.signal(signal.SIGHUP, hup)
open(sys.argv[2], 'w').write('ready')
while True:
    time.sleep(0.05)
"""


@pytest.fixture
def server(tmp_path):
    hups = tmp_path / 'hups'
    ready = tmp_path / 'ready'
    proc = subprocess.Popen([sys.executable, '-c', HUP_COUNTER, str(hups),
                             str(ready)])
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    (tmp_path / 'ganesha.pid').write_text('%d\n' % proc.pid)

    def read():
        try:
            return int(hups.read_text())
        except (OSError, ValueError):
            return 0

    def count(expected):
        """The SIGHUPs so far, once ``expected`` have come (or 5 s have
        passed), and 0.2 s more for one too many to show."""
        deadline = time.monotonic() + 5
        while read() < expected and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        return read()
    yield proc, count
    proc.kill()
    proc.wait()


def table(tmp_path, **kw):
    return ganesha.ExportTable(str(tmp_path / 'nfs' / 'exports.conf'),
                               str(tmp_path / 'ganesha.pid'), **kw)


def test_sync_writes_read_only_exports_and_reloads(tmp_path, server):
    _proc, hups = server
    t = table(tmp_path, clients=['10.0.2.0/24'])
    assert t.sync({'k1': '/cache/entries/k1/artifact'})
    text = open(t.exports_file).read()
    assert 'Path = "/cache/entries/k1/artifact";' in text
    assert 'Pseudo = "/bmc/k1";' in text
    assert 'Export_Id = 1000;' in text
    # Nobody but the listed clients, and they read only.
    assert 'Access_Type = None;' in text
    assert 'Clients = 10.0.2.0/24;\n        Access_Type = RO;' in text
    assert 'Access_Type = RW' not in text
    assert 'Squash = Root_Squash;' in text
    assert hups(1) == 1
    # Nothing changed: no rewrite, no reload.
    assert not t.sync({'k1': '/cache/entries/k1/artifact'})
    assert hups(1) == 1


def test_ids_stay_with_their_export(tmp_path, server):
    _proc, hups = server
    t = table(tmp_path, clients=['10.0.2.0/24'])
    # One reload per change.  Counted after each: signals sent before the
    # counter's handler ran would merge into one.
    t.sync({'a': '/c/a', 'b': '/c/b'})
    assert t.exported() == {'a': 1000, 'b': 1001}
    assert hups(1) == 1
    t.sync({'b': '/c/b', 'c': '/c/c'})
    # b keeps its id; a's is free again and c takes it.
    assert t.exported() == {'b': 1001, 'c': 1000}
    assert hups(2) == 2
    t.sync({})
    assert t.exported() == {}
    assert 'EXPORT' not in open(t.exports_file).read()
    assert hups(3) == 3


def test_server_gone(tmp_path, server):
    proc, _hups = server
    proc.kill()
    proc.wait()
    t = table(tmp_path, clients=['10.0.2.0/24'])
    with pytest.raises(ganesha.NFSServerUnavailable,
                       match='no running nfs-ganesha found through its pid '
                             'file .*ganesha.pid'):
        t.sync({'a': '/c/a'})
    # Written all the same: a server started later exports it.
    assert 'Pseudo = "/bmc/a";' in open(t.exports_file).read()


def test_refuses_what_the_config_cannot_hold(tmp_path):
    with pytest.raises(ValueError, match='NFS client'):
        table(tmp_path, clients=['10.0.0.0/8; Access_Type = RW'])
    with pytest.raises(ValueError, match='unknown squash'):
        table(tmp_path, squash='none')
    t = table(tmp_path)
    with pytest.raises(ValueError, match='export path'):
        t.sync({'a': ('/c/a"; Access_Type = RW; "', ['192.0.2.10'])})
    with pytest.raises(ValueError, match='NFS client'):
        t.sync({'a': ('/c/a', ['192.0.2.10; Access_Type = RW'])})
    assert not os.path.exists(t.exports_file)


def test_each_export_mountable_by_its_own_nodes_only(tmp_path, server):
    """Tenant B's node cannot mount tenant A's image: each export lists
    the nodes that use it, and one no node uses is not exported."""
    _proc, hups = server
    t = table(tmp_path)
    t.sync({'a': ('/c/a', ['192.0.2.10']),
            'b': ('/c/b', ['192.0.2.11', '192.0.2.12']),
            'c': ('/c/c', [])})
    text = open(t.exports_file).read()
    blocks = {b.split('# cache entry ')[1].split('\n')[0]: b
              for b in text.split('EXPORT {')[1:]}
    assert sorted(blocks) == ['a', 'b']
    assert 'Clients = 192.0.2.10;' in blocks['a']
    assert '192.0.2.11' not in blocks['a']
    assert 'Clients = 192.0.2.11, 192.0.2.12;' in blocks['b']
    assert t.exported() == {'a': 1000, 'b': 1001}
    # The operator's clients (a forwarder) see every export.
    t2 = table(tmp_path, clients=['127.0.0.1'])
    t2.sync({'a': ('/c/a', ['192.0.2.10']), 'c': ('/c/c', [])})
    text = open(t2.exports_file).read()
    assert 'Clients = 127.0.0.1, 192.0.2.10;' in text
    assert 'Clients = 127.0.0.1;' in text


def test_check_server(tmp_path):
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    ganesha.check_server('127.0.0.1', port)
    listener.close()
    with pytest.raises(ganesha.NFSServerUnavailable,
                       match='nothing answers at 127.0.0.1:%d' % port):
        ganesha.check_server('127.0.0.1', port, timeout=2)
