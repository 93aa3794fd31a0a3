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

"""Horizon in front of the lab's cloud, for tenants.

From its own virtualenv (bmc_lab.cloud.venv, set "horizon"), nothing
written into it: Horizon's settings import ``local.local_settings`` from
``sys.path``, so ``etc/horizon/local/local_settings.py`` of the state
directory, first on PYTHONPATH, is what it reads; the secret key is set
there (Horizon would otherwise write one into its package), static files
are collected and compressed into ``cloud/horizon/static``.  Served by
Django's ``runserver --insecure`` (which also serves the static files)
on 127.0.0.1 only; signed-cookie sessions, no memcached.

The project's Horizon plugin (dashboard/, installed editable into the
virtualenv, see venv.EDITABLE) is enabled as an operator enables it, by
its enabled file, copied into ``etc/horizon/enabled`` of the state
directory rather than into the virtualenv's
``openstack_dashboard/local/enabled``: Horizon finds enabled files with
``pkgutil.iter_modules`` over that package's ``__path__``, which
local_settings.py extends with the state directory's copy.
"""

import glob
import os
import secrets
import shutil

from bmc_lab.cloud import venv
from bmc_lab import procs

NAME = 'horizon'
SETTINGS_MODULE = 'openstack_dashboard.settings'
_LOCAL = '127.0.0.1,localhost,::1'

LOCAL_SETTINGS = '''\
# Written by bmc-lab for the cloud profile; rewritten by every start.
DEBUG = False
ALLOWED_HOSTS = ['127.0.0.1', 'localhost']
SECRET_KEY = %(secret)r
LOCAL_PATH = %(local_path)r
STATIC_ROOT = %(static_root)r
COMPRESS_OFFLINE = True
SESSION_ENGINE = 'django.contrib.sessions.backends.signed_cookies'
CACHES = {'default': {
    'BACKEND': 'django.core.cache.backends.locmem.LocMemCache'}}
OPENSTACK_HOST = '127.0.0.1'
OPENSTACK_KEYSTONE_URL = %(keystone)r
OPENSTACK_KEYSTONE_DEFAULT_ROLE = 'member'
OPENSTACK_ENDPOINT_TYPE = 'publicURL'
# Bare metal has no volumes here: boot from the image itself.
LAUNCH_INSTANCE_DEFAULTS = {'create_volume': False}
# The cloud's Neutron is ML2 with one flat shared network, no routers.
OPENSTACK_NEUTRON_NETWORK = {
    'enable_router': False,
    'enable_quotas': False,
    'enable_ipv6': False,
    'enable_distributed_router': False,
    'enable_ha_router': False,
    'enable_fip_topology_check': False,
}
# Ironic's operator pages want a system-scoped token.
SYSTEM_SCOPE_SERVICES = ['baremetal']
# The Horizon plugin's enabled file, copied here by the lab (an operator
# copies it into openstack_dashboard/local/enabled/): Horizon reads the
# enabled files of that package's __path__ (settings.py imported it).
import openstack_dashboard.local.enabled as _local_enabled
_local_enabled.__path__.append(%(enabled)r)
LOGGING = {
    'version': 1,
    'disable_existing_loggers': False,
    'handlers': {'console': {'class': 'logging.StreamHandler'}},
    'root': {'handlers': ['console'], 'level': 'WARNING'},
}
'''


#: The Horizon plugin's enabled files, in this checkout.
ENABLED_SOURCE = os.path.join(venv.REPO_DIR, 'dashboard',
                              'ironic_bmc_dashboard', 'enabled')


def url(cloud):
    return 'http://127.0.0.1:%d' % cloud.ports.horizon


def _env(cloud, python):
    return {
        'DJANGO_SETTINGS_MODULE': SETTINGS_MODULE,
        'PYTHONPATH': cloud.etc(NAME),
        'no_proxy': _LOCAL, 'NO_PROXY': _LOCAL,
        'PATH': '%s:%s' % (os.path.dirname(python),
                           os.environ.get('PATH', '/usr/bin:/bin')),
    }


def copy_enabled(cloud):
    """The plugin's enabled files into ``etc/horizon/enabled``; returns
    that directory."""
    enabled = cloud.etc(NAME, 'enabled')
    os.makedirs(enabled, exist_ok=True)
    for old in glob.glob(os.path.join(enabled, '_[0-9]*.py')):
        os.unlink(old)
    found = sorted(glob.glob(os.path.join(ENABLED_SOURCE, '_[0-9]*.py')))
    if not found:
        raise procs.LabError('no enabled file in %s: the cloud profile '
                             'runs from a source checkout' % ENABLED_SOURCE)
    for path in found:
        shutil.copy(path, enabled)
    return enabled


def write_settings(cloud):
    """``etc/horizon/local/local_settings.py`` and the plugin's enabled
    files; returns the settings' path."""
    local = cloud.etc(NAME, 'local')
    os.makedirs(local, exist_ok=True)
    enabled = copy_enabled(cloud)
    static = cloud.data(NAME, 'static')
    os.makedirs(static, exist_ok=True)
    with open(os.path.join(local, '__init__.py'), 'w'):
        pass
    path = os.path.join(local, 'local_settings.py')
    with open(path, 'w') as f:
        f.write(LOCAL_SETTINGS % {
            'secret': secrets.token_urlsafe(32),
            'local_path': cloud.etc(NAME),
            'static_root': static,
            'keystone': cloud.keystone_url,
            'enabled': enabled,
        })
    return path


def prepare(cloud, python):
    """Write local_settings.py; collect and compress the static files."""
    write_settings(cloud)
    admin = os.path.join(os.path.dirname(python), 'django-admin')
    for argv in ([admin, 'collectstatic', '--noinput', '-v', '0'],
                 [admin, 'compress', '--force', '-v', '0']):
        procs.run(argv, 'horizon: django-admin %s' % argv[1],
                  log_path=cloud.log('horizon-manage.log'),
                  env=_env(cloud, python), timeout=600)


def start(cloud, python=None, out=None, timeout=120):
    """Build the virtualenv if needed, prepare and start Horizon; return
    once its login page answers."""
    python = python or venv.ensure(out=out, name=NAME)
    prepare(cloud, python)
    admin = os.path.join(os.path.dirname(python), 'django-admin')
    proc = procs.spawn(cloud, NAME, [
        admin, 'runserver', '--insecure', '--noreload',
        '127.0.0.1:%d' % cloud.ports.horizon], env=_env(cloud, python))
    procs.wait_for_port(cloud.ports.horizon, NAME, cloud.log(NAME + '.log'),
                        proc=proc, timeout=timeout)
    return proc


def stop(cloud):
    return procs.stop(cloud, NAME)
