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

"""tempest against the cloud profile: the project's plugin, for real.

``run()`` runs the tests of tempest_plugin/ (ironic_bmc_tempest_plugin: API
tests of validation, Glance properties and deploy templates, and a
scenario where a tenant boots a container image through Nova) with
``tempest run`` against the lab's Keystone, Glance, Nova, Neutron and
Ironic.  tempest and ironic-tempest-plugin live in a virtualenv of their
own (bmc_lab.cloud.venv, set "tempest"); the plugin is installed into it
from this checkout at every run, so the run tests the checkout.  Dynamic
credentials: tempest makes its own projects and users with the admin's
password and removes them after.

The workspace (tempest.conf, logs, the stestr repository) is
``<state dir>/tempest``.
"""

import os
import re
import subprocess

from bmc_lab.cloud import layout
from bmc_lab.cloud import profile as cloud_profile
from bmc_lab.cloud import register
from bmc_lab.cloud import venv
from bmc_lab import inifile
from bmc_lab import procs

#: The plugin's source: tempest_plugin/ of this checkout.
PLUGIN_DIR = os.path.join(os.path.dirname(venv.LAB_DIR), 'tempest_plugin')
WORKSPACE = 'tempest'
#: Every test of the plugin (its test ids start with the package).
DEFAULT_REGEX = r'^ironic_bmc_tempest_plugin\.'
RUN_TIMEOUT = 3600
_TOTALS = re.compile(r'^ - (Passed|Skipped|Failed|Unexpected Success|'
                     r'Expected Fail): (\d+)', re.M)


def ensure(out=print):
    """The ``tempest`` executable of the tempest virtualenv, with this
    checkout's plugin installed."""
    python = venv.ensure(name='tempest', out=out)
    # (pbr: no AUTHORS or ChangeLog written into the checkout)
    env = dict(venv.pip_env(), SKIP_GENERATE_AUTHORS='1',
               SKIP_WRITE_GIT_CHANGELOG='1')
    res = subprocess.run(
        [python, '-m', 'pip', 'install', '--quiet', '--no-deps',
         '--no-build-isolation', PLUGIN_DIR],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=600)
    if res.returncode:
        raise procs.LabError('installing the tempest plugin from %s failed:'
                             '\n%s' % (PLUGIN_DIR, res.stdout[-3000:]))
    return os.path.join(os.path.dirname(python), 'tempest')


def conf(cloud, container_image=None):
    """tempest.conf of the cloud ({section: {option: value}})."""
    return {
        'DEFAULT': {'log_file': 'tempest.log', 'debug': 'true'},
        'auth': {
            'use_dynamic_credentials': 'true',
            'admin_username': 'admin',
            'admin_password': cloud.password,
            'admin_project_name': 'admin',
            'admin_domain_name': 'Default',
            # The lab's network is shared and wires nothing: none per
            # test project.
            'create_isolated_networks': 'false',
        },
        'identity': {
            'uri_v3': cloud.keystone_url,
            'auth_version': 'v3',
            'region': layout.REGION,
        },
        'identity-feature-enabled': {'api_v2': 'false'},
        'service_available': {
            'ironic': 'true', 'nova': 'true', 'glance': 'true',
            'neutron': 'true', 'cinder': 'false', 'swift': 'false',
            'horizon': 'false',
        },
        # Ironic's operator API asks for system scope (as in the lab).
        'enforce_scope': {'ironic': 'true'},
        'baremetal': {
            # ironic-tempest-plugin's base class runs only with a fake
            # driver configured; our tests enroll [baremetal_container]
            # driver nodes.
            'driver': 'fake-hardware',
        },
        'baremetal_container': {
            'enabled': 'true',
            'driver': 'container-ipmi',
            'container_image': container_image or '',
            'flavor': register.FLAVOR,
            'network': register.NETWORK,
        },
        'validation': {'run_validation': 'false'},
    }


def workspace(settings, cloud, tempest, container_image=None):
    """The workspace directory, made with ``tempest init`` once;
    tempest.conf written afresh."""
    path = settings.path(WORKSPACE)
    if not os.path.exists(os.path.join(path, '.stestr.conf')):
        # Its own registry file: nothing is written to ~/.tempest.
        procs.run([tempest, 'init', '--workspace-path',
                   settings.path('tempest-workspaces.yaml'), path],
                  'tempest init')
    text = inifile.ini_text(conf(cloud, container_image),
                            '# Written by bmc_lab.cloud.tempest_run.\n')
    with open(os.path.join(path, 'etc', 'tempest.conf'), 'w') as f:
        f.write(text)
    return path


def totals(output):
    """{'Passed': n, 'Failed': n, ...} from tempest run's summary."""
    return {k: int(v) for k, v in _TOTALS.findall(output)}


def run(settings, container_image=None, regex=DEFAULT_REGEX,
        out=print):
    """``tempest run --regex REGEX`` against the lab's cloud; returns
    (exit code, totals, path of the full output)."""
    cloud = cloud_profile.loaded(settings)
    tempest = ensure(out=out)
    path = workspace(settings, cloud, tempest, container_image)
    log = os.path.join(path, 'tempest-run.out')
    out('tempest run --regex %s (workspace %s)' % (regex, path))
    with open(log, 'w') as f:
        try:
            code = subprocess.run(
                [tempest, 'run', '--regex', regex, '--concurrency', '1'],
                cwd=path, stdout=f, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, timeout=RUN_TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            code = 'timeout after %ds' % RUN_TIMEOUT
    with open(log) as f:
        output = f.read()
    return code, totals(output), log
