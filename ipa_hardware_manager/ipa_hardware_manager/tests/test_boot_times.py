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

from ipa_hardware_manager import boot_times

RECORDS = [
    b'6,0,0,-;Linux version 6.1.0-28-amd64\n',
    b'6,312,412000,-;Trying to unpack rootfs image as initramfs...\n',
    b'4,313,500000,c;something with ; and, commas\n SUBSYSTEM=x\n',
    BrokenPipeError(),
    b'6,400,3912345,-;Freeing initrd memory: 116580K\n',
    b'garbage without fields\n',
    b'6,500,4101000,-;Run /init as init process\n',
    b'6,501,4200000,-;Run /init as init process\n',
]


def _fake_kmsg(tmp_path, records):
    path = tmp_path / 'kmsg'
    path.write_text('')
    reads = list(records) + [BlockingIOError()]
    return str(path), mock.patch.object(boot_times.os, 'read',
                                        side_effect=reads)


def _fake_proc(tmp_path, starttime):
    stat = tmp_path / 'proc' / 'self' / 'stat'
    stat.parent.mkdir(parents=True)
    # A command name with spaces and a ')' of its own.
    stat.write_text('321 (ironic (agent)) S 1 321 321 0 -1 4194560 9 0 0 0 '
                    '1 2 0 0 20 0 3 0 %d 123 456\n' % starttime)
    return str(tmp_path / 'proc')


def test_kernel_records(tmp_path):
    path, reads = _fake_kmsg(tmp_path, RECORDS)
    with reads:
        got = list(boot_times.kernel_records(path))
    assert got[1] == (0.412, 'Trying to unpack rootfs image as initramfs...')
    assert got[2] == (0.5, 'something with ; and, commas')
    assert len(got) == 6     # the overwritten record and the garbage: none


def test_collect(tmp_path):
    path, reads = _fake_kmsg(tmp_path, RECORDS)
    proc = _fake_proc(tmp_path, starttime=1234)
    ticks = os.sysconf('SC_CLK_TCK')
    with reads, mock.patch.object(boot_times.time, 'clock_gettime',
                                  return_value=31.23456):
        got = boot_times.collect(path, proc=proc)
    assert got == {'uptime': 31.235,
                   'kernel': {'unpack_start': 0.412, 'unpack_end': 3.912,
                              'init_start': 4.101},
                   'initrd_kib': 116580,
                   'agent_start': round(1234 / ticks, 3),
                   'uname': {'release': os.uname().release,
                             'version': os.uname().version}}


def test_collect_without_kmsg_or_proc(tmp_path):
    got = boot_times.collect(str(tmp_path / 'none'), proc=str(tmp_path))
    assert set(got) == {'uptime', 'kernel', 'uname'}
    assert got['kernel'] == {}
