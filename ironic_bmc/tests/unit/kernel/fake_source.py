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

"""A source tarball that builds like Linux's top Makefile, in a second.

It knows the targets and files the build worker uses: ``tinyconfig``,
``olddefconfig`` (which drops CONFIG_NEEDS_MISSING, as Kconfig drops an
option whose dependency is unset), ``bzImage`` (writes the image with
KBUILD_BUILD_VERSION and KCFLAGS in it, warns per object that has no
.gcda when KCFLAGS asks for a profile, sleeps FAKE_SLEEP seconds),
``modules``, ``modules_install``, and ``scripts/kconfig/merge_config.sh``.
"""

import io
import tarfile

RELEASE = '6.1.0-fake'
OBJECTS = ('kernel/fork', 'kernel/sched/core', 'mm/memory')

_WARNING = ("$$f.c: warning: '$$f.gcda' profile count data file not "
            "found [-Wmissing-profile]")
_RECIPES = (
    ('tinyconfig', (
        'mkdir -p $(O)',
        "printf 'CONFIG_64BIT=y\\n# CONFIG_MODULES is not set\\n' "
        '> $(O)/.config')),
    ('olddefconfig', (
        "grep -v '^CONFIG_NEEDS_MISSING' $(O)/.config > $(O)/.new || true",
        'mv $(O)/.new $(O)/.config')),
    ('bzImage', (
        'mkdir -p $(O)/arch/x86/boot $(O)/include/config',
        'echo "kernel #$(KBUILD_BUILD_VERSION) [$(KCFLAGS)]" '
        '> $(O)/arch/x86/boot/bzImage',
        'echo $(RELEASE) > $(O)/include/config/kernel.release',
        'if [ -n "$(FAKE_SLEEP)" ]; then sleep $(FAKE_SLEEP); fi',
        '@for f in $(OBJECTS); do case "$(KCFLAGS)" in *profile-use*) '
        '[ -f $(O)/$$f.gcda ] || echo "%s";; esac; done' % _WARNING)),
    ('modules', ('true',)),
    ('modules_install', (
        'mkdir -p $(MODDIR)',
        "printf 'kernel/fs/erofs/erofs.ko\\n' > $(MODDIR)/modules.builtin",
        ': > $(MODDIR)/modules.order')),
)
MAKEFILE = '\n'.join(
    ['O ?= .', 'RELEASE = ' + RELEASE, 'OBJECTS = ' + ' '.join(OBJECTS),
     'MODDIR = $(INSTALL_MOD_PATH)/lib/modules/$(RELEASE)']
    + ['%s:\n%s' % (target, '\n'.join('\t' + line for line in lines))
       for target, lines in _RECIPES]) + '\n'

MERGE = """#!/bin/sh
# merge_config.sh -m -O OBJ BASE FRAGMENT...
shift; shift; obj=$1; shift; base=$1; shift
cat "$@" >> "$base"
"""


def write(path):
    """Write the fake source tarball at ``path`` (a .tar.gz)."""
    with tarfile.open(path, 'w:gz') as tar:
        for name, text, mode in (('Makefile', MAKEFILE, 0o644),
                                 ('scripts/kconfig/merge_config.sh', MERGE,
                                  0o755)):
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


