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


"""bmc_lab.nfs_probe against a private nfs-ganesha configured as the lab
and the product configure theirs: NFSv4 only on 127.0.0.1, read-only
root-squashed exports under ``/bmc`` for listed clients.  The probe's
source address stands for the node asking: 127.0.0.1 is the node an
export is for (as lab nodes reach the server from 127.0.0.1), 127.0.0.2
another one.
"""

import os
import socket
import subprocess
import time

import pytest

from bmc_lab import content_servers
from bmc_lab import nfs_probe
from ironic_bmc.nfs import ganesha as exports_file

GANESHA = '/usr/bin/ganesha.nfsd'

pytestmark = pytest.mark.skipif(
    not (os.path.exists(GANESHA) and os.geteuid() == 0),
    reason='needs nfs-ganesha (tools/host-setup.sh installs it) and root')

ALLOWED = '127.0.0.1'
OTHER = '127.0.0.2'
THIRD = '127.0.0.3'

def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@pytest.fixture(scope='module')
def ganesha(tmp_path_factory):
    """A private ganesha: /bmc/key1 for 127.0.0.1, /bmc/key2 for
    127.0.0.3 only; its port."""
    tmp = tmp_path_factory.mktemp('ganesha')
    wanted = {}
    for n, client in ((1, ALLOWED), (2, THIRD)):
        tree = tmp / ('tree%d' % n)
        (tree / 'etc').mkdir(parents=True)
        (tree / 'etc' / 'hostname').write_text('key%d\n' % n)
        os.chmod(tree, 0o755)
        wanted['key%d' % n] = (str(tree), [client])
    # The product's own export blocks and the lab's server configuration.
    exports = tmp / 'exports.conf'
    table = exports_file.ExportTable(str(exports), str(tmp / 'ganesha.pid'))
    exports.write_text(table.render(wanted, {'key1': 1001, 'key2': 1002}))
    (tmp / 'recovery').mkdir()
    port = _free_port()
    conf = tmp / 'ganesha.conf'
    conf.write_text(content_servers.GANESHA_CONF.format(
        port=port, recovery=tmp / 'recovery', exports=exports))
    log = tmp / 'ganesha.log'
    proc = subprocess.Popen(
        [GANESHA, '-F', '-f', str(conf), '-L', str(log),
         '-p', str(tmp / 'ganesha.pid'), '-N', 'NIV_EVENT'],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT)
    try:
        _wait_ready(proc, port, log)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(proc, port, log):
    """Until the port answers and key1 is served to its client (ganesha
    may need a few seconds after its port opens)."""
    status = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail('ganesha exited (%s): %s'
                        % (proc.returncode, _tail(log)))
        try:
            status = nfs_probe.lookup(ALLOWED, port, '/bmc/key1',
                                      source=ALLOWED, timeout=2)
        except nfs_probe.ProbeError as exc:
            status = str(exc)
        if status == 'NFS4_OK':
            return
        time.sleep(0.5)
    pytest.fail('ganesha not ready on port %d (%s): %s'
                % (port, status, _tail(log)))


def _tail(log):
    try:
        return log.read_text()[-2000:]
    except OSError:
        return '(no log)'


def test_export_mountable_by_its_client(ganesha):
    assert nfs_probe.lookup(ALLOWED, ganesha, '/bmc/key1',
                            source=ALLOWED) == 'NFS4_OK'
    assert nfs_probe.readdir(ALLOWED, ganesha, '/bmc/key1',
                             source=ALLOWED) == ('NFS4_OK', ['etc'])
    assert nfs_probe.lookup(ALLOWED, ganesha, '/bmc/key1/etc/hostname',
                            source=ALLOWED) == 'NFS4_OK'
    assert nfs_probe.lookup(ALLOWED, ganesha, '/bmc/nothing',
                            source=ALLOWED) == 'NFS4ERR_NOENT'


def test_export_hidden_from_another_node(ganesha):
    # ganesha (4.3) does not refuse a client an export it is not listed
    # for with NFS4ERR_ACCESS: the export is not there for that client.
    # LOOKUP answers NFS4ERR_NOENT, as for a key nobody exports.
    assert nfs_probe.lookup(ALLOWED, ganesha, '/bmc/key1',
                            source=OTHER) == 'NFS4ERR_NOENT'
    assert nfs_probe.lookup(ALLOWED, ganesha, '/bmc/key1/etc',
                            source=OTHER) == 'NFS4ERR_NOENT'
    assert nfs_probe.readdir(ALLOWED, ganesha, '/bmc/key1',
                             source=OTHER) == ('NFS4ERR_NOENT', [])
    # The same for key2, whose only client is 127.0.0.3, which mounts it.
    assert nfs_probe.lookup(ALLOWED, ganesha, '/bmc/key2',
                            source=ALLOWED) == 'NFS4ERR_NOENT'
    assert nfs_probe.lookup(ALLOWED, ganesha, '/bmc/key2',
                            source=THIRD) == 'NFS4_OK'


def test_pseudo_directory_lists_only_what_the_client_may_mount(ganesha):
    # The pseudo file system (/ and /bmc) is readable by every client,
    # but READDIR of /bmc lists only the exports the client is listed
    # for: another node learns no cache key, not even that one exists.
    assert nfs_probe.readdir(ALLOWED, ganesha, '/',
                             source=OTHER) == ('NFS4_OK', ['bmc'])
    assert nfs_probe.readdir(ALLOWED, ganesha, '/bmc',
                             source=ALLOWED) == ('NFS4_OK', ['key1'])
    assert nfs_probe.readdir(ALLOWED, ganesha, '/bmc',
                             source=THIRD) == ('NFS4_OK', ['key2'])
    assert nfs_probe.readdir(ALLOWED, ganesha, '/bmc',
                             source=OTHER) == ('NFS4_OK', [])


def test_connection_refused_is_a_probe_error():
    with pytest.raises(nfs_probe.ProbeError, match='refused'):
        nfs_probe.lookup(ALLOWED, _free_port(), '/bmc', source=OTHER)
