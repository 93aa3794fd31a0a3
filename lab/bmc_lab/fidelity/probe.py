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

"""The probe: what a process of the container sees, as ``key=value``
lines, and their parser.

The probe is a POSIX shell script over busybox applets (and ``getent``
when the image has one).  It reads the kernel's view of its own process
(``/proc/$$``), not what a shell would make of it: the ids and groups
from ``status``, the limits from ``limits``, the environment it was
started with from ``environ``.  Each line starts with :data:`PREFIX`, so
that it can be picked out of a workload's other output.

What it prints, field by field (:func:`parse` turns it into a flat dict):

* ``uid``, ``gid`` (effective), ``groups`` (the supplementary list);
* ``arg`` (its own arguments: a case passes its ``"$@"`` on), ``env``
  (one line each), ``cwd``;
* ``hostname``, ``etc_hostname`` (/etc/hostname), ``host_lookup`` (the
  first address the own hostname resolves to, as Java's
  ``InetAddress.getLocalHost()`` and MPI do: ``getent hosts``, or the
  hosts file when the image has no getent);
* ``mount`` for ``/``, ``/tmp``, ``/run``, ``/dev/shm``, ``/proc`` and
  ``/sys``: type and options when the path is a mount point, ``-`` when
  it is a plain directory of its parent's filesystem;
* ``rlimit`` nofile and memlock (soft, hard), ``cap_eff`` and
  ``cap_bnd`` (CapEff, CapBnd), ``oom_score_adj``;
* ``file``: what is under ``/run`` and ``/tmp`` (three levels), with the
  numeric owner;
* ``fact.*``: what the expected values depend on, not compared: the
  node's address on its default route, the kernel's last capability.
"""

import re

PREFIX = 'BMCPROBE '
#: Where the case images have it.
PATH = '/usr/local/bin/bmc-probe'
#: The paths whose mount is reported.
MOUNT_PATHS = ('/', '/tmp', '/run', '/dev/shm', '/proc', '/sys')
#: Variables a shell adds to what it passes on (busybox ash, dash, bash):
#: any case program that is a script passes them to the probe, under
#: Docker too; they say nothing of the runtime.
SHELL_VARIABLES = frozenset({'SHLVL', 'PWD', 'OLDPWD', '_'})
#: Mount options compared (the rest, relatime, mode=, are the
#: filesystem's details).
MOUNT_FLAGS = ('nosuid', 'nodev', 'noexec')

SCRIPT = r"""#!/bin/sh
# bmc-probe: the process view of the container, one line per field.
self=$$
p() { printf 'BMCPROBE %s=%s\n' "$1" "$2"; }
st() { awk -v k="$1:" '$1 == k {print $'"$2"'}' /proc/$self/status; }
p begin 1
p uid "$(st Uid 3)"
p gid "$(st Gid 3)"
p groups "$(awk '$1 == "Groups:" {for (i = 2; i <= NF; i++) print $i}' \
    /proc/$self/status | sort -n | tr '\n' ' ' | sed 's/ $//')"
for a in "$@"; do p arg "$a"; done
tr '\0' '\n' < /proc/$self/environ | while IFS= read -r kv; do
    p env "$kv"
done
p cwd "$(readlink /proc/$self/cwd)"
name=$(hostname)
p hostname "$name"
p etc_hostname "$(head -n 1 /etc/hostname 2>/dev/null || echo -)"
if command -v getent >/dev/null 2>&1; then
    addr=$(getent hosts "$name" | awk 'NR == 1 {print $1}')
    p fact.host_lookup_via getent
else
    addr=$(awk -v n="$name" '$1 !~ /^#/ {
        for (i = 2; i <= NF; i++) if ($i == n) {print $1; exit}
    }' /etc/hosts 2>/dev/null)
    p fact.host_lookup_via hosts-file
fi
p host_lookup "${addr:--}"
for m in / /tmp /run /dev/shm /proc /sys; do
    p "mount:$m" "$(awk -v m="$m" '$2 == m {t = $3 " " $4}
        END {print (t == "" ? "-" : t)}' /proc/$self/mounts)"
done
p rlimit:nofile "$(awk '/^Max open files/ {print $4, $5}' /proc/$self/limits)"
p rlimit:memlock "$(awk '/^Max locked memory/ {print $4, $5}' \
    /proc/$self/limits)"
p cap_eff "$(st CapEff 2)"
p cap_bnd "$(st CapBnd 2)"
p oom_score_adj "$(cat /proc/$self/oom_score_adj)"
find /run /tmp -mindepth 1 -maxdepth 3 \
    -exec stat -c 'BMCPROBE file=%n %u:%g' {} + 2>/dev/null
dev=$(ip -4 route show default 2>/dev/null | awk '{
    for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}')
p fact.default_address "$( [ -n "$dev" ] && ip -4 -o addr show dev "$dev" \
    scope global 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')"
p fact.cap_last_cap "$(cat /proc/sys/kernel/cap_last_cap 2>/dev/null)"
p fact.uts_hostname "$(cat /proc/sys/kernel/hostname)"
p end 1
"""


class ProbeError(Exception):
    """The output holds no complete probe."""


def _mount(value):
    """``tmpfs rw,nosuid,size=65536k`` -> (type, normalized options)."""
    if value in ('', '-'):
        return '-', '-'
    fstype, _, options = value.partition(' ')
    opts = options.split(',')
    kept = ['ro' if 'ro' in opts else 'rw']
    kept += [o for o in MOUNT_FLAGS if o in opts]
    kept += [o for o in opts if o.startswith('size=')]
    return fstype, ','.join(kept)


def _limit(value):
    soft, _, hard = value.partition(' ')
    return soft or '-', hard or '-'


def parse(text):
    """The probe's view in ``text`` (a workload's output) as
    ``(fields, facts)``: ``fields`` a flat dict (``uid``, ``env:PATH``,
    ``mount:/tmp``, ``fstype:/tmp``, ``files``...), what is compared;
    ``facts`` what the expected values depend on.

    :raises ProbeError: no probe began, or it did not end (the output
        was cut).
    """
    fields = {}
    facts = {}
    args = []
    files = []
    begun = ended = False
    for line in text.splitlines():
        if not line.startswith(PREFIX):
            continue
        key, _, value = line[len(PREFIX):].partition('=')
        if key == 'begin':
            # The last probe of the output counts.
            fields, facts, args, files = {}, {}, [], []
            begun, ended = True, False
        elif key == 'end':
            ended = True
        elif key == 'arg':
            args.append(value)
        elif key == 'env':
            name, _, val = value.partition('=')
            if name not in SHELL_VARIABLES:
                fields['env:' + name] = val
        elif key == 'file':
            path, _, owner = value.rpartition(' ')
            files.append('%s %s' % (re.sub('/+', '/', path), owner))
        elif key.startswith('fact.'):
            facts[key[len('fact.'):]] = value
        elif key.startswith('mount:'):
            path = key[len('mount:'):]
            fields['fstype:' + path], fields['mount:' + path] = _mount(value)
        elif key.startswith('rlimit:'):
            soft, hard = _limit(value)
            fields[key + ':soft'], fields[key + ':hard'] = soft, hard
        elif key in ('cap_eff', 'cap_bnd'):
            fields[key] = value.lower()
        else:
            fields[key] = value
    if not begun:
        raise ProbeError('no probe output (no %sbegin line)' % PREFIX)
    if not ended:
        raise ProbeError('the probe output was cut (no %send line)'
                         % PREFIX)
    fields['args'] = tuple(args)
    fields['files'] = tuple(sorted(files))
    return fields, facts
