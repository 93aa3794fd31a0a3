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

"""CPU lists and masks, as the kernel writes them, for the tunables.

``0-3,8,10-N`` lists (``N``: the last CPU), hexadecimal masks with comma
groups, and the error every tunables check raises (:class:`TunableError`,
naming the knob as ``container_tunables/<name>``).  Standard library only:
both the conductor and the agent use it (:mod:`.schema`).
"""

import re

PREFIX = 'container_tunables'

#: Largest CPU number accepted (the kernel's NR_CPUS maximum).
MAX_CPU = 8191
LAST = 'N'


class TunableError(ValueError):
    """A knob or profile is not acceptable; the message names it."""


def fail(name, message):
    raise TunableError('%s/%s: %s' % (PREFIX, name, message))


def merge(ranges):
    """Sort and merge (first, last) ranges; last None means up to N."""
    big = MAX_CPU + 1
    out = []
    for lo, hi in sorted(ranges, key=lambda r: r[0]):
        top = big if hi is None else hi
        if out:
            plo, phi = out[-1]
            ptop = big if phi is None else phi
            if lo <= ptop + 1:
                if top > ptop:
                    out[-1] = (plo, hi)
                continue
        out.append((lo, hi))
    return tuple(out)


def parse_cpulist(value, name='cpulist'):
    """Parse ``0-3,6,8-N`` into merged ``(first, last)`` ranges.

    A list of integers is accepted too.  ``last`` is None for ``-N``.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        if not value or not all(isinstance(c, int)
                                and not isinstance(c, bool) for c in value):
            fail(name, 'expected a non-empty list of CPU numbers, got %r'
                  % (value,))
        value = ','.join(str(c) for c in value)
    if not isinstance(value, str) or not value.strip():
        fail(name, "expected a CPU list such as '0-3,6', got %r" % (value,))
    ranges = []
    for part in value.replace(' ', '').split(','):
        lo, sep, hi = part.partition('-')
        if not lo.isdigit() or (sep and not (hi.isdigit() or hi == LAST)):
            fail(name, "%r is not a CPU list such as '0-3,6' or '1-N'"
                  % value)
        lo = int(lo)
        if not sep:
            hi = lo
        elif hi == LAST:
            hi = None
        else:
            hi = int(hi)
            if hi < lo:
                fail(name, '%r: range %s goes backwards' % (value, part))
        if lo > MAX_CPU or (hi is not None and hi > MAX_CPU):
            fail(name, '%r: CPU numbers go up to %d' % (value, MAX_CPU))
        ranges.append((lo, hi))
    return merge(ranges)


def format_cpulist(ranges):
    """The canonical text of parsed ranges (or of a set of CPUs)."""
    if isinstance(ranges, (set, frozenset, list)):
        ranges = merge((c, c) for c in ranges)
    parts = []
    for lo, hi in ranges:
        if hi is None:
            parts.append('%d-%s' % (lo, LAST))
        elif lo == hi:
            parts.append(str(lo))
        else:
            parts.append('%d-%d' % (lo, hi))
    return ','.join(parts)


def expand_cpulist(value, last):
    """The set of CPUs of a CPU list; ``N`` stands for ``last``."""
    ranges = value if isinstance(value, tuple) else parse_cpulist(value)
    cpus = set()
    for lo, hi in ranges:
        cpus.update(range(lo, (last if hi is None else hi) + 1))
    return cpus


def cpulists_overlap(a, b):
    big = MAX_CPU + 1
    for alo, ahi in parse_cpulist(a):
        for blo, bhi in parse_cpulist(b):
            atop = big if ahi is None else ahi
            btop = big if bhi is None else bhi
            if alo <= btop and blo <= atop:
                return True
    return False


def cpus_to_mask(cpus):
    """Hex CPU mask in the kernel's format (32-bit groups, commas)."""
    bits = 0
    for cpu in cpus:
        bits |= 1 << cpu
    text = '%x' % bits
    groups = []
    while text:
        groups.insert(0, text[-8:].rjust(8, '0'))
        text = text[:-8]
    return ','.join(groups)


def mask_to_cpus(mask):
    """The set of CPUs of a hex mask (``0f``, ``ff,ffffffff``, ``0x3``)."""
    text = mask.strip().lower()
    if text.startswith('0x'):
        text = text[2:]
    text = text.replace(',', '')
    if not text or not re.fullmatch('[0-9a-f]+', text):
        raise ValueError('%r is not a hex CPU mask' % mask)
    bits = int(text, 16)
    return {i for i in range(bits.bit_length()) if bits >> i & 1}
