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

"""What the nodes and the conductor fetch from: nginx, the registry, NFS.

nginx serves Ironic's ``[deploy]http_root`` (boot files, rootfs
artifacts, the nodes' call-backs), the docker registry the OCI images,
nfs-ganesha the ``nfs`` rootfs mode's exports (which the conductor
writes).  Each ``start_*`` writes the server's configuration under
``etc/``, starts it and waits for its port; a running one is left alone.
"""

import os

from bmc_lab import inifile
from bmc_lab import ironic_conf
from bmc_lab import procs
from bmc_lab import programs

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
    inifile.write_file(conf, NGINX_CONF.format(
        run=settings.path('run'), logs=settings.log_dir,
        port=settings.ports.http, root=settings.http_root,
        artifact_location=artifact_location))
    os.makedirs(settings.http_root, exist_ok=True)
    proc = procs.spawn(settings, 'nginx',
                       [programs.system_bin('nginx', 'nginx-light'),
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
    inifile.write_file(conf, REGISTRY_CONF.format(
        root=settings.path('registry'), port=settings.ports.registry))
    proc = procs.spawn(settings, 'registry',
                       [programs.system_bin('docker-registry',
                                            'docker-registry'),
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
        inifile.write_file(exports, '')
    recovery = settings.path('nfs', 'recovery')
    os.makedirs(recovery, exist_ok=True)
    conf = settings.path('etc', 'ganesha.conf')
    inifile.write_file(conf, GANESHA_CONF.format(
        port=settings.ports.nfs, recovery=recovery, exports=exports))
    proc = procs.spawn(settings, 'nfs-ganesha', [
        programs.system_bin('ganesha.nfsd', 'nfs-ganesha'), '-F', '-f', conf,
        '-L', settings.log('ganesha.log'),
        '-p', ironic_conf.nfs_pid_file(settings), '-N', 'NIV_EVENT'])
    procs.wait_for_port(settings.ports.nfs, 'nfs-ganesha',
                        settings.log('ganesha.log'), proc=proc)
