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

"""The ``openstack`` CLI on the lab, with the project's plugin.

``<state dir>/clouds.yaml`` names the lab's identities: in the embedded
and scaled profiles one, ``bmc-lab``, without authentication (as the
lab's Ironic and its container runs API); in the cloud profile the
Keystone users (bmc_lab.cloud.profile.write_clouds_yaml)::

    OS_CLIENT_CONFIG_FILE=/var/lib/bmc-lab/clouds.yaml \\
        openstack --os-cloud bmc-lab baremetal container show node-0
"""

import os
import subprocess

import yaml

from bmc_lab.cloud import profile as cloud_profile
from bmc_lab import programs

#: The identity of the embedded and scaled profiles.
NOAUTH_CLOUD = 'bmc-lab'


def write_clouds_yaml(settings):
    """Write the lab's clouds.yaml; return its path."""
    if settings.is_cloud:
        return cloud_profile.write_clouds_yaml(settings)
    data = {'clouds': {NOAUTH_CLOUD: {
        'auth_type': 'none',
        'baremetal_endpoint_override': settings.api_url,
        'baremetal_container_endpoint_override': settings.runs_api_url,
        'baremetal_api_version': '1.81',
    }}}
    path = os.path.join(settings.state_dir, cloud_profile.CLOUDS_YAML)
    with open(path, 'w') as f:
        f.write('# Written by bmc-lab up (profile %s).\n' % settings.profile)
        yaml.safe_dump(data, f, default_flow_style=False)
    return path


def openstack(settings, *args, cloud=NOAUTH_CLOUD, capture=False,
              timeout=3600):
    """``openstack --os-cloud CLOUD ARGS`` on the lab.

    :param capture: return (exit status, stdout, stderr) instead of
        letting the command print, and return its exit status.
    """
    env = dict(os.environ, OS_CLIENT_CONFIG_FILE=os.path.join(
        settings.state_dir, cloud_profile.CLOUDS_YAML))
    argv = [programs.venv_bin('openstack'), '--os-cloud', cloud] + list(args)
    if not capture:
        return subprocess.run(argv, env=env, timeout=timeout).returncode
    proc = subprocess.run(argv, env=env, timeout=timeout,
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr
