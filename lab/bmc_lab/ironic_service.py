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

"""The lab's Ironic: its processes, their database and command lines.

One ``ironic`` process, or (``scaled`` profile) ``ironic-api`` and one or
more conductors on MariaDB: their configuration written and database
created before they start, their environment, stopping (or crashing)
and restarting them, and running them for a while with options laid
over their configuration.
"""

import contextlib
import os

from bmc_lab import inifile
from bmc_lab import ironic_conf
from bmc_lab import procs
from bmc_lab import programs
from bmc_lab import settings as lab_settings


def _prepare_database(settings, conf):
    if settings.profile == lab_settings.PROFILE_SCALED:
        import pymysql
        try:
            conn = pymysql.connect(host='127.0.0.1', user='root', port=3306)
        except pymysql.MySQLError as exc:
            raise procs.LabError('cannot reach MariaDB at 127.0.0.1:3306 '
                                 'for the scaled profile: %s' % exc)
        with conn:
            with conn.cursor() as cur:
                cur.execute('CREATE DATABASE IF NOT EXISTS `%s` '
                            'CHARACTER SET utf8' % settings.database_name)
    # "up" always starts from an empty database (sqlite cannot run every
    # migration; create_schema is the documented way for a fresh one).
    procs.run([programs.venv_bin('ironic-dbsync'), '--config-file', conf,
               'create_schema'], 'ironic-dbsync create_schema',
              log_path=settings.log('dbsync.log'))


def drop_database(settings):
    """Drop the scaled profile's database (used by ``down --purge``)."""
    import pymysql
    try:
        conn = pymysql.connect(host='127.0.0.1', user='root', port=3306)
    except pymysql.MySQLError:
        return
    with conn:
        with conn.cursor() as cur:
            cur.execute('DROP DATABASE IF EXISTS `%s`'
                        % settings.database_name)


def _ironic_argv(settings, name):
    """The command line of lab process ``name`` (``ironic``,
    ``ironic-api`` or a conductor)."""
    binary = ('ironic-conductor' if name.startswith('ironic-conductor')
              else name)
    argv = [programs.venv_bin(binary),
            '--config-file', settings.path('etc', 'ironic.conf')]
    if name.startswith('ironic-conductor-'):
        argv += ['--config-file', settings.path('etc', name + '.conf')]
    # Last, so that its options win: see ironic_overridden().
    override = settings.path('etc', OVERRIDE_CONF)
    if os.path.exists(override):
        argv += ['--config-file', override]
    return argv


#: Options laid over every Ironic process's configuration for a while
#: (ironic_overridden).
OVERRIDE_CONF = 'ironic-override.conf'


@contextlib.contextmanager
def ironic_overridden(settings, options):
    """Run the lab's Ironic with ``options`` ({section: {key: value}})
    laid over its configuration, then as before.

    For what Ironic reads only when it starts (such as
    ``[conductor]deploy_callback_timeout``): the processes restart on
    entry and on exit, on the same database.
    """
    path = settings.path('etc', OVERRIDE_CONF)
    inifile.write_file(path, inifile.ini_text(
        {section: {k: str(v) for k, v in values.items()}
         for section, values in options.items()},
        '# Laid over ironic.conf for a while (bmc_lab.ironic_service.'
        'ironic_overridden).\n'))
    try:
        restart_ironic(settings)
        yield
    finally:
        os.unlink(path)
        restart_ironic(settings)


def _start_ironic_process(settings, name):
    proc = procs.spawn(settings, name, _ironic_argv(settings, name),
                       env=ironic_env(settings))
    # The APIs answer once they are up.
    port = (settings.ports.runs_api if name == RUNS_API
            else settings.ports.ironic_api
            if name in ('ironic', 'ironic-api') else None)
    if port:
        procs.wait_for_port(port, name, settings.log(name + '.log'),
                            proc=proc, timeout=120)
    return proc


def start_ironic(settings, hardware_types=None, deploy_interfaces=None):
    names = ironic_processes(settings)
    if all(procs.running(settings, n) for n in names):
        return
    for d in ('ironic', 'ironic/locks', 'ironic/images', 'tftpboot',
              'tftpboot/master_images', 'httpboot', 'images'):
        os.makedirs(settings.path(d), exist_ok=True)
    conf = settings.path('etc', 'ironic.conf')
    inifile.write_file(conf, ironic_conf.render(settings, hardware_types,
                                                deploy_interfaces))
    for index in range(1, settings.conductors):
        inifile.write_file(
            settings.path('etc', settings.conductor_process(index) + '.conf'),
            ironic_conf.render_conductor(settings, index))
    _prepare_database(settings, conf)
    return [_start_ironic_process(settings, name) for name in names
            if not procs.running(settings, name)]


def restart_ironic(settings, crash=False, names=None):
    """Stop the lab's Ironic processes (SIGKILL with ``crash``) and start
    them again on the same database and configuration.

    ``names``: only these processes (e.g. one conductor of several).
    """
    names = names or ironic_processes(settings)
    stop_ironic(settings, crash=crash, names=names)
    for name in names:
        _start_ironic_process(settings, name)


def stop_ironic(settings, crash=False, names=None):
    """Stop (SIGKILL with ``crash``) some or all Ironic processes."""
    for name in names or ironic_processes(settings):
        if crash:
            procs.crash(settings, name)
        else:
            procs.stop(settings, name)


def start_ironic_processes(settings, names):
    """Start stopped Ironic processes again, configuration unchanged."""
    for name in names:
        if not procs.running(settings, name):
            _start_ironic_process(settings, name)


def ironic_env(settings):
    """Environment of the lab's Ironic processes.

    Ironic hands the nodes URLs under ``[deploy]http_url`` (the host as the
    nodes see it, 10.0.2.100) and checks some of them itself first, e.g.
    the image URL of a ``direct`` deploy.  The host never sends to that
    address (tools/host-setup.sh blackholes it); instead Ironic's HTTP
    client is pointed at the lab's nginx as its proxy, which serves the
    same ``http_root`` the nodes reach through their ``guestfwd``.  Local
    services (API, registry, agents' forwarded ports) are reached directly.
    """
    proxy = 'http://127.0.0.1:%d' % settings.ports.http
    local = '127.0.0.1,localhost,::1'
    return {'http_proxy': proxy, 'HTTP_PROXY': proxy,
            'https_proxy': '', 'HTTPS_PROXY': '',
            'no_proxy': local, 'NO_PROXY': local}


#: The container runs API (ironic_bmc.api), on Ironic's configuration:
#: the tenants' read API in the cloud profile, the operator's (noauth)
#: in the others.
RUNS_API = 'ironic-bmc-api'


def ironic_processes(settings):
    if settings.profile == lab_settings.PROFILE_SCALED:
        return ('ironic-api',) + tuple(settings.conductor_process(
            i) for i in range(settings.conductors)) + (RUNS_API,)
    return ('ironic', RUNS_API)
