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

"""The knobs of ``container_tunables``: names, legal values, boot forms.

One definition per knob: its name, a checker that validates and
normalises the value (strings are accepted everywhere, so that profile
files and JSON from the command line parse the same way), whether the
agent can apply it at run time, and the kernel arguments it turns into.

* runtime knobs are applied (and read back) by the agent on the running
  kernel;
* boot-only knobs (``isolcpus``, ``nohz_full``, ``rcu_nocbs`` and
  ``smt: force-off``) only exist as kernel arguments: ``split`` hands them
  to the conductor for the boot configuration; the agent only verifies
  them against ``/proc/cmdline``;
* some runtime knobs also have a boot form (``thp`` →
  ``transparent_hugepage=``); ``split(..., prefer_boot=True)`` uses it,
  for initrds that have no agent.

CPU lists use the kernel's syntax (``0-3,6``); the upper end of a range
may be ``N``, the highest CPU of the machine (``1-N``: every CPU but 0),
which the kernel itself understands on its command line since 5.13 and
the agent resolves at run time.  A value of ``None`` means "not set":
``validate`` drops it (so an override can remove a profile's knob).

Standard library only: the agent ramdisk imports this module.
"""

import difflib
import re

from bmc_common.tunables import cpulist

#: (What the knobs' values are made of, CPU lists and masks, and the
#: error every check raises: cpulist.)
PREFIX = cpulist.PREFIX
MAX_CPU = cpulist.MAX_CPU
LAST = cpulist.LAST
TunableError = cpulist.TunableError
_fail = cpulist.fail
parse_cpulist = cpulist.parse_cpulist
format_cpulist = cpulist.format_cpulist
expand_cpulist = cpulist.expand_cpulist
cpulists_overlap = cpulist.cpulists_overlap
cpus_to_mask = cpulist.cpus_to_mask
mask_to_cpus = cpulist.mask_to_cpus


# --- value checkers: (name, value) -> normalised value -------------------

def _choice(*choices, aliases=None):
    def check(name, value):
        if isinstance(value, str):
            text = value.strip().lower()
            text = (aliases or {}).get(text, text)
            if text in choices:
                return text
        _fail(name, '%r is not one of %s' % (value, ', '.join(choices)))
    return check


