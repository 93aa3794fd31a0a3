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

"""kexec on a real QEMU node: the agent cleaning left up boots the run's
kernel arguments (``isolcpus``, a boot-time tunable) without firmware or
iPXE, and the tunable is read back in the new kernel.

On a node of two vCPUs (the runtime lab), CPU 1 isolated.  "No firmware"
is what the host saw: no new start of the domain's QEMU process (a power
action through the BMC) between cleaning and the workload's start, while
the serial console shows a second Linux boot (the kexec).

The job's image is also image fidelity's case f with ``USER app:app``
(:mod:`bmc_lab.fidelity`): its process view in the new kernel, probed
after the job's own lines, is Docker's (that group, no supplementary
groups), the intended differences applied.
"""

import json

import pytest

from bmc_common import protocol
from bmc_lab import container_job
from bmc_lab.fidelity import images as fidelity_images
from bmc_lab.fidelity import views as fidelity
from bmc_lab import warm_run
from bmc_lab.tests.e2e import test_warm

CMDLINE_JOB = b"""#!/bin/sh
cat /proc/cmdline
cat /sys/devices/system/cpu/isolated
bmc-probe
"""
#: Case f's USER app:app, with the job.
JOB = fidelity_images.combine(
    'kexec_cmdline', fidelity_images.NAMED_USER_GROUP,
    fidelity_images.Case('cmdline', 'the job', files=(
        fidelity_images.E('cmdline.sh', data=CMDLINE_JOB, mode=0o755),)),
    user='app:app', cmd=('/cmdline.sh',))


@pytest.fixture(scope='module')
def lab(lab_pool):
    """The runtime lab: nodes of two vCPUs (CPU 1 to isolate)."""
    return lab_pool.get('runtime')


@pytest.fixture(scope='module')
def kexec_run(lab):
    image = fidelity_images.push(lab, JOB, repo='bmc/kexec-cmdline')
    with warm_run.warm_node(lab):
        warm_run.clean(lab)
        before = {'starts': test_warm._starts(lab),
                  'console_boots': test_warm._console_boots(lab)}
        container_job.deploy(lab, image, mode=protocol.MODE_JOB, extra={
            protocol.II_TUNABLES: json.dumps({'isolcpus': '1'})})
        report = container_job.wait_report(lab, timeout=300)
        after = {'starts': test_warm._starts(lab),
                 'console_boots': test_warm._console_boots(lab)}
        print(container_job.format_report(report))
    return {'report': report, 'before': before, 'after': after}


def test_kexec_boots_the_run_kernel_args_without_firmware(kexec_run):
    report = kexec_run['report']
    assert report['state'] == 'finished', report
    assert report['workload_exit_code'] == 0, report['output_tail']
    assert report['warm'] is False
    assert report['kexec']['method'] == 'kexec_file_load', report
    assert 'kernel_args' in report['cold_reason']
    names = [s['name'] for s in report['stages']]
    assert protocol.STAGE_KEXEC in names
    assert protocol.STAGE_POWER_ON not in names
    # The boot section: the new kernel's boot, from the kexec.
    assert report['boot']['via'] == 'kexec', report['boot']
    assert report['boot']['phases']['kexec_s'] is not None
    # The host: no QEMU start; the console: one more Linux boot.
    before, after = kexec_run['before'], kexec_run['after']
    assert after['starts'] == before['starts'], (before, after)
    assert after['console_boots'] == before['console_boots'] + 1


def test_isolcpus_is_read_back_in_the_new_kernel(kexec_run):
    report = kexec_run['report']
    assert report['kernel_args'] == ['isolcpus=1']
    assert report['tunables']['isolcpus']['ok'], report['tunables']
    lines = report['output_tail'].splitlines()
    assert 'isolcpus=1' in lines[0].split(), lines
    assert lines[1] == '1', lines


def test_process_view_of_a_user_and_group_as_under_docker(kexec_run):
    report = kexec_run['report']
    mismatches, fields, _node = fidelity.check(JOB, report['output_tail'])
    assert not mismatches, fidelity.format_mismatches(JOB, mismatches)
    assert (fields['uid'], fields['gid'], fields['groups']) == (
        '1000', '1000', ''), fields
