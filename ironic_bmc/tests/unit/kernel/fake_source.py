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

"""A kernel source tarball and the tools a build runs, faked: a build in
a second, on a machine without make or depmod (the unit tier's).

:func:`install_tools` writes ``make`` and ``depmod`` into a directory the
test puts first on PATH; the build worker is a real process that runs
them.  The fake ``make`` knows what the worker asks of Linux's top
Makefile: ``tinyconfig``, ``olddefconfig`` (which drops
CONFIG_NEEDS_MISSING, as Kconfig drops an option whose dependency is
unset), ``bzImage`` (writes the image with KBUILD_BUILD_VERSION and
KCFLAGS in it; with ``-fprofile-use`` warns as gcc does for each object
without a .gcda; sleeps FAKE_SLEEP seconds, then writes the file
FAKE_SLEEP_MARK names, if any), ``modules`` and ``modules_install``.
The tarball holds a Makefile and ``scripts/kconfig/merge_config.sh``.
"""

import io
import os
import sys
import tarfile

RELEASE = '6.1.0-fake'
OBJECTS = ('kernel/fork', 'kernel/sched/core', 'mm/memory')

FAKE_MAKE = r'''#!%(python)s
import os, sys, time
RELEASE = %(release)r
OBJECTS = %(objects)r
args, variables, targets = sys.argv[1:], {}, []
i = 0
while i < len(args):
    arg = args[i]
    if arg == '-C':
        i += 2
        continue
    if not arg.startswith('-j'):
        if '=' in arg:
            key, value = arg.split('=', 1)
            variables[key] = value
        else:
            targets.append(arg)
    i += 1
obj = variables.get('O', '.')
kcflags = os.environ.get('KCFLAGS', '')


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


for target in targets:
    config = os.path.join(obj, '.config')
    if target == 'tinyconfig':
        write(config, 'CONFIG_64BIT=y\n# CONFIG_MODULES is not set\n')
    elif target == 'olddefconfig':
        with open(config) as f:
            kept = [l for l in f if not l.startswith('CONFIG_NEEDS_MISSING')]
        write(config, ''.join(kept))
    elif target == 'bzImage':
        write(os.path.join(obj, 'arch/x86/boot/bzImage'), 'kernel #%%s [%%s]\n'
              %% (os.environ.get('KBUILD_BUILD_VERSION'), kcflags))
        write(os.path.join(obj, 'include/config/kernel.release'),
              RELEASE + '\n')
        time.sleep(float(os.environ.get('FAKE_SLEEP') or 0))
        if os.environ.get('FAKE_SLEEP_MARK'):
            write(os.environ['FAKE_SLEEP_MARK'], 'slept\n')
        for name in OBJECTS:
            if ('-fprofile-use' in kcflags
                    and not os.path.exists(os.path.join(obj, name + '.gcda'))):
                print("%%s.c: warning: '%%s.gcda' profile count data file not "
                      "found [-Wmissing-profile]" %% (name, name))
    elif target == 'modules':
        pass
    elif target == 'modules_install':
        moddir = os.path.join(variables['INSTALL_MOD_PATH'], 'lib/modules',
                              RELEASE)
        write(os.path.join(moddir, 'modules.builtin'),
              'kernel/fs/erofs/erofs.ko\n')
        write(os.path.join(moddir, 'modules.order'), '')
    else:
        sys.exit('make: *** No rule to make target %%r.' %% target)
'''

FAKE_DEPMOD = r'''#!/bin/sh
# depmod -a -b ROOT VERSION
touch "$3/lib/modules/$4/modules.dep"
'''

MERGE = """#!/bin/sh
# merge_config.sh -m -O OBJ BASE FRAGMENT...
shift; shift; obj=$1; shift; base=$1; shift
cat "$@" >> "$base"
"""


def install_tools(directory):
    """Write the fake ``make`` and ``depmod`` into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    for name, text in (
            ('make', FAKE_MAKE % {'python': sys.executable,
                                  'release': RELEASE,
                                  'objects': OBJECTS}),
            ('depmod', FAKE_DEPMOD)):
        path = os.path.join(directory, name)
        with open(path, 'w') as f:
            f.write(text)
        os.chmod(path, 0o755)
    return directory


def write(path):
    """Write the fake source tarball at ``path`` (a .tar.gz)."""
    with tarfile.open(path, 'w:gz') as tar:
        for name, text, mode in (
                ('Makefile', '# the fake make does the work\n', 0o644),
                ('scripts/kconfig/merge_config.sh', MERGE, 0o755)):
            data = text.encode()
            info = tarfile.TarInfo('linux-fake/' + name)
            info.size = len(data)
            info.mode = mode
            tar.addfile(info, io.BytesIO(data))
    return path


def profile_tar(path, build_id, objects=OBJECTS, prefix='var/lib/kb'):
    """A profile tar as a node returns it, for objects of ``build_id``."""
    with tarfile.open(path, 'w') as tar:
        for obj in objects:
            data = b'gcda of ' + obj.encode()
            info = tarfile.TarInfo('%s/builds/%s/obj/%s.gcda'
                                   % (prefix, build_id, obj))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
