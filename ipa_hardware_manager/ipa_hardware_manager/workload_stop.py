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

"""How a workload ends when it does not end by itself: a stop (the
image's StopSignal, then SIGKILL to its whole cgroup after a grace
period), its walltime, and the word to the conductor when it ends on its
own.  Mixed into :class:`ipa_hardware_manager.workload.Supervisor`, whose
record, lock and runtime it uses."""

import signal
import threading
import time

from oslo_log import log

from ipa_hardware_manager import workload_args
from bmc_common import oci
from bmc_common import protocol

LOG = log.getLogger(__name__)

DEFAULT_GRACE = 10
#: After SIGKILL to the whole cgroup, how long the end may take.
KILL_WAIT = 10


def end_timer(timer, timeout=None):
    """Cancel ``timer`` and wait up to ``timeout`` seconds for its callback,
    if it already runs, to return.  Whether it has."""
    if timer is None:
        return True
    timer.cancel()
    if timer is threading.current_thread() or timer.ident is None:
        return True
    timer.join(timeout)
    return not timer.is_alive()


class StopMixin:
    """Stop, walltime and exit notice of the Supervisor."""

    def _arm_walltime(self):
        deadline = (self.record or {}).get('deadline')
        if not deadline:
            return
        pid = self.record['pid']
        self.timer = threading.Timer(max(0.0, deadline - time.time()),
                                     self._walltime_reached, args=(pid,))
        self.timer.daemon = True
        self.timer.name = 'bmc-workload-walltime'
        self.timer.start()

    def cancel_walltime(self, timeout=None):
        """Disarm the walltime and wait up to ``timeout`` seconds for a stop
        it already began to end, so that nothing writes the record after
        this returns.  Whether the walltime thread has ended."""
        return end_timer(self.timer, timeout)

    def _walltime_reached(self, pid):
        with self.lock:
            if not self.record or self.record['pid'] != pid:
                return
        LOG.warning('Workload pid %d reached its walltime of %s s', pid,
                    self.record['walltime'])
        try:
            self.stop(self.record.get('stop_grace', DEFAULT_GRACE),
                      reason=protocol.STOP_WALLTIME)
        except workload_args.WorkloadError as exc:
            LOG.error('Could not end workload pid %d at its walltime: %s',
                      pid, exc)

    def _tell_exit(self, record):
        """An exit nobody asked for (not a stop the conductor waits on):
        let the conductor know now rather than at its next poll."""
        hook = self.exit_hook
        reason = (record.get('stop') or {}).get('reason')
        if hook is None or reason in (protocol.STOP_REQUEST,
                                      protocol.STOP_UNDEPLOY):
            return
        try:
            hook()
        except Exception:
            LOG.exception('Could not tell the conductor of the exit')

    def stop(self, grace=DEFAULT_GRACE, reason=protocol.STOP_REQUEST):
        """The image's StopSignal to the container's init, SIGKILL to its
        whole cgroup after ``grace`` seconds; records how it ended."""
        try:
            grace = float(grace)
        except (TypeError, ValueError):
            raise workload_args.WorkloadError(
                'grace must be a number of seconds, got %r' % (grace,)
            ) from None
        if grace < 0:
            raise workload_args.WorkloadError(
                'grace must be 0 or more seconds, got %r' % grace)
        with self.lock:
            record = self.record
            running = record is not None and self._running()
            if running and record.get('stop'):
                running = False     # another stop is under way
        if not running:
            return self.status()
        pid = record['pid']
        number = record.get('stop_signal') or int(signal.SIGTERM)
        name = oci.signal_name(number)
        t0 = time.monotonic()
        with self.lock:
            record['stop'] = {'reason': reason, 'signal': name,
                              'grace': grace, 'killed': False,
                              'seconds': None, 'requested': time.time()}
            self._save()
        LOG.info('Stopping workload pid %d: %s, SIGKILL after %.1f s (%s)',
                 pid, name, grace, reason)
        self.runtime.kill(number, False, record.get('container_pid'),
                          record['pid'])
        if not self._wait_end(grace):
            LOG.warning('Workload pid %d outlived %s by %.1f s: SIGKILL to '
                        'its cgroup', pid, name, grace)
            record['stop']['killed'] = True
            self.runtime.kill('KILL', True, record.get('container_pid'),
                              record['pid'])
            if not self._wait_end(KILL_WAIT):
                LOG.error('Workload pid %d survived SIGKILL for %d s', pid,
                          KILL_WAIT)
        with self.lock:
            record['stop']['seconds'] = round(time.monotonic() - t0, 3)
            if (self.proc is None and not record.get('ended')
                    and not self._running()):
                # Not our child (the agent restarted): its exit code is
                # lost, only the end time is known.
                record['ended'] = time.time()
            self._save()
        return self.status()

    def _wait_end(self, seconds):
        deadline = time.monotonic() + seconds
        while True:
            with self.lock:
                if not self._running():
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
