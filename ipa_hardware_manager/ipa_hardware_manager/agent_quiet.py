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

"""A quiet agent next to a running workload.

Once the deploy is over, Ironic forgets the agent's token: every
heartbeat of the agent is then refused, and logged at ERROR by the
conductor, which watches the workload by polling the agent anyway.  And
IPA keeps the result of every command it ran: a status poll every 10 s
is 60,000 results a week.  So, reaching the running agent through its
``deploy`` extension (as IPA's own extensions do):

* :func:`prompt_heartbeats` (from the agent's start): IPA heartbeats
  after each command ends, but its heartbeat thread wakes only every 5 s
  and sends a forced heartbeat no sooner than 5 s after the last one, so
  the conductor learned of each step's end up to 5 s late (the first
  step of every deploy lost 4-5 s: it ends within seconds of the
  lookup's heartbeat); it now wakes every second (the retry pace after a
  failed heartbeat stays as it was);
* :func:`stop_heartbeats` stops the heartbeat thread;
* :func:`heartbeat_now` sends one heartbeat when the workload ends on its
  own, once the conductor said it accepts them again (``notify_exit``);
* :func:`forget_status_results` drops the results of earlier status
  polls, which nobody reads again.
"""

from ironic_python_agent.extensions import base as ext_base
from oslo_log import log

from bmc_common import protocol

LOG = log.getLogger(__name__)

#: Steps whose results nobody reads after their call returned.
_FORGETTABLE = (protocol.STEP_WORKLOAD_STATUS,)


def _agent():
    try:
        return ext_base.get_extension('deploy').agent
    except Exception as exc:  # noqa: BLE001 - not running inside IPA
        LOG.debug('No running agent to reach: %s', exc)
        return None


#: How often IPA's heartbeat thread wakes to see a heartbeat is due.
PROMPT_INTERVAL = 1.0


def prompt_heartbeats(heartbeater):
    """Make the heartbeat that follows a command's end prompt.

    :param heartbeater: IPA's heartbeat thread class: every heartbeater
        the agent builds after this call is prompt.
    :returns: whether it has the attributes to change (IPA 13's).
    """
    if not hasattr(heartbeater, 'min_heartbeat_interval'):
        return False
    was = heartbeater.min_heartbeat_interval
    if was <= PROMPT_INTERVAL:
        return True
    # A failed heartbeat is retried after min_heartbeat_interval x the
    # error jitter: scaled back up, the retry pace does not change.
    scale = was / PROMPT_INTERVAL
    heartbeater.min_error_jitter_multiplier *= scale
    heartbeater.max_error_jitter_multiplier *= scale
    heartbeater.min_heartbeat_interval = PROMPT_INTERVAL
    LOG.info('Heartbeats follow a command within %s s (was %s s)',
             PROMPT_INTERVAL, was)
    return True


def stop_heartbeats():
    """Stop the agent's heartbeats; whether it had any to stop."""
    agent = _agent()
    heartbeater = getattr(agent, 'heartbeater', None)
    if heartbeater is None or not heartbeater.is_alive():
        return False
    LOG.info('The workload runs and the conductor polls it: no more '
             'heartbeats')
    heartbeater.stop()
    return True


def heartbeat_now():
    """One heartbeat, now, from the caller's thread (the heartbeat thread
    is stopped); whether there was an agent to send it."""
    agent = _agent()
    heartbeater = getattr(agent, 'heartbeater', None)
    if heartbeater is None:
        return False
    LOG.info('The workload ended: one heartbeat tells the conductor')
    heartbeater.do_heartbeat()      # logs its own failure
    return True


def _step_name(result):
    params = getattr(result, 'command_params', None) or {}
    return ((params.get('step') or {}).get('step')
            if isinstance(params.get('step'), dict) else None)


def forget_status_results():
    """Drop the finished results of earlier status polls; how many."""
    agent = _agent()
    results = getattr(agent, 'command_results', None)
    if results is None:
        return 0
    stale = [key for key, result in list(results.items())
             if result.is_done() and _step_name(result) in _FORGETTABLE]
    for key in stale:
        results.pop(key, None)
    return len(stale)
