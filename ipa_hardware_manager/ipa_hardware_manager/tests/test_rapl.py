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

import os
from unittest import mock

import pytest

from ipa_hardware_manager import rapl

MAX = 262143328850


def zone(root, name, label, energy, max_range=MAX):
    path = os.path.join(root, rapl.POWERCAP, name)
    os.makedirs(path, exist_ok=True)
    for leaf, text in (('name', label), ('energy_uj', energy),
                       ('max_energy_range_uj', max_range)):
        with open(os.path.join(path, leaf), 'w') as f:
            f.write('%s\n' % text)


@pytest.fixture
def root(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, rapl.POWERCAP, 'intel-rapl'))
    zone(root, 'intel-rapl:0', 'package-0', 1000000)
    zone(root, 'intel-rapl:0:0', 'core', 500000)
    zone(root, 'intel-rapl:0:1', 'dram', 200000)
    zone(root, 'intel-rapl:1', 'package-1', MAX - 1000000)
    return root


def test_snapshot(root):
    snap = rapl.snapshot(root)
    assert snap['state'] == 'present'
    assert list(snap['zones']) == ['intel-rapl:0', 'intel-rapl:0:0',
                                   'intel-rapl:0:1', 'intel-rapl:1']
    assert snap['zones']['intel-rapl:0:1'] == {
        'name': 'dram', 'energy_uj': 200000, 'max_energy_range_uj': MAX}


def test_delta_with_wraparound(root):
    a = rapl.snapshot(root)
    zone(root, 'intel-rapl:0', 'package-0', 6000000)      # +5 J
    zone(root, 'intel-rapl:0:0', 'core', 2500000)         # +2 J
    zone(root, 'intel-rapl:0:1', 'dram', 1200000)         # +1 J
    zone(root, 'intel-rapl:1', 'package-1', 2000000)      # wrapped: +3 J
    b = rapl.snapshot(root)
    b['monotonic'] = a['monotonic'] + 2.0
    d = rapl.delta(a, b)
    assert d['state'] == 'measured'
    assert d['domains'] == {'intel-rapl:0/package-0': 5.0,
                            'intel-rapl:0:0/core': 2.0,
                            'intel-rapl:0:1/dram': 1.0,
                            'intel-rapl:1/package-1': 3.0}
    # Packages only: subzones are part of (or beside) them.
    assert d['joules'] == 8.0
    assert d['seconds'] == 2.0 and d['watts'] == 4.0


def test_counter_delta():
    assert rapl.counter_delta(10, 25, 100) == 15
    assert rapl.counter_delta(90, 5, 100) == 15
    assert rapl.counter_delta(7, 7, 100) == 0


def test_psys_not_added(root):
    zone(root, 'intel-rapl:2', 'psys', 0)
    a = rapl.snapshot(root)
    zone(root, 'intel-rapl:2', 'psys', 9000000)
    d = rapl.delta(a, rapl.snapshot(root))
    assert d['domains']['intel-rapl:2/psys'] == 9.0
    assert d['joules'] == 0.0


def test_absent_without_powercap(tmp_path):
    snap = rapl.snapshot(str(tmp_path))
    assert snap['state'] == 'absent'
    assert snap['reason'].startswith('/sys/class/powercap missing')
    assert 'QEMU lab nodes have none' in snap['reason']
    d = rapl.delta(snap, snap)
    assert d == snap


def test_absent_without_zones(tmp_path):
    os.makedirs(os.path.join(str(tmp_path), rapl.POWERCAP, 'dtpm'))
    snap = rapl.snapshot(str(tmp_path))
    assert snap['state'] == 'absent'
    assert 'no intel-rapl zones' in snap['reason']
    assert 'QEMU lab nodes have none' in snap['reason']


def test_absent_without_permission(root):
    with mock.patch.object(rapl, '_read', side_effect=PermissionError(13)):
        snap = rapl.snapshot(root)
    assert snap['state'] == 'absent'
    assert 'permission denied' in snap['reason']
    assert 'CVE-2020-8694' in snap['reason']


def test_meter_adds_samples_over_several_wraps(root):
    small = 10000000  # 10 J range: wraps often
    for name, label in (('intel-rapl:0', 'package-0'),
                        ('intel-rapl:1', 'package-1')):
        zone(root, name, label, 0, small)
    meter = rapl.Meter(root, interval=0).start()
    assert meter.thread is None
    for energy in (8000000, 6000000, 4000000):  # +8 J, +8 J, +8 J
        zone(root, 'intel-rapl:0', 'package-0', energy, small)
        meter.sample()
    result = meter.stop()
    assert result['state'] == 'measured'
    assert result['domains']['intel-rapl:0/package-0'] == 24.0
    assert result['joules'] == 24.0
    assert result['samples'] == 4 and result['running'] is False
    # Stopping twice keeps the result.
    assert meter.stop()['joules'] == 24.0


def test_meter_thread_and_current(root):
    meter = rapl.Meter(root, interval=0.01).start()
    zone(root, 'intel-rapl:0', 'package-0', 3000000)
    assert meter.current()['joules'] == 2.0
    assert meter.current()['running'] is True
    meter.stop()
    assert not meter.thread.is_alive()


def test_meter_absent(tmp_path):
    meter = rapl.Meter(str(tmp_path)).start()
    assert meter.thread is None
    result = meter.stop()
    assert result['state'] == 'absent'
    assert 'powercap' in result['reason']
