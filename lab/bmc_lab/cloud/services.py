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

"""Bring a cloud up and down: databases, RabbitMQ, service processes.

``up`` starts Keystone, Glance, Placement, nova-api, nova-conductor,
nova-scheduler and the Neutron API (no agents) from the cloud virtualenv,
registers users and endpoints (once Keystone answers), network and flavor
(once the others do) with bmc_lab.cloud.register and, with
``compute=True``, starts nova-compute, which needs the Ironic API up.
Every process is started by bmc_lab.procs: pid files in ``run/``, logs
in ``logs/<name>.log``; every wait is bounded and a failure names the
log to read.  ``down`` stops them all and drops what
the cloud owns on MariaDB and RabbitMQ; configs and logs stay.
"""

import grp
import os
import pwd
import shutil
import time
import urllib.error
import urllib.request

from bmc_lab.cloud import backends
from bmc_lab.cloud import configs
from bmc_lab.cloud import layout
from bmc_lab.cloud import register
from bmc_lab.cloud import venv
from bmc_lab import procs

#: API services: process -> (entry point in bmc_lab.cloud.wsgi, port
#: attribute of CloudPorts, config dir variable, path answered
#: without a token).
APIS = {
    'keystone': ('keystone', 'keystone', 'OS_KEYSTONE_CONFIG_DIR', '/v3'),
    'glance': ('glance', 'glance', 'OS_GLANCE_CONFIG_DIR', '/versions'),
    'placement': ('placement', 'placement', 'OS_PLACEMENT_CONFIG_DIR', '/'),
    'nova-api': ('nova', 'nova', 'OS_NOVA_CONFIG_DIR', '/'),
    'neutron': ('neutron', 'neutron', 'OS_NEUTRON_CONFIG_DIR', '/'),
}
#: Nova services on the RPC bus: process -> the queue it consumes.
RPC = {'nova-conductor': 'conductor', 'nova-scheduler': 'scheduler'}
#: Start order; ``down`` stops in reverse.
ORDER = ('keystone', 'glance', 'placement', 'nova-api', 'nova-conductor',
         'nova-scheduler', 'neutron', 'nova-compute')
#: Paste files the services read from their config directory, copied
#: from the virtualenv's etc/.
PASTE = (('glance', 'glance-api-paste.ini'), ('nova', 'api-paste.ini'),
         ('neutron', 'api-paste.ini'))
#: SIGTERM grace: nova-compute once needed more than 30 s.
STOP_TIMEOUT = {'nova-compute': 60}
_LOCAL = '127.0.0.1,localhost,::1'
_ENV = {'no_proxy': _LOCAL, 'NO_PROXY': _LOCAL}


def up(state_dir, ports, prefix, ironic_api_url, python=None, compute=False,
       out=None, **kwargs):
    """Start a cloud in ``state_dir``; return its layout.Cloud (with the
    registered ids in ``.ids`` and step durations in ``.timings``).

    ``python``: of the cloud virtualenv (default: venv.ensure(), which
    builds it if needed).  ``kwargs``: other layout.Cloud fields.
    Databases start empty.  After a failure (LabError naming the log to
    read) the processes started so far keep running: call ``down``.
    """
    say = out or (lambda msg: None)
    cloud = layout.Cloud(state_dir=state_dir, prefix=prefix, ports=ports,
                         ironic_api_url=ironic_api_url, **kwargs)
    running = [n for n in ORDER if procs.running(cloud, n)]
    if running:
        raise procs.LabError('the cloud in %s is running (%s); bring it '
                             'down first' % (state_dir, ', '.join(running)))
    procs.check_ports_free(ports.named())
    python = python or venv.ensure(out=say)
    started = time.monotonic()
    try:
        _prepare(cloud, python, say)
        _start_all(cloud, python, say)
        cloud.ids.update(_register(cloud, 'resources', ('neutron',
                                                        'nova-api')))
        if compute:
            start_compute(cloud, python)
    except BaseException:
        cloud.save()
        raise
    cloud.timings['up'] = round(time.monotonic() - started, 1)
    cloud.save()
    say('cloud up in %.0fs' % cloud.timings['up'])
    return cloud


def _register(cloud, step, logs):
    """register.identity or register.resources; a failure names the
    logs of the services it talked to."""
    with _timed(cloud, 'register-' + step):
        try:
            return getattr(register, step)(cloud)
        except Exception as exc:
            raise procs.LabError('registering the cloud\'s %s failed: %s; '
                                 'see %s' % (step, exc, ', '.join(
                                     cloud.log(n + '.log') for n in logs)))


class _timed:
    def __init__(self, cloud, step):
        self.cloud, self.step = cloud, step

    def __enter__(self):
        self.t0 = time.monotonic()

    def __exit__(self, *exc):
        self.cloud.timings[self.step] = round(time.monotonic() - self.t0, 1)


