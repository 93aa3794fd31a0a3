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

MariaDB: one database per service, ``<prefix>_<service>``.

RabbitMQ: the broker's virtual host as given (the machine's RabbitMQ,
whose management tools may not be on this host: only AMQP is used).
Nova's queues are named after its topics alone ("conductor",
"scheduler", "compute.<host>"), whatever its control exchange, so two
Novas on one virtual host would consume each other's messages: ``up``
refuses to start next to a Nova that already consumes them, and ``down``
deletes the queues nobody consumes any more (oslo.messaging's fanout and
reply queues delete themselves).
"""

import urllib.parse

from bmc_lab import procs

#: Nova's RPC queues of a cloud (and its compute host's).
NOVA_TOPICS = ('conductor', 'scheduler', 'compute')


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

def _amqp(cloud):
    import kombu
    url = 'amqp://%s/%s' % (cloud.rabbit, urllib.parse.quote(
        cloud.rabbit_vhost, safe=''))
    conn = kombu.Connection(url, connect_timeout=5)
    try:
        conn.connect()
    except Exception as exc:  # noqa: BLE001 - kombu/amqp/socket errors
        raise procs.LabError('cannot reach RabbitMQ at %s: %s'
                             % (cloud.rabbit.rpartition('@')[2], exc))
    return conn


def nova_queues(cloud):
    return list(NOVA_TOPICS) + ['compute.%s' % cloud.nova_host]


def _consumers(conn, queue):
    import amqp
    # A passive declare of a missing queue closes its channel: one each.
    channel = conn.channel()
    try:
        _name, _messages, count = channel.queue_declare(queue=queue,
                                                        passive=True)
    except amqp.exceptions.NotFound:
        return None
    return count


def consumers(cloud, queue):
    """Consumers of ``queue``, or None when it does not exist."""
    with _amqp(cloud) as conn:
        return _consumers(conn, queue)


def check_free(cloud):
    """Refuse a broker where another Nova consumes Nova's queues."""
    with _amqp(cloud) as conn:
        busy = [q for q in NOVA_TOPICS if _consumers(conn, q)]
    if busy:
        raise procs.LabError(
            'RabbitMQ at %s (virtual host %r) already has consumers of '
            'Nova queue(s) %s: another Nova runs on it (a cloud profile '
            'not brought down?). Nova names its queues by topic alone, so '
            'two would take each other\'s messages.'
            % (cloud.rabbit.rpartition('@')[2], cloud.rabbit_vhost or '/',
               ', '.join(busy)))


def delete_queues(cloud):
    """Delete the cloud's Nova queues that nobody consumes; returns their
    names."""
    import amqp
    deleted = []
    with _amqp(cloud) as conn:
        for queue in nova_queues(cloud):
            if _consumers(conn, queue) != 0:
                continue    # gone already, or someone else's
            try:
                conn.channel().queue_delete(queue=queue, if_unused=True)
            except amqp.exceptions.ChannelError:
                continue
            deleted.append(queue)
    return deleted
