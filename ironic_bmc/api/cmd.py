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

"""``ironic-bmc-api``: serve the container runs API.

Runs on the conductor host, with the conductor's configuration (it reads
``[container]report_dir``, ``[container_api]``, ``[keystone_authtoken]``
and ``[oslo_policy]``)::

    ironic-bmc-api --config-file /etc/ironic/ironic.conf

The same application is ``ironic_bmc.api.wsgi:application`` for a WSGI
server of the operator's choice.
"""

import signal
import sys

from cheroot import wsgi
from oslo_config import cfg
from oslo_log import log

from ironic_bmc.api import app
from ironic_bmc import conf  # noqa: F401  (registers [container_api])

LOG = log.getLogger(__name__)
CONF = cfg.CONF


def prepare(argv=None):
    """Parse the command line and configuration; set up logging."""
    log.register_options(CONF)
    CONF(argv if argv is not None else sys.argv[1:], project='ironic')
    log.setup(CONF, 'ironic-bmc-api')
    return app.setup_app()


def main(argv=None):
    application = prepare(argv)
    server = wsgi.Server((CONF.container_api.host_ip,
                          CONF.container_api.port), application,
                         numthreads=CONF.container_api.workers,
                         server_name='ironic-bmc-api')

    def terminate(signum, frame):
        # Unwind the server's loop in this (the main) thread: stopping it
        # from here would wait for that very loop.
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, terminate)
    LOG.info('Container runs API on %s:%s (auth: %s)',
             CONF.container_api.host_ip, CONF.container_api.port,
             CONF.container_api.auth_strategy)
    try:
        server.safe_start()
    except (KeyboardInterrupt, SystemExit):
        LOG.info('Container runs API stopping')
    finally:
        server.stop()
    return 0
