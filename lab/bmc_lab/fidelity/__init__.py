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

"""Image fidelity: does an image run on the node as under ``docker run``?

A differential test harness of the container's process view:

* :mod:`.images`: the case images (a Postgres-like entrypoint that
  switches user, a daemon's /var/run directory, a WORKDIR under /tmp, a
  hostname lookup, numeric and named users), built in Python;
* :mod:`.probe`: the script that prints what a process of the container
  sees, field by field, and its parser;
* :mod:`.views`: Docker's view of each case (its documented behaviour),
  the intended differences of the bare-metal container, the comparison;
* :mod:`.spec_diff`: the project's runtime spec of a case against the
  one ``umoci unpack`` writes by the image spec's conversion rules.

The unit tier runs the spec-level differential of every case
(``lab/bmc_lab/tests/unit/test_fidelity.py``); the e2e tier probes the
cases on a QEMU node inside boots it makes anyway
(``test_container_runtime.py``, ``test_kexec.py``).
"""