def _int(lo, hi, pow2=False):
    def check(name, value):
        if isinstance(value, str) and re.fullmatch(r'\s*\d+\s*', value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(name, 'expected an integer, got %r' % (value,))
        if not lo <= value <= hi:
            _fail(name, '%d is out of range %d..%d' % (value, lo, hi))
        if pow2 and value & (value - 1):
            _fail(name, '%d is not a power of two (the kernel rounds it up '
                  'to %d: ask for that)' % (value, 1 << value.bit_length()))
        return value
    return check


def _smt(name, value):
    if isinstance(value, bool):
        return 'on' if value else 'off'
    return _choice('on', 'off', 'force-off',
                   aliases={'forceoff': 'force-off'})(name, value)


def _switch(name, value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.strip() in ('0', '1'):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return value
    _fail(name, '%r is not one of 0, 1' % (value,))


def _cpulist(name, value):
    return format_cpulist(parse_cpulist(value, name))


def _cpulist_no_cpu0(name, value):
    ranges = parse_cpulist(value, name)
    if ranges[0][0] == 0:
        _fail(name, 'CPU 0 is never taken offline (it runs the agent and '
              'the timekeeping)')
    return format_cpulist(ranges)


_ISOLCPUS_FLAGS = ('nohz', 'domain', 'managed_irq')


def _isolcpus(name, value):
    if not isinstance(value, str):
        return _cpulist(name, value)
    flags = []
    items = [i.strip() for i in value.split(',')]
    while items and items[0] and not items[0][0].isdigit():
        flag = items.pop(0)
        if flag not in _ISOLCPUS_FLAGS:
            _fail(name, '%r is not an isolcpus flag (%s) nor a CPU' % (
                flag, ', '.join(_ISOLCPUS_FLAGS)))
        if flag not in flags:
            flags.append(flag)
    return ','.join(flags + [_cpulist(name, ','.join(items))])


def _rps_cpus(name, value):
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ('all', 'none'):
            return text
        if text.startswith('0x'):
            try:
                cpus = mask_to_cpus(text)
            except ValueError as exc:
                _fail(name, str(exc))
            return format_cpulist(cpus) if cpus else 'none'
    return _cpulist(name, value)


_IFNAME = re.compile(r'^[A-Za-z0-9_.-]{1,15}$')


def _per_nic(check):
    """A value for every NIC (``'*'``) and/or per interface name."""
    def per_nic(name, value):
        if not isinstance(value, dict):
            value = {'*': value}
        if not value:
            _fail(name, 'empty mapping of interfaces')
        out = {}
        for nic, item in value.items():
            if nic != '*' and (not isinstance(nic, str) or nic in ('.', '..')
                               or not _IFNAME.match(nic)):
                _fail(name, '%r is not a network interface name' % (nic,))
            out[nic] = check('%s.%s' % (name, nic) if nic != '*' else name,
                             item)
        return out
    return per_nic


_SYSCTL_NAME = re.compile(r'^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$')


def _sysctl(name, value):
    if not isinstance(value, dict) or not value:
        _fail(name, "expected a mapping of sysctl names to values, e.g. "
              "{'vm.swappiness': 10}, got %r" % (value,))
    out = {}
    for key in sorted(value, key=str):
        if (not isinstance(key, str) or '/' in key or '..' in key
                or not _SYSCTL_NAME.match(key)):
            _fail(name, '%r is not a sysctl name (dotted like '
                  "vm.swappiness; no slashes, no '..')" % (key,))
        item = value[key]
        if isinstance(item, bool):
            item = int(item)
        if isinstance(item, (list, tuple)) and item and all(
                isinstance(i, (int, str)) and not isinstance(i, bool)
                for i in item):
            item = ' '.join(str(i) for i in item)
        if isinstance(item, int):
            item = str(item)
        if (not isinstance(item, str) or len(item) > 1024
                or any(c in item for c in '\n\0')):
            _fail('%s.%s' % (name, key), 'expected an integer or a '
                  'one-line string, got %r' % (item,))
        out[key] = item.strip()
    return out


_MODULE = re.compile(r'^[A-Za-z0-9_-]{1,55}$')


def _modules(name, value):
    if isinstance(value, str):
        value = [v for v in re.split(r'[\s,]+', value) if v]
    if not isinstance(value, (list, tuple)):
        _fail(name, 'expected a list of module names, got %r' % (value,))
    out = []
    for module in value:
        if not isinstance(module, str) or not _MODULE.match(module):
            _fail(name, '%r is not a kernel module name' % (module,))
        if module not in out:
            out.append(module)
    return out


def _governor(name, value):
    if isinstance(value, str) and re.fullmatch(r'[a-z][a-z0-9_]{0,14}',
                                               value.strip()):
        return value.strip()
    _fail(name, '%r is not a cpufreq governor name (e.g. performance, '
          'powersave, schedutil)' % (value,))


# --- the knobs ---------------------------------------------------------------

class Knob:
    """One tunable: checker, run-time applicability, kernel arguments."""

    def __init__(self, name, check, doc, runtime=True, boot=None):
        self.name = name
        self.check = check
        self.doc = doc
        self._runtime = runtime
        self._boot = boot

    def normalise(self, value):
        return self.check(self.name, value)

    def is_runtime(self, value=None):
        if callable(self._runtime):
            return self._runtime(value)
        return self._runtime

    def kernel_args(self, value):
        """Kernel arguments equivalent to ``value`` ([] if there are none).

        ``value`` must be normalised.
        """
        return list(self._boot(value)) if self._boot else []


def _arg(key):
    return lambda value: ['%s=%s' % (key, value)]


def _sysctl_args(value):
    return ['sysctl.%s=%s' % (k, v) for k, v in value.items()
            if v and not any(c.isspace() for c in v)]


_KNOBS = [
    Knob('kernel_modules', _modules,
         'kernel modules to load (modprobe), in order'),
    Knob('cpus_online', _cpulist, 'CPUs to bring online'),
    Knob('cpus_offline', _cpulist_no_cpu0,
         'CPUs to take offline (never CPU 0)'),
    Knob('smt', _smt,
         'SMT siblings: on, off (runtime, smt/control) or force-off '
         '(boot: nosmt=force)',
         runtime=lambda v: v != 'force-off',
         boot=lambda v: {'off': ['nosmt'],
                         'force-off': ['nosmt=force']}.get(v, [])),
    Knob('cpufreq_governor', _governor,
         'cpufreq scaling governor of every online CPU',
         boot=_arg('cpufreq.default_governor')),
    Knob('thp', _choice('always', 'madvise', 'never'),
         'transparent huge pages: enabled',
         boot=_arg('transparent_hugepage')),
    Knob('thp_defrag',
         _choice('always', 'defer', 'defer+madvise', 'madvise', 'never'),
         'transparent huge pages: defrag'),
    Knob('hugepages', _int(0, 1 << 30),
         'number of huge pages of the default size (vm.nr_hugepages)',
         boot=_arg('hugepages')),
    Knob('numa_balancing', _switch, 'automatic NUMA balancing (0/1)',
         boot=lambda v: ['numa_balancing=%s'
                         % ('enable' if v else 'disable')]),
    Knob('sysctl', _sysctl, 'sysctl settings: {dotted.name: value}',
         boot=_sysctl_args),
    Knob('rps_sock_flow_entries', _int(0, 1 << 29, pow2=True),
         'RFS: global socket flow table size'),
    Knob('rps_flow_cnt', _per_nic(_int(0, 1 << 29, pow2=True)),
         'RFS: flow table size of every rx queue (per NIC or all)'),
    Knob('rps_cpus', _per_nic(_rps_cpus),
         'RPS: CPUs of every rx queue: all, none, a CPU list or 0x<mask> '
         '(per NIC or all)'),
    Knob('housekeeping_cpus', _cpulist,
         'CPUs for the agent and IRQs (low-noise)',
         boot=_arg('irqaffinity')),
    Knob('workload_cpus', _cpulist,
         'CPUs for the workload (default: the online CPUs that are not '
         'housekeeping)'),
    Knob('isolcpus', _isolcpus,
         'boot only: isolcpus=[nohz,domain,managed_irq,]<cpus>',
         runtime=False, boot=_arg('isolcpus')),
    Knob('nohz_full', _cpulist, 'boot only: nohz_full=<cpus>',
         runtime=False, boot=_arg('nohz_full')),
    Knob('rcu_nocbs', _cpulist, 'boot only: rcu_nocbs=<cpus>',
         runtime=False, boot=_arg('rcu_nocbs')),
]

#: Every knob by name, in the order the agent applies them.
KNOBS = {k.name: k for k in _KNOBS}

#: Dict-valued knobs (profile files write them as ``knob.key = value``).
DICT_KNOBS = ('sysctl', 'rps_cpus', 'rps_flow_cnt')

#: sysctls that have a knob of their own.
_SYSCTL_TWINS = {'kernel.numa_balancing': 'numa_balancing',
                 'vm.nr_hugepages': 'hugepages',
                 'net.core.rps_sock_flow_entries': 'rps_sock_flow_entries'}


def _knob(name):
    if isinstance(name, str) and name in KNOBS:
        return KNOBS[name]
    hint = ''
    if isinstance(name, str):
        close = sorted((k for k in KNOBS if name.startswith(k)
                        or k.startswith(name)), key=len, reverse=True)
        close = close or difflib.get_close_matches(name, KNOBS, n=1)
        if close:
            hint = " (did you mean '%s'?)" % close[0]
    if name == 'profile':
        hint = ' (profiles are resolved by bmc_common.tunables.profiles)'
    raise TunableError('%s: unknown knob %r%s; known knobs: %s' % (
        PREFIX, name, hint, ', '.join(sorted(KNOBS))))


def _cross_check(out):
    on, off = out.get('cpus_online'), out.get('cpus_offline')
    if on and off and cpulists_overlap(on, off):
        _fail('cpus_offline', 'overlaps cpus_online (%s)' % on)
    hk, wl = out.get('housekeeping_cpus'), out.get('workload_cpus')
    if hk and wl and cpulists_overlap(hk, wl):
        _fail('workload_cpus', '%s overlaps housekeeping_cpus %s'
              % (wl, hk))
    if hk and off and cpulists_overlap(hk, off):
        _fail('housekeeping_cpus', '%s overlaps cpus_offline %s'
              % (hk, off))
    for key, twin in _SYSCTL_TWINS.items():
        if key in out.get('sysctl', {}) and twin in out:
            _fail('sysctl', '%s is the knob %s as well; set only one'
                  % (key, twin))


def validate(knobs):
    """Check and normalise a dict of knobs; raise TunableError.

    Idempotent: a normalised dict validates to itself.
    """
    if knobs is None:
        return {}
    if not isinstance(knobs, dict):
        raise TunableError('%s: expected a mapping of knob names to '
                           'values, got %s' % (PREFIX, type(knobs).__name__))
    for name in knobs:
        _knob(name)
    out = {}
    for name, knob in KNOBS.items():
        if knobs.get(name) is not None:
            out[name] = knob.normalise(knobs[name])
    _cross_check(out)
    return out


def is_runtime(name, value=None):
    """Whether the agent can apply ``name`` (with ``value``) at run time.

    ``smt`` is run-time except for the value ``force-off``.
    """
    knob = _knob(name)
    if value is not None:
        value = knob.normalise(value)
    return knob.is_runtime(value)


def kernel_args(name, value):
    """The kernel arguments of one (normalised) knob value."""
    return _knob(name).kernel_args(value)


def split(knobs, prefer_boot=False):
    """Return ``(runtime_knobs, kernel_args)`` for validated ``knobs``.

    Boot-only knobs always become kernel arguments.  With
    ``prefer_boot`` every knob with a boot form does too (for an initrd
    without the agent); what has none stays in ``runtime_knobs``.
    """
    knobs = validate(knobs)
    runtime, args = {}, []
    for name, value in knobs.items():
        knob = KNOBS[name]
        if name == 'sysctl' and prefer_boot:
            # Values with spaces cannot ride on the command line.
            rest = {k: v for k, v in value.items()
                    if not v or any(c.isspace() for c in v)}
            args.extend(knob.kernel_args(value))
            if rest:
                runtime[name] = rest
        elif not knob.is_runtime(value) or (prefer_boot
                                             and knob.kernel_args(value)):
            args.extend(knob.kernel_args(value))
        else:
            runtime[name] = value
    return runtime, args