def _bin(python, name):
    return os.path.join(os.path.dirname(python), name)


def _prepare(cloud, python, say):
    """Configs, databases (empty), virtual host, schemas, cells."""
    for path, text in configs.render_all(cloud).items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
    etc = os.path.join(os.path.dirname(os.path.dirname(python)), 'etc')
    for service, name in PASTE:
        src = os.path.join(etc, service, name)
        if not os.path.exists(src):
            raise procs.LabError('%s is missing from the cloud virtualenv; '
                                 'rebuild it (remove %s)' % (src, etc))
        shutil.copy(src, cloud.etc(service, name))
    for service in ('keystone', 'glance', 'placement', 'nova', 'neutron'):
        os.makedirs(cloud.data(service, 'locks'), exist_ok=True)
    os.makedirs(cloud.log_dir, exist_ok=True)
    say('creating databases %s_*' % cloud.prefix)
    with _timed(cloud, 'databases'):
        backends.check_free(cloud)
        backends.recreate_databases(cloud)
    user = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    keystone = [_bin(python, 'keystone-manage'), '--config-file',
                cloud.etc('keystone', 'keystone.conf')]
    nova = [_bin(python, 'nova-manage'), '--config-file',
            cloud.etc('nova', 'nova.conf')]
    steps = {
        'keystone': [
            keystone + ['db_sync'],
            keystone + ['fernet_setup', '--keystone-user', user,
                        '--keystone-group', group],
            keystone + ['credential_setup', '--keystone-user', user,
                        '--keystone-group', group],
            keystone + ['bootstrap', '--bootstrap-password', cloud.password,
                        '--bootstrap-admin-url', cloud.keystone_url,
                        '--bootstrap-internal-url', cloud.keystone_url,
                        '--bootstrap-public-url', cloud.keystone_url,
                        '--bootstrap-region-id', layout.REGION]],
        'glance': [[_bin(python, 'glance-manage'), '--config-file',
                    cloud.etc('glance', 'glance-api.conf'), 'db_sync']],
        # placement-manage ignores OS_PLACEMENT_CONFIG_DIR.
        'placement': [[_bin(python, 'placement-manage'), '--config-file',
                       cloud.etc('placement', 'placement.conf'),
                       'db', 'sync']],
        'nova': [
            nova + ['api_db', 'sync'],
            nova + ['cell_v2', 'map_cell0', '--database_connection',
                    cloud.db_url('nova_cell0')],
            nova + ['cell_v2', 'create_cell', '--name', 'cell1'],
            nova + ['db', 'sync']],
        'neutron': [[_bin(python, 'neutron-db-manage'),
                     '--config-file', cloud.etc('neutron', 'neutron.conf'),
                     '--config-file',
                     cloud.etc('neutron', 'plugins/ml2/ml2_conf.ini'),
                     'upgrade', 'heads']],
    }
    for service, commands in steps.items():
        say('%s: database schema' % service)
        with _timed(cloud, service + '-db'):
            for argv in commands:
                procs.run(argv, '%s %s' % (os.path.basename(argv[0]),
                                           ' '.join(argv[3:5])),
                          log_path=cloud.log('%s-manage.log' % service),
                          env=_ENV, timeout=600)


def _gunicorn_argv(cloud, python, name):
    entry, port_attr = APIS[name][:2]
    return [_bin(python, 'gunicorn'),
            '--bind', '127.0.0.1:%d' % getattr(cloud.ports, port_attr),
            '--workers', '1', '--timeout', '300', '--graceful-timeout', '10',
            '--name', 'bmc-cloud-%s' % name,
            '--pythonpath', venv.LAB_DIR,
            'bmc_lab.cloud.wsgi:%s' % entry]


def _start_all(cloud, python, say):
    """Start the API and RPC services, then wait for each."""
    t0 = time.monotonic()
    spawned = {}
    # Keystone first, and the service users registered: the others check
    # tokens with them and nova-conductor/-scheduler exit at once if their
    # Placement credentials fail.
    for name in ORDER[:-1]:
        if name in APIS:
            env = dict(_ENV)
            env[APIS[name][2]] = cloud.etc(name.partition('-')[0])
            argv = _gunicorn_argv(cloud, python, name)
        else:
            env = _ENV
            argv = [_bin(python, name), '--config-file',
                    cloud.etc('nova', 'nova.conf')]
        spawned[name] = procs.spawn(cloud, name, argv, env=env)
        if name == 'keystone':
            _wait_api(cloud, name, spawned[name])
            cloud.timings['keystone-ready'] = round(time.monotonic() - t0, 1)
            say('keystone ready after %.1fs' % (time.monotonic() - t0))
            cloud.ids = _register(cloud, 'identity', ('keystone',))
    for name in ORDER[1:-1]:
        if name in APIS:
            _wait_api(cloud, name, spawned[name])
        else:
            _wait_rpc(cloud, name, RPC[name], spawned[name])
        cloud.timings[name + '-ready'] = round(time.monotonic() - t0, 1)
        say('%s ready after %.1fs' % (name, time.monotonic() - t0))


