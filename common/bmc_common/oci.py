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

"""Values of the workload's run that both sides read the same way.

The conductor refuses a bad value at validate (naming the key); the agent
reads the same value again before it writes the OCI runtime spec, so an
initrd driven without the conductor gets the same answer.  Standard
library only, like :mod:`bmc_common.protocol`.
"""

import re
import signal

#: What ``crun kill`` and the kernel accept: SIGTERM, TERM, 15, SIGRTMIN+3.
_RT_RE = re.compile(r'^(?:SIG)?RT(MIN|MAX)([+-]\d+)?$')


def parse_signal(value):
    """The signal number of an image's ``StopSignal`` (``SIGTERM``,
    ``TERM``, ``15``, ``SIGRTMIN+3``).

    :raises ValueError: the kernel knows no such signal.
    """
    text = str(value).strip().upper()
    if text.isdigit():
        number = int(text)
    else:
        rt = _RT_RE.match(text)
        if rt:
            base = signal.SIGRTMIN if rt.group(1) == 'MIN' else signal.SIGRTMAX
            number = int(base) + int(rt.group(2) or 0)
        else:
            name = text if text.startswith('SIG') else 'SIG' + text
            try:
                number = int(signal.Signals[name])
            except KeyError:
                raise ValueError('%r is not a signal name the kernel knows '
                                 '(SIGTERM, SIGINT, SIGRTMIN+3, ...)'
                                 % (value,)) from None
    if not 0 < number <= int(signal.SIGRTMAX):
        raise ValueError('%r is not a signal number (1-%d)'
                         % (value, int(signal.SIGRTMAX)))
    return number


def signal_name(number):
    """The name of a signal number (``SIGTERM``, ``SIGRTMIN+3``)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return 'SIGRTMIN+%d' % (number - int(signal.SIGRTMIN))


_DURATION_RE = re.compile(r'^(-?\d+(?:\.\d+)?)\s*([smhd]?)$', re.I)
_CLOCK_RE = re.compile(r'^(?:(\d+):)?(\d+):(\d{2})$')
_SECONDS = {'': 1, 's': 1, 'm': 60, 'h': 3600, 'd': 86400}


def parse_walltime(value):
    """Seconds of ``container_walltime``: a number of seconds, a number
    with a unit (``90m``, ``2h``, ``1d``) or a clock (``MM:SS``,
    ``HH:MM:SS``).

    :raises ValueError: not a duration, or not more than 0.
    """
    if isinstance(value, bool):
        raise ValueError('%r is not a duration' % (value,))
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip()
        unit = _DURATION_RE.match(text)
        clock = _CLOCK_RE.match(text)
        if unit:
            seconds = float(unit.group(1)) * _SECONDS[unit.group(2).lower()]
        elif clock:
            seconds = (int(clock.group(1) or 0) * 3600
                       + int(clock.group(2)) * 60 + int(clock.group(3)))
        else:
            raise ValueError('%r is not a duration (seconds, 90m, 2h, '
                             'HH:MM:SS)' % (value,))
    if not seconds > 0:
        raise ValueError('%r: a walltime must be more than 0 seconds'
                         % (value,))
    return seconds


#: OCI ``process.rlimits`` types the run may set, by their short name.
RLIMITS = ('as', 'core', 'cpu', 'data', 'fsize', 'locks', 'memlock',
           'msgqueue', 'nice', 'nofile', 'nproc', 'rss', 'rtprio', 'rttime',
           'sigpending', 'stack')
#: What an HPC job expects of a whole machine: MPI and RDMA pin memory
#: (memlock), and may open a socket or queue pair per peer (a hard nofile
#: of 1048576, the kernel's default fs.nr_open, the highest a hard limit
#: may be).  The soft nofile stays 1024, as systemd and Docker leave it:
#: daemons size tables by it and select() cannot go past 1024; programs
#: that need more raise it up to the hard limit themselves.
DEFAULT_RLIMITS = {'memlock': 'unlimited',
                   'nofile': {'soft': 1024, 'hard': 1048576}}
UNLIMITED = 2 ** 64 - 1


def _limit(name, value):
    if value == 'unlimited' or value == -1:
        return UNLIMITED
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError('rlimit %s: %r is neither "unlimited" nor a '
                         'number >= 0' % (name, value))
    return value


def parse_rlimits(value):
    """The ``container_rlimits`` object over :data:`DEFAULT_RLIMITS`, as
    OCI ``process.rlimits`` entries (``{"type", "soft", "hard"}``).

    Each key is a short name of :data:`RLIMITS`; each value ``"unlimited"``,
    a number (soft and hard), or ``{"soft": ..., "hard": ...}``.

    :raises ValueError: naming the limit and the reason.
    """
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValueError('must be an object of limits, e.g. {"memlock": '
                         '"unlimited", "nofile": 65536}, got %r' % (value,))
    merged = dict(DEFAULT_RLIMITS)
    for name, limit in value.items():
        key = str(name).lower()
        key = key[len('rlimit_'):] if key.startswith('rlimit_') else key
        if key not in RLIMITS:
            raise ValueError('unknown rlimit %r (known: %s)'
                             % (name, ', '.join(RLIMITS)))
        merged[key] = limit
    result = []
    for name in sorted(merged):
        limit = merged[name]
        if isinstance(limit, dict):
            unknown = set(limit) - {'soft', 'hard'}
            if unknown or 'hard' not in limit:
                raise ValueError('rlimit %s: an object needs "hard" (and '
                                 'may have "soft"), got %r' % (name, limit))
            hard = _limit(name, limit['hard'])
            soft = _limit(name, limit.get('soft', limit['hard']))
        else:
            soft = hard = _limit(name, limit)
        if soft > hard:
            raise ValueError('rlimit %s: soft %s is above hard %s'
                             % (name, soft, hard))
        result.append({'type': 'RLIMIT_' + name.upper(), 'soft': soft,
                       'hard': hard})
    return result

