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

"""gunicorn entry points of the cloud's API services.

``gunicorn bmc_lab.cloud.wsgi:keystone`` (with this package on gunicorn's
``--pythonpath``) serves Keystone, and likewise ``glance``, ``placement``,
``nova`` and ``neutron``.  Each service reads its configuration from the
directory named by its ``OS_<SERVICE>_CONFIG_DIR``.

The services' own WSGI modules parse ``sys.argv`` with oslo.config when
imported.  Under gunicorn that is gunicorn's command line, which they
reject (``unrecognized arguments: --bind``): the workers crash-loop while
the master keeps accepting connections.  So ``sys.argv`` is reset before
the service's module is imported.

This module runs inside the cloud virtualenv: standard library only.
"""

import importlib
import sys

#: Entry point -> "module:attribute" of the service's WSGI application.
APPLICATIONS = {
    'keystone': 'keystone.wsgi.api:application',
    'glance': 'glance.wsgi.api:application',
    'placement': 'placement.wsgi.api:application',
    'nova': 'nova.wsgi.osapi_compute:application',
    'neutron': 'neutron.wsgi.api:application',
}


def load(name):
    """Import and return the WSGI application of service ``name``."""
    module, _, attribute = APPLICATIONS[name].partition(':')
    sys.argv = sys.argv[:1]
    return getattr(importlib.import_module(module), attribute)


def __getattr__(name):
    # gunicorn resolves "bmc_lab.cloud.wsgi:keystone" with getattr().
    if name not in APPLICATIONS:
        raise AttributeError(name)
    application = load(name)
    globals()[name] = application
    return application
