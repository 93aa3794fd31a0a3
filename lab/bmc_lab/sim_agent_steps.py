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

"""The container steps as the simulated agents run them.

:class:`ContainerSteps` is mixed into :class:`bmc_lab.sim_agent.SimAgents`:
the artifact is really downloaded (from loopback only) and its digest
checked; the workload is a timer; a hostile node (``node.hostile``)
answers outside the protocol as the hostile-node tests ask.
"""

import hashlib
import threading
import time
import urllib.parse

import requests

from bmc_common import protocol
from bmc_lab import settings as lab_settings

OUTPUT = b'simulated workload output\n'
#: The status a "huge" hostile node answers with.
HUGE_BYTES = 60 * 1024 * 1024
_LOOPBACK = ('127.0.0.1', 'localhost', '::1')


class StepFailed(Exception):
    """A step the simulated agent refuses, with IPA's error type."""


def loopback_url(url, http_port):
    """``url`` as the host reaches it: the guests' view of the host
    becomes 127.0.0.1 (the HTTP root's port); anything not on loopback is
    refused, never fetched."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname
    if host == lab_settings.GUEST_HOST_ADDRESS:
        netloc = '127.0.0.1:%d' % (parts.port or http_port)
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    if host not in _LOOPBACK:
        raise StepFailed('refusing to fetch %s: the simulated agents only '
                         'reach loopback' % url)
    return url


class ContainerSteps:
    """The container steps of the simulated agents (a mixin)."""

    # -- the container steps -------------------------------------------------

    def _step_bmc_apply_tunables(self, node, args):
        return {'tunables': {}}

    def _step_bmc_stage_rootfs(self, node, args):
        if args.get('rootfs', protocol.ROOTFS_RAMFS) != protocol.ROOTFS_RAMFS:
            raise StepFailed('only the ramfs rootfs mode is simulated, not '
                             '%s' % args.get('rootfs'))
        start = time.time()
        digest = hashlib.sha256()
        size = 0
        with requests.get(loopback_url(args['url'], self.http_port),
                          stream=True, timeout=120) as resp:
            resp.raise_for_status()
            for chunk in resp.iter_content(1 << 20):
                digest.update(chunk)
                size += len(chunk)
        self.count('artifact_bytes', size)
        if args.get('digest') and args['digest'] != (
                'sha256:' + digest.hexdigest()):
            raise StepFailed('digest mismatch: expected %s, got sha256:%s'
                             % (args['digest'], digest.hexdigest()))
        end = time.time()
        return {'root': '/sim/%s' % node.uuid, 'rootfs': args.get('rootfs'),
                'bytes': size, 'verify': 'sha256',
                'timings': {'download': round(end - start, 3), 'mount': 0.0},
                'stages': [protocol.stage(protocol.STAGE_ROOTFS_STAGED,
                                          start, end)]}

    def _step_bmc_start_workload(self, node, args):
        started = time.time()
        with node.lock:
            node.workload = {'started': started, 'ended': None,
                             'exit_code': None, 'mode': args.get('mode')}
        if args.get('mode') == protocol.MODE_JOB:
            timer = threading.Timer(self.job_seconds, self._exit,
                                    args=(node, node.workload, 0))
            timer.daemon = True
            timer.start()
        return {'pid': 4242, 'container_pid': 4243, 'started': started}

    def _exit(self, node, workload, code, stop=None):
        with node.lock:
            if workload is not node.workload or workload['ended']:
                return
            workload.update(ended=time.time(), exit_code=code)
            if stop:
                workload['stop'] = stop
            notify = node.notify_exit and not stop
        if notify:
            self.count('exit_heartbeats')
            self.heartbeat(node)

    def _status(self, node):
        with node.lock:
            w = node.workload
            if not w:
                return {'state': 'absent', 'exit_code': None,
                        'output_tail': '', 'stages': []}
            stages = [protocol.stage(protocol.STAGE_WORKLOAD_STARTED,
                                     w['started'], w['started'])]
            if w['ended']:
                stages.append(protocol.stage(protocol.STAGE_WORKLOAD_EXITED,
                                             w['started'], w['ended']))
            status = {'state': 'exited' if w['ended'] else 'running',
                      'exit_code': w['exit_code'], 'mode': w['mode'],
                      'output_tail': OUTPUT.decode(), 'stages': stages,
                      'output': {'bytes': len(OUTPUT), 'dropped': 0},
                      'pid': 4242}
            if w.get('stop'):
                status['stop'] = w['stop']
            return status

    def _step_bmc_workload_status(self, node, args):
        if args.get('notify_exit'):
            node.notify_exit = True
        status = self._status(node)
        if node.hostile == 'huge':
            status['output_tail'] = 'x' * HUGE_BYTES
        elif node.hostile == 'types' and status['state'] == 'exited':
            status['exit_code'] = '0; trust me'
        return status

    def _step_bmc_stop_workload(self, node, args):
        reason = args.get('reason', protocol.STOP_REQUEST)
        stop = {'reason': reason, 'signal': 'SIGTERM', 'grace':
                args.get('grace'), 'killed': False, 'seconds': 0.0,
                'requested': time.time()}
        self._exit(node, node.workload, 143, stop=stop)
        return self._status(node)

    def _step_bmc_quiet_agent(self, node, args):
        node.heartbeats = False
        return {'heartbeats': 'stopped'}

    def _step_bmc_collect_output(self, node, args):
        if not node.workload or not node.workload['ended']:
            raise StepFailed('the workload has not exited')
        output = OUTPUT
        if node.hostile == 'bomb':
            output = b'\0' * (64 * 1024 * 1024)
        results = {p: {'error': 'not simulated'}
                   for p in args.get('results') or ()}
        if node.hostile == 'unasked':
            results['/etc/shadow'] = {'data': protocol.pack(b'root:x:\n')}
        return {'output': {'data': protocol.pack(output), 'kept': True,
                           'bytes': len(output), 'dropped': 0,
                           'finished': True},
                'results': results}