def api_url(cloud, name):
    _entry, port_attr, _var, path = APIS[name]
    return 'http://127.0.0.1:%d%s' % (getattr(cloud.ports, port_attr), path)


def _wait_api(cloud, name, proc, timeout=180):
    """Wait until ``name`` answers HTTP (2 s per try: gunicorn's master
    accepts connections even while its workers crash-loop)."""
    url = api_url(cloud, name)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    last = 'no answer'
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise procs.LabError('%s exited with code %s while starting; '
                                 'see %s' % (name, proc.returncode,
                                             cloud.log(name + '.log')))
        try:
            with opener.open(url, timeout=2) as resp:
                if resp.status < 500:
                    return
                last = 'HTTP %d' % resp.status
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return
            last = 'HTTP %d' % exc.code
        except (OSError, ValueError) as exc:
            last = str(exc)
        time.sleep(0.5)
    raise procs.LabError('%s did not answer %s within %ds (%s); see %s'
                         % (name, url, timeout, last,
                            cloud.log(name + '.log')))


def _wait_rpc(cloud, name, queue, proc, timeout=180):
    """Wait until ``name`` consumes its RPC queue."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise procs.LabError('%s exited with code %s while starting; '
                                 'see %s' % (name, proc.returncode,
                                             cloud.log(name + '.log')))
        if backends.consumers(cloud, queue):
            return
        time.sleep(1)
    raise procs.LabError('%s did not consume RPC queue %s within %ds; '
                         'see %s' % (name, queue, timeout,
                                     cloud.log(name + '.log')))


def start_compute(cloud, python=None, timeout=180):
    """Start nova-compute (Ironic driver): only once the Ironic API at
    ``cloud.ironic_api_url`` is up and the cloud is registered.  Returns
    once it consumes its RPC queue and its host is mapped to cell1;
    Placement learns of Ironic's nodes about a minute later."""
    python = python or venv.ensure()
    proc = procs.spawn(cloud, 'nova-compute', [
        _bin(python, 'nova-compute'), '--config-file',
        cloud.etc('nova', 'nova.conf')], env=_ENV)
    t0 = time.monotonic()
    _wait_rpc(cloud, 'nova-compute', 'compute.%s' % cloud.nova_host, proc,
              timeout=timeout)
    # Map the new compute host to cell1 now: until then (the scheduler
    # does it every 30 s) a build fails with "Host ... is not mapped to
    # any cell".  Its service record exists once it consumes RPC.
    procs.run([_bin(python, 'nova-manage'), '--config-file',
               cloud.etc('nova', 'nova.conf'), 'cell_v2', 'discover_hosts',
               '--by-service'], 'nova-manage cell_v2 discover_hosts',
              log_path=cloud.log('nova-manage.log'), env=_ENV, timeout=120)
    cloud.timings['nova-compute-ready'] = round(time.monotonic() - t0, 1)
    cloud.save()
    return proc


def down(state_dir, out=None):
    """Stop the cloud of ``state_dir``, drop its databases and Nova's
    RabbitMQ queues.  Returns the names of the processes that were running
    (an already stopped cloud is fine)."""
    say = out or (lambda msg: None)
    cloud = layout.Cloud.load(state_dir)
    if cloud is None:
        return []
    stopped = []
    for name in reversed(ORDER):
        t0 = time.monotonic()
        if procs.stop(cloud, name, timeout=STOP_TIMEOUT.get(name, 30)):
            stopped.append(name)
            say('stopped %s in %.1fs' % (name, time.monotonic() - t0))
    t0 = time.monotonic()
    backends.drop_databases(cloud)
    deleted = backends.delete_queues(cloud)
    say('dropped databases %s_* and queues %s in %.1fs'
        % (cloud.prefix, ', '.join(deleted) or '(none)',
           time.monotonic() - t0))
    return stopped


def rss(cloud):
    """{process: resident memory in bytes of it and its children}."""
    sizes = {}
    for name in ORDER:
        pid = procs.pid_of(cloud, name)
        if pid is not None:
            sizes[name] = session_rss(pid)
    return sizes


def session_rss(sid):
    """Resident memory in bytes of the processes of session ``sid`` (a
    process procs.spawn started, with its workers)."""
    return sum(_rss(pid) for pid in _session(sid))


def _session(sid):
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open('/proc/%s/stat' % entry) as f:
                    fields = f.read().rsplit(')', 1)[1].split()
            except (FileNotFoundError, IndexError):
                continue
            if int(fields[3]) == sid:   # session id
                yield int(entry)


def _rss(pid):
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return 0
