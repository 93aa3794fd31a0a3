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

"""Per-run kernel tunables: the knob schema and the named profiles.

Standard library only: imported by the conductor (validation at API time,
kernel arguments for the boot) and by the agent ramdisk (apply and verify).
"""

from bmc_common.tunables.schema import is_runtime  # noqa: F401
from bmc_common.tunables.schema import split  # noqa: F401
from bmc_common.tunables.schema import TunableError  # noqa: F401
from bmc_common.tunables.schema import validate  # noqa: F401
