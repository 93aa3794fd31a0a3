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

"""bmc-noise-unikernel (``unikernel/``) built by its ``build.sh`` and
booted as a multiboot kernel by QEMU (``-kernel``) on the lab nodes'
machine: i440fx with SeaBIOS, qemu64, TCG, no network.  It must say it
booted, print bmc-noise's JSON for each measurement on one line, end, and
power the machine off through ACPI S5 by itself (QEMU exits: a hang would
be the timeout).  iPXE's ``kernel`` + ``boot`` of the same file is
described in ``unikernel/README.rst``.
"""

import hashlib
import json
import os
import shutil
import subprocess
import time

import pytest

from ipa_hardware_manager import noise_native

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))
BUILD = os.path.join(ROOT, 'unikernel', 'build.sh')
QEMU = shutil.which('qemu-system-x86_64')
PREFIX = 'bmc-unikernel: '
#: A boot under TCG takes seconds; a hang ends here.
BOOT_TIMEOUT = 90

pytestmark = pytest.mark.skipif(
    QEMU is None or shutil.which('gcc') is None,
    reason='needs qemu-system-x86 and gcc (tools/host-setup.sh installs '
           'them)')


def _build(out):
    subprocess.run(['bash', BUILD, str(out)], check=True,
                   stdout=subprocess.DEVNULL, timeout=300)
    return out / 'bmc-noise-unikernel.elf'


@pytest.fixture(scope='module')
def elf(tmp_path_factory):
    return _build(tmp_path_factory.mktemp('unikernel'))


def qemu(elf, serial, append, machine='pc'):
    return [QEMU, '-accel', 'tcg', '-machine', machine, '-cpu', 'qemu64',
            '-m', '64', '-nographic', '-no-reboot', '-nic', 'none',
            '-kernel', str(elf), '-append', append,
            '-serial', 'file:%s' % serial, '-monitor', 'none']


def protocol_lines(serial):
    text = serial.read_bytes().decode('utf-8', 'replace')
    lines = [line for line in text.replace('\r', '').split('\n')
             if line.startswith(PREFIX)]
    # Every line of the protocol starts a line of the console, even after
    # the firmware's unterminated "Booting from ROM..".
    assert text.count(PREFIX) == len(lines), text
    return [line[len(PREFIX):] for line in lines]


def boot(elf, tmp_path, append, machine='pc'):
    """QEMU's exit status, the unikernel's lines, the seconds taken."""
    serial = tmp_path / 'serial.log'
    start = time.monotonic()
    proc = subprocess.run(
        qemu(elf, serial, append, machine),
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=BOOT_TIMEOUT)
    took = time.monotonic() - start
    return proc, protocol_lines(serial), took


def test_measures_twice_and_powers_off(elf, tmp_path):
    proc, lines, took = boot(elf, tmp_path, 'duration=1 repeat=2')
    assert proc.returncode == 0, proc.stderr
    assert [line.split(' ', 1)[0] for line in lines] == [
        'booted', 'result', 'result', 'end'], lines
    assert lines[-1] == 'end rc=0'
    for line in lines[1:3]:
        raw = json.loads(line[len('result '):])
        assert raw['cpu'] == 0
        assert raw['method'] in ('bmc-noise-unikernel rdtscp',
                                 'bmc-noise-unikernel lfence-rdtsc')
        assert raw['clock'] == 'pit'
        assert raw['floor_cycles'] > 0
        assert raw['threshold_cycles'] == 150
        assert set(raw['buckets']) == {'150-400', '400-2000', '2000-6000',
                                        '>6000'}
        assert raw['histogram']
        # The loop's cycles over the measured rate (a loaded host may
        # skew the calibration a little).
        assert 0.8 < raw['duration_s'] < 1.2
        # The counter's rate measured against the PIT: the host's TSC
        # under TCG, some GHz.
        assert 1e8 < raw['tsc_hz'] < 2e10
        report = noise_native.convert(raw)
        assert report['cycles']['counter'] == raw['method']
        assert report['samples'] == raw['samples'] > 0
        assert report['floor_ns'] > 0
        assert report['cycles']['buckets'] == raw['buckets']
    # Two measurements of a second each, the boot and the poweroff.
    assert took < 2 + 30, took


def test_bad_arguments_are_reported_and_it_still_powers_off(elf, tmp_path):
    proc, lines, _ = boot(elf, tmp_path,
                          'threshold=300 bogus=1 duration=31 repeat=x')
    assert proc.returncode == 0, proc.stderr
    assert lines == [
        'booted',
        'error unknown argument "bogus=1" (known: duration=SECONDS '
        'threshold=CYCLES repeat=N)',
        'error bad duration "31": seconds, more than 0 and at most 30, '
        'at most 3 decimals',
        'error bad repeat "x": 1 to 100',
        'end rc=1']


def test_threshold_and_fractional_duration(elf, tmp_path):
    proc, lines, _ = boot(elf, tmp_path, 'threshold=4000 duration=0.25')
    assert proc.returncode == 0, proc.stderr
    assert [line.split(' ', 1)[0] for line in lines] == [
        'booted', 'result', 'end'], lines
    raw = json.loads(lines[1][len('result '):])
    assert raw['threshold_cycles'] == 4000
    assert 0.15 < raw['duration_s'] < 0.35
    assert raw['events'] < raw['samples']


def test_acpi_pm_timer_where_there_is_no_pit(elf, tmp_path):
    proc, lines, _ = boot(elf, tmp_path, 'duration=0.1',
                          machine='pc,pit=off')
    assert proc.returncode == 0, proc.stderr
    raw = json.loads(lines[1][len('result '):])
    assert raw['clock'] == 'acpi-pm'
    assert 1e8 < raw['tsc_hz'] < 2e10


def test_without_acpi_it_says_so_and_halts(elf, tmp_path):
    """No ACPI tables: no poweroff; the line after "end" says why and the
    machine halts (QEMU is stopped here)."""
    serial = tmp_path / 'serial.log'
    proc = subprocess.Popen(
        qemu(elf, serial, 'duration=0.1', machine='pc,acpi=off'),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + BOOT_TIMEOUT
        while time.monotonic() < deadline:
            if serial.exists() and b'poweroff failed' in serial.read_bytes():
                break
            assert proc.poll() is None, 'QEMU exited: %s' % proc.returncode
            time.sleep(0.2)
        time.sleep(0.5)
        assert proc.poll() is None, 'QEMU exited: %s' % proc.returncode
    finally:
        proc.kill()
        proc.wait()
    lines = protocol_lines(serial)
    assert lines[-2:] == ['end rc=0', 'poweroff failed: no ACPI RSDP'], lines


def test_build_is_reproducible(elf, tmp_path):
    again = _build(tmp_path)
    assert (hashlib.sha256(again.read_bytes()).hexdigest()
            == hashlib.sha256(elf.read_bytes()).hexdigest())
