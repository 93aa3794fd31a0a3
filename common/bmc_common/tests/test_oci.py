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

import signal

import pytest

from bmc_common import oci


@pytest.mark.parametrize('value,number', [
    ('SIGTERM', signal.SIGTERM), ('TERM', signal.SIGTERM),
    ('sigint', signal.SIGINT), ('15', 15), (9, 9),
    ('SIGRTMIN+3', int(signal.SIGRTMIN) + 3),
    ('RTMAX-1', int(signal.SIGRTMAX) - 1), ('SIGRTMIN', signal.SIGRTMIN),
])
def test_signals(value, number):
    assert oci.parse_signal(value) == number


@pytest.mark.parametrize('value', ['SIGNOPE', '', 'SIG', '0', '999',
                                   'SIGRTMAX+1', 'TERM;reboot'])
def test_bad_signals(value):
    with pytest.raises(ValueError, match='signal'):
        oci.parse_signal(value)


@pytest.mark.parametrize('value,seconds', [
    (60, 60), ('60', 60), (1.5, 1.5), ('90m', 5400), ('2h', 7200),
    ('1d', 86400), ('30s', 30), ('05:00', 300), ('1:02:03', 3723),
])
def test_walltimes(value, seconds):
    assert oci.parse_walltime(value) == seconds


@pytest.mark.parametrize('value,message', [
    (0, 'more than 0'), ('-5', 'more than 0'), (-1, 'more than 0'),
    ('0s', 'more than 0'), ('soon', 'not a duration'),
    (True, 'not a duration'), ('1:2:3', 'not a duration'),
])
def test_bad_walltimes(value, message):
    with pytest.raises(ValueError, match=message):
        oci.parse_walltime(value)


def test_rlimits_defaults():
    assert oci.parse_rlimits(None) == [
        {'type': 'RLIMIT_MEMLOCK', 'soft': oci.UNLIMITED,
         'hard': oci.UNLIMITED},
        {'type': 'RLIMIT_NOFILE', 'soft': 1024, 'hard': 1048576}]


def test_rlimits_over_defaults():
    limits = {r['type']: (r['soft'], r['hard']) for r in oci.parse_rlimits(
        {'memlock': 65536, 'NOFILE': {'soft': 1024, 'hard': 4096},
         'rlimit_core': -1})}
    assert limits == {'RLIMIT_MEMLOCK': (65536, 65536),
                      'RLIMIT_NOFILE': (1024, 4096),
                      'RLIMIT_CORE': (oci.UNLIMITED, oci.UNLIMITED)}


@pytest.mark.parametrize('value,message', [
    ([1], 'must be an object'), ({'files': 1}, "unknown rlimit 'files'"),
    ({'nofile': 'lots'}, 'rlimit nofile'), ({'nofile': -2}, 'rlimit nofile'),
    ({'nofile': True}, 'rlimit nofile'),
    ({'nofile': {'soft': 10}}, 'needs "hard"'),
    ({'nofile': {'soft': 10, 'hard': 5}}, 'soft 10 is above hard 5'),
])
def test_bad_rlimits(value, message):
    with pytest.raises(ValueError, match=message):
        oci.parse_rlimits(value)
