

"""The lab's DCMI virtual BMC, for real, against libvirt's test driver.

The BMC runs as its own process (as the lab runs it) on a free
127.0.0.1 UDP port for the domain "test" of libvirt's built-in
``test:///default`` driver: no libvirtd, no VM.  That driver reports a
domain's CPU time as the wall clock, i.e. one busy vCPU of the two the
domain has, so the model gives idle + (max - idle) / 2 = 170 W.
"""

import re
import shutil
import socket
import subprocess
import sys
import time
import types

from ironic.conf import CONF
import pytest

from ironic_bmc.power import readers

pytestmark = pytest.mark.skipif(shutil.which('ipmitool') is None,
                                reason='ipmitool is not installed')

URI = 'test:///default'
DOMAIN = 'test'
EXPECTED_WATTS = 170  # 90 + (250 - 90) * 0.5
#: Timing jitter between the CPU-time and wall-clock reads of a sample.
SLACK = 3

PLAIN_VBMC = """
import sys
from virtualbmc import vbmc
vbmc.VirtualBMC('admin', 'password', int(sys.argv[1]), '127.0.0.1',
                'test', 'test:///default').listen(timeout=1)
"""


@pytest.fixture(autouse=True)
def ipmi_spacing():
    # Ironic's defaults (5 s between commands to one BMC, retries for 60 s)
    # would only slow the readings and the refusal down here.
    CONF.set_override('min_command_interval', 1, group='ipmi')
    CONF.set_override('command_retry_timeout', 3, group='ipmi')
    yield
    CONF.clear_override('min_command_interval', group='ipmi')
    CONF.clear_override('command_retry_timeout', group='ipmi')


def _reader(port):
    """The reader the conductor makes for a node on this BMC."""
    return readers.reader_for_node(types.SimpleNamespace(
        uuid='3f6d8f4e-5d6c-4f7e-9a1b-2c3d4e5f6a7b', driver='ipmi',
        driver_info={'ipmi_address': '127.0.0.1', 'ipmi_port': port,
                     'ipmi_username': 'admin', 'ipmi_password': 'password'},
        driver_internal_info={}))


def _free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _wait_bound(port, proc, log_path, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log_path) as f:
                pytest.fail('BMC exited with %s: %s' % (proc.returncode,
                                                        f.read()))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(('127.0.0.1', port))
            except OSError:
                return
        time.sleep(0.1)
    pytest.fail('BMC did not bind 127.0.0.1:%d/udp' % port)


def _start(argv, port, tmp_path, name):
    log_path = str(tmp_path / (name + '.log'))
    log = open(log_path, 'w')
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, cwd=str(tmp_path))
    log.close()
    _wait_bound(port, proc, log_path)
    return proc, log_path


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture
def dcmi_bmc(tmp_path):
    port = _free_udp_port()
    proc, log_path = _start(
        [sys.executable, '-m', 'bmc_lab.dcmi_bmc', '--domain',
         DOMAIN, '--port', str(port), '--address', '127.0.0.1',
         '--username', 'admin', '--password', 'password',
         '--libvirt-uri', URI], port, tmp_path, 'dcmi_bmc')
    yield port, proc, log_path
    _stop(proc)


@pytest.fixture
def plain_vbmc(tmp_path):
    port = _free_udp_port()
    proc, _ = _start([sys.executable, '-c', PLAIN_VBMC, str(port)], port,
                     tmp_path, 'vbmc')
    yield port
    _stop(proc)


def ipmitool(port, *args, check=True):
    res = subprocess.run(
        ['ipmitool', '-I', 'lanplus', '-H', '127.0.0.1', '-p', str(port),
         '-U', 'admin', '-P', 'password', '-R', '3', '-N', '2'] + list(args),
        capture_output=True, text=True, timeout=60)
    if check:
        assert res.returncode == 0, res.stderr + res.stdout
    return res


def _watts(out, label):
    m = re.search(r'%s:\s+(\d+) Watts' % label, out)
    assert m, out
    return int(m.group(1))


def test_ipmitool_dcmi_power_reading(dcmi_bmc):
    port = dcmi_bmc[0]
    out = ipmitool(port, 'dcmi', 'power', 'reading').stdout
    assert abs(_watts(out, 'Instantaneous power reading')
               - EXPECTED_WATTS) <= SLACK
    assert _watts(out, 'Maximum during sampling period') >= (
        EXPECTED_WATTS - SLACK)
    assert 'Power reading state is:                   activated' in out
    out = ipmitool(port, 'dcmi', 'discover').stdout
    assert 'Power management available' in out


def test_reader_and_power_control(dcmi_bmc):
    port, proc, log_path = dcmi_bmc
    reader = _reader(port)
    try:
        assert reader.read() == pytest.approx(EXPECTED_WATTS, abs=SLACK)
        assert ipmitool(port, 'chassis', 'power', 'status').stdout.strip() \
            == 'Chassis Power is on'
        ipmitool(port, 'chassis', 'power', 'off')
        assert ipmitool(port, 'chassis', 'power', 'status').stdout.strip() \
            == 'Chassis Power is off'
        # Standby power while off, through both clients.
        assert reader.read() == 8.0
        out = ipmitool(port, 'dcmi', 'power', 'reading').stdout
        assert _watts(out, 'Instantaneous power reading') == 8
        # Boot device: set while off, read back (as with vbmcd).
        ipmitool(port, 'chassis', 'bootdev', 'pxe')
        out = ipmitool(port, 'chassis', 'bootparam', 'get', '5').stdout
        assert 'Force PXE' in out
        ipmitool(port, 'chassis', 'bootdev', 'disk')
        out = ipmitool(port, 'chassis', 'bootparam', 'get', '5').stdout
        assert 'Force Boot from default Hard-Drive' in out
        ipmitool(port, 'chassis', 'power', 'on')
        assert ipmitool(port, 'chassis', 'power', 'status').stdout.strip() \
            == 'Chassis Power is on'
        # Right after power-on the model has no CPU history yet: idle or
        # (a sample later) the busy figure, never standby.
        assert 90.0 <= reader.read() <= EXPECTED_WATTS + SLACK
    finally:
        reader.close()
    # SIGTERM ends the process cleanly.
    proc.terminate()
    assert proc.wait(10) == 0
    with open(log_path) as f:
        assert 'stopped' in f.read()


def test_plain_virtualbmc_has_no_dcmi(plain_vbmc):
    port = plain_vbmc
    reader = _reader(port)
    try:
        with pytest.raises(readers.PowerReadingUnavailable) as ctx:
            reader.read()
    finally:
        reader.close()
    assert ctx.value.reason == (
        'BMC at 127.0.0.1:%d does not implement DCMI Get Power Reading '
        '(DCMI request failed because: Invalid command (c1))' % port)
    assert ctx.value.permanent
    res = ipmitool(port, 'dcmi', 'power', 'reading', check=False)
    assert 'Invalid command' in res.stdout + res.stderr


def test_cli_fails_clearly_for_a_missing_domain(tmp_path):
    res = subprocess.run(
        [sys.executable, '-m', 'bmc_lab.dcmi_bmc', '--domain',
         'no-such-domain', '--port', str(_free_udp_port()),
         '--libvirt-uri', URI], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert 'no-such-domain' in res.stderr
