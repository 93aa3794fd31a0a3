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

"""The filesystem tools an artifact format needs on the conductor host.

Tests that build a real erofs or squashfs image skip, naming the Debian
package, where the tools are missing (a machine on which
tools/host-setup.sh never ran); the quick start's ``tox -e demo`` installs
them before ``tox`` runs these tests.
"""

import shutil

import pytest

TOOLS = {
    'erofs': ('erofs-utils', ('mkfs.erofs', 'fsck.erofs')),
    'squashfs': ('squashfs-tools', ('mksquashfs', 'unsquashfs')),
    'verity': ('cryptsetup-bin', ('veritysetup',)),
}


def require(*formats):
    for fmt in formats:
        package, tools = TOOLS[fmt]
        missing = [t for t in tools if shutil.which(t) is None]
        if missing:
            pytest.skip('needs %s (Debian package %s; tools/host-setup.sh '
                        'installs it)' % (', '.join(missing), package))
