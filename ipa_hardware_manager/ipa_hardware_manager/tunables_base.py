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

"""What every knob applier shares: the host it works on, the result shape.

``Host`` is the machine seen through a root directory: ``/`` on the node,
a fake sysfs/procfs tree in the tests.  Writes never create files (a
missing sysfs file means the kernel lacks the feature), and process
affinity is only touched on the real root unless a test injects its own
functions, so a fake tree can never move the test runner's processes.
"""

import os
import subprocess

from bmc_common.tunables import schema

CPU_DIR = 'sys/devices/system/cpu'


class KnobError(Exception):
    """A knob could not be applied; the message says why."""


def run_command(cmd):
    """Run a command; return (exit code, combined output)."""
    # argv list, no shell: commands of the tunables schema.
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,  # noqa: S603
                          text=True, check=False, timeout=120)
    return proc.returncode, (proc.stderr or proc.stdout).strip()


def no_command(cmd):
    """What a fake root runs: nothing (never the test machine's tools)."""
    return 127, '%s: no commands on a fake root' % cmd[0]


class Host:
    """Files, commands and affinity of the machine under ``root``."""

    def __init__(self, root='/', run=None, setaffinity=None,
                 getaffinity=None, pid=None):
        self.root = root
        self.real = os.path.abspath(root) == '/'
        self.run = run or (run_command if self.real else no_command)
        self.setaffinity = setaffinity or (
            os.sched_setaffinity if self.real else None)
        self.getaffinity = getaffinity or (
            os.sched_getaffinity if self.real else None)
        self.pid = pid or os.getpid()

    def path(self, rel):
        return os.path.join(self.root, rel.lstrip('/'))

    @staticmethod
    def show(rel):
        """How a path is named in messages: as on the node."""
        return '/' + rel.lstrip('/')

    def exists(self, rel):
        return os.path.exists(self.path(rel))

    def read(self, rel):
        with open(self.path(rel)) as f:
            return f.read().strip()

    def write(self, rel, value):
        """Write ``value`` in one write(2); never create the file."""
        data = str(value).encode()
        try:
            fd = os.open(self.path(rel), os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise KnobError('writing %r to %s: %s' % (
                str(value), self.show(rel), exc.strerror or exc)) from exc

    def mkdir(self, rel):
        """Create a directory (a cgroup); an existing one is fine."""
        try:
            os.mkdir(self.path(rel))
        except FileExistsError:
            pass
        except OSError as exc:
            raise KnobError('creating %s: %s' % (
                self.show(rel), exc.strerror or exc)) from exc

    def listdir(self, rel):
        try:
            return sorted(os.listdir(self.path(rel)))
        except OSError:
            return []

    def online_cpus(self):
        try:
            return schema.expand_cpulist(self.read(CPU_DIR + '/online'), 0)
        except (OSError, schema.TunableError):
            return {int(d[3:]) for d in self.listdir(CPU_DIR)
                    if d.startswith('cpu') and d[3:].isdigit()} or {0}

    def last_cpu(self):
        """The CPU that ``N`` stands for: the highest possible one."""
        for name in ('possible', 'present', 'online'):
            try:
                return max(schema.expand_cpulist(
                    self.read('%s/%s' % (CPU_DIR, name)), 0))
            except (OSError, ValueError):
                continue
        return max(self.online_cpus())


def result(value, **kwargs):
    res = {'requested': value, 'previous': None, 'actual': None,
           'ok': False, 'supported': True}
    res.update(kwargs)
    return res


class Knob:
    """One runtime knob: ``read()``, ``apply(value)``, ``verify(value)``.

    Subclasses set ``name`` and implement ``read`` and ``apply``; they may
    override ``unsupported`` (a reason, or None) and ``check``.
    """

    name = None

    def __init__(self, host=None):
        self.host = host or Host()

    def unsupported(self, value):
        return None

    def read(self):
        raise NotImplementedError

    def apply(self, value):
        raise NotImplementedError

    def check(self, value, actual):
        """``(ok, detail)`` for a value read back."""
        if actual == value:
            return True, None
        return False, 'reads back %r' % (actual,)

    def verify(self, value):
        """``(ok, detail)``: does the machine now have ``value``?"""
        return self.check(value, self.read())

    def run(self, value):
        """Apply and verify; the per-knob result of ``apply_all``."""
        res = result(value)
        reason = self.unsupported(value)
        if reason:
            res.update(supported=False, reason=reason)
            return res
        known = False
        try:
            res['previous'] = self.read()
            known = True
        except (OSError, ValueError, KnobError) as exc:
            res['previous_error'] = str(exc)
        error = None
        # Write only what differs: re-applying is a no-op, and a value
        # that already holds cannot fail (e.g. smt off when forced off).
        if not known or not self.check(value, res['previous'])[0]:
            try:
                self.apply(value)
            except (OSError, ValueError, KnobError) as exc:
                error = str(exc)
        try:
            res['actual'] = self.read()
            ok, detail = self.check(value, res['actual'])
        except (OSError, ValueError, KnobError) as exc:
            ok, detail = False, 'cannot read back: %s' % exc
        res['ok'] = ok and error is None
        if error or detail:
            res['error'] = '; '.join(e for e in (error, detail) if e)
        return res


class FileKnob(Knob):
    """A knob that is one file: ``path``, ``missing`` says what lacks."""

    path = None
    missing = 'not supported by this kernel'

    def unsupported(self, value):
        if not self.host.exists(self.path):
            return '%s missing: %s' % (self.host.show(self.path),
                                       self.missing)
        return None

    def parse(self, text):
        return text

    def render(self, value):
        return str(value)

    def read(self):
        return self.parse(self.host.read(self.path))

    def apply(self, value):
        self.host.write(self.path, self.render(value))


class IntFileKnob(FileKnob):
    def parse(self, text):
        return int(text.split()[0])


def selected(text):
    """The selected word of ``always [madvise] never`` (or the text)."""
    if '[' in text and ']' in text:
        return text[text.index('[') + 1:text.index(']')]
    return text.strip()
