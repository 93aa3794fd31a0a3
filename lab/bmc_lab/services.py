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

"""The lab's services: libvirt, virtual BMCs, nginx, registry and Ironic.

Each ``start_*`` is idempotent (a running service is left alone) and
fails with a message that names the log to read.  Every process is
started in its own session and recorded under ``run/`` so ``stop_all``
leaves nothing behind.
"""

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time

from bmc_lab import inifile
from bmc_lab import ironic_conf
from bmc_lab import procs
from bmc_lab import settings as lab_settings

LIBVIRT_URI = 'qemu:///system'
LIBVIRT_SOCKET = '/run/libvirt/libvirt-sock'
QEMU_CONF = '/etc/libvirt/qemu.conf'

#: Lab processes in start order; stopped in reverse.
ORDER = ('virtlogd', 'libvirtd', 'nginx', 'registry', 'nfs-ganesha',
         'ironic', 'ironic-api', 'ironic-conductor')
#: libvirtd and virtlogd serve every lab on the host (labs run side by
#: side, e.g. one per test worker): a lab that finds none running starts
#: them here, not in its own state directory, and the last lab to go down
#: (no libvirt domain left) stops them.
HOST_STATE_DIR = os.environ.get('BMC_LAB_HOST_DIR', '/var/lib/bmc-lab-host')
HOST_PROCESSES = ('virtlogd', 'libvirtd')


