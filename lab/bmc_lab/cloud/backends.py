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

"""What a cloud owns on the shared MariaDB and RabbitMQ servers.

MariaDB: one database per service, ``<prefix>_<service>``.  RabbitMQ: a
virtual host named after the prefix.  Nova's queues are named after its
topics alone ("conductor", "scheduler", "compute"), whatever its control
exchange, so two clouds on one virtual host would consume each other's
messages; a virtual host of its own keeps a cloud's RPC apart and lets
``down`` remove its queues and exchanges in one step.
"""

import shutil
import urllib.parse

from bmc_lab import procs


def _mysql_connect(cloud):
    import pymysql
    url = urllib.parse.urlsplit(cloud.mysql_url.replace('+pymysql', ''))
    try:
        return pymysql.connect(host=url.hostname or '127.0.0.1',
                               port=url.port or 3306,
                               user=url.username or 'root',
                               password=url.password or '')
    except pymysql.MySQLError as exc:
        raise procs.LabError('cannot reach MariaDB at %s:%s for the cloud '
                             'databases: %s' % (url.hostname, url.port, exc))


def recreate_databases(cloud):
    """Drop and create the cloud's databases: each ``up`` starts empty."""
    with _mysql_connect(cloud) as conn, conn.cursor() as cur:
        for name in cloud.databases:
            cur.execute('DROP DATABASE IF EXISTS `%s`' % name)
            cur.execute('CREATE DATABASE `%s` CHARACTER SET utf8mb4' % name)


def drop_databases(cloud):
    with _mysql_connect(cloud) as conn, conn.cursor() as cur:
        for name in cloud.databases:
            cur.execute('DROP DATABASE IF EXISTS `%s`' % name)


def existing_databases(cloud):
    """The cloud's databases that exist on the server."""
    with _mysql_connect(cloud) as conn, conn.cursor() as cur:
        cur.execute('SHOW DATABASES')
        present = {row[0] for row in cur.fetchall()}
    return sorted(set(cloud.databases) & present)


# --- RabbitMQ ----------------------------------------------------------------

def _rabbitmqctl(cloud, *args, check=True):
    ctl = shutil.which('rabbitmqctl') or '/usr/sbin/rabbitmqctl'
    return procs.run([ctl, '-q'] + list(args),
                     'rabbitmqctl %s' % ' '.join(args),
                     log_path=cloud.log('rabbitmqctl.log'), check=check,
                     timeout=120)


def _rabbit_user(cloud):
    return cloud.rabbit.partition('@')[0].partition(':')[0]


def vhosts(cloud):
    res = _rabbitmqctl(cloud, 'list_vhosts', 'name')
    return {line.strip() for line in res.stdout.splitlines()} - {'name'}


def ensure_vhost(cloud):
    """Create the cloud's virtual host (if missing) for its RabbitMQ user."""
    if cloud.vhost not in vhosts(cloud):
        _rabbitmqctl(cloud, 'add_vhost', cloud.vhost)
    _rabbitmqctl(cloud, 'set_permissions', '-p', cloud.vhost,
                 _rabbit_user(cloud), '.*', '.*', '.*')


def queues(cloud):
    """{queue: consumers} of the cloud's virtual host ({} if it has none)."""
    res = _rabbitmqctl(cloud, 'list_queues', '-p', cloud.vhost,
                       'name', 'consumers', check=False)
    if res.returncode != 0:
        return {}
    found = {}
    for line in res.stdout.splitlines():
        name, _, consumers = line.strip().rpartition('\t')
        if name and consumers.isdigit():
            found[name] = int(consumers)
    return found


def delete_vhost(cloud):
    """Delete the virtual host: Nova's and Neutron's queues (conductor,
    scheduler, compute, compute.<host>, fanouts, replies) and exchanges
    with it.  True if it existed."""
    if cloud.vhost not in vhosts(cloud):
        return False
    _rabbitmqctl(cloud, 'delete_vhost', cloud.vhost)
    return True
