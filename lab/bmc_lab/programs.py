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

"""The programs and packages the lab's services run from.

An executable of the lab's virtualenv (next to the running Python, else
on PATH) or of a Debian package (on PATH, /usr/sbin or /usr/bin), found
or named in an error that says what to install; and the Python packages
that compile against host libraries, checked before a lab starts.
"""

import importlib.util
import os
import shutil
import sys

from bmc_lab import procs


def venv_bin(name):
    """An executable installed next to the running Python, else on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(local):
        return local
    found = shutil.which(name)
    if not found:
        raise procs.LabError('%s is not installed (looked next to %s and '
                             'on PATH)' % (name, sys.executable))
    return found


# Python packages the lab needs that compile against host libraries: not
# dependencies of the lab's distribution (pip would have to build them
# before the host set-up ran), see lab/requirements-host.txt.
HOST_BUILT = (('libvirt', 'libvirt-python'), ('virtualbmc', 'virtualbmc'))


def check_host_built():
    missing = [dist for module, dist in HOST_BUILT
               if importlib.util.find_spec(module) is None]
    if missing:
        raise procs.LabError(
            '%s not installed for %s: they compile against host '
            'libraries. Run tools/host-setup.sh, then pip install -r '
            'lab/requirements-host.txt (the lab\'s tox environments do '
            'both).' % (' and '.join(missing), sys.executable))


def system_bin(name, package):
    found = shutil.which(name) or next(
        (p for p in ('/usr/sbin/' + name, '/usr/bin/' + name)
         if os.path.exists(p)), None)
    if not found:
        raise procs.LabError('%s is not installed; install the Debian '
                             'package %s (tools/host-setup.sh does)'
                             % (name, package))
    return found