def venv_bin(name):
    """An executable installed next to the running Python, else on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(local):
        return local
    found = shutil.which(name)
    if not found:
        raise procs.LabError('%s is not installed (looked next to %s and '
                             'on PATH)' % (name, sys.executable))
    return found


# Python packages the lab needs that compile against host libraries: not
# dependencies of the lab's distribution (pip would have to build them
# before the host set-up ran), see lab/requirements-host.txt.
HOST_BUILT = (('libvirt', 'libvirt-python'), ('virtualbmc', 'virtualbmc'))


def check_host_built():
    missing = [dist for module, dist in HOST_BUILT
               if importlib.util.find_spec(module) is None]
    if missing:
        raise procs.LabError(
            '%s not installed for %s: they compile against host '
            'libraries. Run tools/host-setup.sh, then pip install -r '
            'lab/requirements-host.txt (the lab\'s tox environments do '
            'both).' % (' and '.join(missing), sys.executable))


def system_bin(name, package):
    found = shutil.which(name) or next(
        (p for p in ('/usr/sbin/' + name, '/usr/bin/' + name)
         if os.path.exists(p)), None)
    if not found:
        raise procs.LabError('%s is not installed; install the Debian '
                             'package %s (tools/host-setup.sh does)'
                             % (name, package))
    return found


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


# --- libvirt -----------------------------------------------------------------

def libvirt_reachable():
    try:
        res = subprocess.run(['virsh', '-c', LIBVIRT_URI, 'uri'],
                             capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def _check_qemu_conf():
    try:
        with open(QEMU_CONF) as f:
            text = f.read()
    except FileNotFoundError:
        raise procs.LabError('%s is missing: install libvirt-daemon-system '
                             '(tools/host-setup.sh does)' % QEMU_CONF)
    lines = [ln.strip().replace(' ', '') for ln in text.splitlines()]
    wanted = {'user="root"': 'for QEMU to read the lab state directory',
              'group="root"': 'for QEMU to read the lab state directory',
              'seccomp_sandbox=0': 'for QEMU to forward node connections '
                                   'to the host through socat'}
    for setting, why in wanted.items():
        if setting not in lines:
            raise procs.LabError('%s must set %s %s; run '
                                 'tools/host-setup.sh' % (QEMU_CONF,
                                                          setting, why))


def host_settings():
    """Where the host-wide libvirtd and virtlogd keep pid files and logs."""
    return lab_settings.Settings(state_dir=HOST_STATE_DIR,
                                 name='bmc-lab-host')


@contextlib.contextmanager
def _host_lock():
    host = host_settings()
    with procs.file_lock(host.path('.lock')):
        yield host


def libvirt_domains():
    """Names of every libvirt domain on the host, or None when libvirtd
    does not answer."""
    try:
        res = subprocess.run(['virsh', '-c', LIBVIRT_URI, 'list', '--all',
                              '--name'], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.split() if res.returncode == 0 else None


@contextlib.contextmanager
def libvirt_held():
    """Use a running libvirtd, or start virtlogd + libvirtd for all labs;
    no lab stops them before the block ends.

    Labs share them (see ``HOST_STATE_DIR``; their logs go to its
    ``logs/``): a lab defines its domains inside the block, so that a lab
    going down at the same time, finding no domain, does not stop
    libvirtd under it (:func:`stop_libvirt_if_unused`).
    """
    _check_qemu_conf()
    with _host_lock() as host:
        if not libvirt_reachable():
            _start_libvirt(host)
        yield


def _start_libvirt(settings):
    conf = settings.path('etc', 'libvirtd.conf')
    _write(conf, 'log_outputs = "3:file:%s"\n'
           % settings.log('libvirtd-debug.log'))
    if not procs.running(settings, 'virtlogd'):
        # virtlogd writes the nodes' serial consoles and rotates them at
        # 2 MiB by default, after a few deploys; keep more for debugging
        # (readers follow rotation anyway: bmc_lab.logcursor).
        logd_conf = settings.path('etc', 'virtlogd.conf')
        _write(logd_conf, 'max_size = %d\nmax_backups = 3\n'
               % (64 * 1024 * 1024))
        procs.spawn(settings, 'virtlogd',
                    [system_bin('virtlogd', 'libvirt-daemon'),
                     '--config', logd_conf])
    proc = procs.spawn(settings, 'libvirtd',
                       [system_bin('libvirtd', 'libvirt-daemon'),
                        '--config', conf])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise procs.LabError(
                'libvirtd exited with code %s while starting; see %s'
                % (proc.returncode, settings.log('libvirtd.log')))
        if libvirt_reachable():
            return
        time.sleep(0.5)
    raise procs.LabError('libvirtd did not answer on %s within 30s; see %s'
                         % (LIBVIRT_URI, settings.log('libvirtd.log')))


# --- virtual BMCs (virtualbmc + DCMI) ----------------------------------------

def bmc_name(index):
    return 'bmc-%d' % index


def start_bmc(settings, index, timeout=30):
    """One virtual BMC per node: virtualbmc's, answering DCMI power too."""
    name = bmc_name(index)
    if procs.running(settings, name):
        return
    port = settings.ports.ipmi(index)
    proc = procs.spawn(settings, name, [
        sys.executable, '-m', 'bmc_lab.dcmi_bmc',
        '--domain', settings.node_name(index), '--port', str(port),
        '--address', '127.0.0.1', '--username', 'admin',
        '--password', 'password', '--libvirt-uri', LIBVIRT_URI])
    deadline = time.monotonic() + timeout
    while not procs.udp_port_in_use(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise procs.LabError(
                'the virtual BMC of node %d did not start on UDP '
                '127.0.0.1:%d; see %s' % (index, port,
                                          settings.log(name + '.log')))
        time.sleep(0.2)


def stop_bmc(settings, index):
    return procs.stop(settings, bmc_name(index))


# --- nginx -------------------------------------------------------------------

NGINX_CONF = """\
# Written by bmc-lab.  Serves Ironic's [deploy]http_root to the nodes.
daemon off;
# The state directory may be private to root (e.g. a test's temp dir).
user root root;
worker_processes 1;
pid {run}/nginx.master.pid;
error_log {logs}/nginx-error.log;
events {{ worker_connections 512; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    # Millisecond ends and durations: what [container]boot_http_log reads.
    log_format ironic_bmc '$msec $request_time $status $body_bytes_sent '
                          '"$request" "$http_user_agent"';
    access_log {logs}/nginx-access.log ironic_bmc;
    client_body_temp_path {run}/nginx-body;
    proxy_temp_path {run}/nginx-proxy;
    fastcgi_temp_path {run}/nginx-fastcgi;
    uwsgi_temp_path {run}/nginx-uwsgi;
    scgi_temp_path {run}/nginx-scgi;
    sendfile on;
    tcp_nopush on;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        autoindex off;
        # Nodes report back here (the smoke initrd, agent call-backs).
        # (busybox wget waits forever on a 204, so answer 200.)
        location /callback/ {{
            default_type text/plain;
            return 200 "ok\n";
        }}
{artifact_location}    }}
}}
"""


def start_nginx(settings):
    if procs.running(settings, 'nginx'):
        return
    conf = settings.path('etc', 'nginx.conf')
    artifact_location = ''
    if settings.artifact_rate_limit:
        artifact_location = (
            '        location ~ /rootfs-[^/]+/ {\n'
            '            limit_rate %s;\n'
            '        }\n' % settings.artifact_rate_limit)
    _write(conf, NGINX_CONF.format(run=settings.path('run'),
                                   logs=settings.log_dir,
                                   port=settings.ports.http,
                                   root=settings.http_root,
                                   artifact_location=artifact_location))
    os.makedirs(settings.http_root, exist_ok=True)
    proc = procs.spawn(settings, 'nginx', [system_bin('nginx', 'nginx-light'),
                                           '-c', conf, '-p', settings.path()])
    procs.wait_for_port(settings.ports.http, 'nginx',
                        settings.log('nginx-error.log'), proc=proc)


# --- registry ----------------------------------------------------------------

REGISTRY_CONF = """\
# Written by bmc-lab.
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""


def start_registry(settings):
    if procs.running(settings, 'registry'):
        return
    conf = settings.path('etc', 'registry.yml')
    _write(conf, REGISTRY_CONF.format(root=settings.path('registry'),
                                      port=settings.ports.registry))
    proc = procs.spawn(settings, 'registry',
                       [system_bin('docker-registry', 'docker-registry'),
                        'serve', conf])
    procs.wait_for_port(settings.ports.registry, 'docker-registry',
                        settings.log('registry.log'), proc=proc)


# --- nfs-ganesha (the nfs rootfs mode) ---------------------------------------

GANESHA_CONF = """\
# Written by bmc-lab.  NFSv4 only, on loopback: lab nodes reach it through
# their guestfwd; the exports are written by the conductor.
NFS_CORE_PARAM {{
    NFS_Port = {port};
    Bind_addr = 127.0.0.1;
    Protocols = 4;
    Enable_NLM = false;
    Enable_RQUOTA = false;
}}
NFSV4 {{
    Graceless = true;
    RecoveryRoot = "{recovery}";
}}
NFS_KRB5 {{
    Active_krb5 = false;
}}
%include "{exports}"
"""


def start_nfs(settings):
    if procs.running(settings, 'nfs-ganesha'):
        return
    exports = ironic_conf.nfs_exports_file(settings)
    os.makedirs(os.path.dirname(exports), exist_ok=True)
    if not os.path.exists(exports):
        # Empty until the conductor exports a root.
        _write(exports, '')
    recovery = settings.path('nfs', 'recovery')
    os.makedirs(recovery, exist_ok=True)
    conf = settings.path('etc', 'ganesha.conf')
    _write(conf, GANESHA_CONF.format(port=settings.ports.nfs,
                                     recovery=recovery, exports=exports))
    proc = procs.spawn(settings, 'nfs-ganesha', [
        system_bin('ganesha.nfsd', 'nfs-ganesha'), '-F', '-f', conf,
        '-L', settings.log('ganesha.log'),
        '-p', ironic_conf.nfs_pid_file(settings), '-N', 'NIV_EVENT'])
    procs.wait_for_port(settings.ports.nfs, 'nfs-ganesha',
                        settings.log('ganesha.log'), proc=proc)


# --- ironic ------------------------------------------------------------------

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
    procs.run([venv_bin('ironic-dbsync'), '--config-file', conf,
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
    argv = [venv_bin(binary),
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
    _write(path, inifile.ini_text(
        {section: {k: str(v) for k, v in values.items()}
         for section, values in options.items()},
        '# Laid over ironic.conf for a while (bmc_lab.services.'
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
    # The API answers once it is up.
    if name in ('ironic', 'ironic-api'):
        procs.wait_for_port(settings.ports.ironic_api, name,
                            settings.log(name + '.log'), proc=proc,
                            timeout=120)
    return proc


def start_ironic(settings, hardware_types=None, deploy_interfaces=None):
    names = ironic_processes(settings)
    if all(procs.running(settings, n) for n in names):
        return
    for d in ('ironic', 'ironic/locks', 'ironic/images', 'tftpboot',
              'tftpboot/master_images', 'httpboot', 'images'):
        os.makedirs(settings.path(d), exist_ok=True)
    conf = settings.path('etc', 'ironic.conf')
    _write(conf, ironic_conf.render(settings, hardware_types,
                                    deploy_interfaces))
    for index in range(1, settings.conductors):
        _write(settings.path('etc', settings.conductor_process(index)
                             + '.conf'),
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


def ironic_processes(settings):
    if settings.profile == lab_settings.PROFILE_SCALED:
        return ('ironic-api',) + tuple(settings.conductor_process(i)
                                       for i in range(settings.conductors))
    return ('ironic',)


def stop_libvirt_if_unused():
    """Stop the host's libvirtd and virtlogd when no domain is left.

    Returns the names stopped.  Another lab's nodes keep them running.
    """
    if not any(procs.running(host_settings(), n) for n in HOST_PROCESSES):
        return []
    with _host_lock() as host:
        if libvirt_reachable() and libvirt_domains() != []:
            return []
        return [n for n in reversed(HOST_PROCESSES)
                if procs.stop(host, n)]


def stop_all(settings):
    """Stop every lab process; returns the names that were running.

    The host's libvirtd and virtlogd stop too once no lab has a node.
    """
    stopped = []
    run_dir = settings.path('run')
    pids = [n[:-len('.pid')] for n in (
        os.listdir(run_dir) if os.path.isdir(run_dir) else ())
        if n.endswith('.pid')]
    bmcs = sorted(n for n in pids if n.startswith('bmc-'))
    # Conductors beyond the first (scaled profile).
    conductors = sorted(n for n in pids
                        if n.startswith('ironic-conductor-'))
    # The supervisor first: nothing is started again while the lab stops.
    # (libvirtd and virtlogd are in the lab's own directory only when an
    # older version started them there.)
    for name in ['supervisor'] + bmcs + conductors + list(reversed(ORDER)):
        if procs.stop(settings, name):
            stopped.append(name)
    return stopped + stop_libvirt_if_unused()
