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

"""Whose code a conductor's CPU runs: the plugin's, or Ironic's.

Ironic's ``fake`` deploy is a floor, not Ironic's own cost of a deploy
driven by an agent: it has no boot, no heartbeat, no in-band step.  So
the scale benchmark also samples the conductor with py-spy (``--gil``:
only the thread running Python, which is where the conductor spends its
CPU) and splits the samples by owner.  A sample is the plugin's when the
innermost frame that changes the owner is in ``ironic_bmc``; Ironic's
when it is Ironic's or when the plugin called one of Ironic's own
entry points that Ironic's own agent deploy runs as well
(:data:`IRONIC_ENTRIES`: the heartbeat and step machinery, sending a step
to the agent, a power action, a lock, the iPXE boot of the agent
ramdisk).  Everything else the plugin does is its own, its node saves
included.  The plugin's CPU per deploy is its share of the samples times
the conductor's measured CPU per deploy.
"""

import collections
import os
import re
import shutil
import signal
import subprocess
import sys

#: Ironic functions that are Ironic's cost wherever they are called from:
#: what Ironic's own agent deploy with its iPXE boot runs per deploy too.
IRONIC_ENTRIES = frozenset((
    # The heartbeat and deploy-step machinery; sending a step to the agent.
    ('ironic/drivers/modules/agent_base.py', 'heartbeat'),
    ('ironic/drivers/modules/agent_base.py', 'execute_step'),
    ('ironic/drivers/modules/agent_base.py', 'process_next_step'),
    ('ironic/drivers/modules/agent_base.py', 'tear_down'),
    ('ironic/drivers/modules/agent_client.py', 'execute_deploy_step'),
    # Power actions and locks.
    ('ironic/conductor/utils.py', 'node_power_action'),
    ('ironic/conductor/task_manager.py', 'acquire'),
    ('ironic/conductor/task_manager.py', 'upgrade_lock'),
    ('ironic/conductor/task_manager.py', '__exit__'),
    # The iPXE boot of the agent ramdisk (what PXEBaseMixin's
    # validate and prepare_ramdisk do; the plugin calls the same
    # pxe_utils functions).
    ('ironic/drivers/modules/pxe_base.py', 'validate'),
    ('ironic/common/pxe_utils.py', 'create_ipxe_boot_script'),
    ('ironic/common/pxe_utils.py', 'dhcp_options_for_instance'),
    ('ironic/common/dhcp_factory.py', 'update_dhcp'),
    ('ironic/common/pxe_utils.py', 'build_pxe_config_options'),
    ('ironic/common/pxe_utils.py', 'create_pxe_config'),
    ('ironic/common/pxe_utils.py', 'cache_ramdisk_kernel'),
    ('ironic/common/pxe_utils.py', 'clean_up_pxe_env'),
))
PLUGIN = 'ironic_bmc/'
#: "function (path:line)" of py-spy's raw (collapsed) output.
_FRAME = re.compile(r'^(?P<func>\S+) \((?P<path>[^:)]+)(?::\d+)?\)$')


def _py_spy():
    here = os.path.join(os.path.dirname(sys.executable), 'py-spy')
    return here if os.path.exists(here) else shutil.which('py-spy')


class Sampler:
    """py-spy recording one process tree until :meth:`stop`."""

    def __init__(self, pid, path, rate=50):
        self.path = path
        self.proc = None
        exe = _py_spy()
        if exe is None:
            self.why_not = 'py-spy is not installed'
            return
        self.why_not = None
        self.log = open(path + '.log', 'w')
        self.proc = subprocess.Popen(
            [exe, 'record', '--gil', '--nonblocking', '--subprocesses',
             '--format', 'raw', '--rate', str(rate), '--pid', str(pid),
             '--output', path],
            stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self, timeout=60):
        """Stop sampling; the owner shares, or ``{'error': why}``."""
        if self.proc is None:
            return {'error': self.why_not}
        try:
            if self.proc.poll() is None:
                # py-spy writes what it has on SIGINT.
                self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            self.log.close()
        try:
            with open(self.path) as f:
                return shares(f)
        except OSError as exc:
            return {'error': 'py-spy wrote no profile (%s; see %s.log)'
                             % (exc.strerror, self.path)}


def owner(frames):
    """'plugin' or 'ironic': who a sample's CPU is for (root first)."""
    who = 'ironic'
    for frame in frames:
        match = _FRAME.match(frame)
        if not match:
            continue
        path = match['path']
        if PLUGIN in path:
            who = 'plugin'
        elif who == 'plugin' and any(
                # py-spy 0.4.2 and later name a method Class.method.
                path.endswith(p) and match['func'].rsplit('.', 1)[-1] == f
                for p, f in IRONIC_ENTRIES):
            who = 'ironic'
    return who


def shares(lines):
    """``{'samples', 'plugin', 'ironic', 'plugin_top'}`` of py-spy's raw
    output: the owners' fractions of the samples, and where the
    plugin's samples are (its innermost function, the top ten)."""
    counts = collections.Counter()
    top = collections.Counter()
    for line in lines:
        stack, _, count = line.rstrip('\n').rpartition(' ')
        if not stack or not count.isdigit():
            continue
        frames = stack.split(';')
        who = owner(frames)
        counts[who] += int(count)
        if who == 'plugin':
            inner = next(f for f in reversed(frames) if PLUGIN in f)
            top[re.sub(r':\d+\)$', ')', inner)] += int(count)
    total = sum(counts.values())
    if not total:
        return {'error': 'no samples'}
    return {
        'samples': total,
        'plugin': round(counts['plugin'] / total, 4),
        'ironic': round(counts['ironic'] / total, 4),
        'plugin_top': [(f, round(n / total, 4))
                       for f, n in top.most_common(10)],
    }


def combine(results):
    """One result of several conductors' (weighted by their samples)."""
    good = [r for r in results if 'error' not in r]
    if not good:
        return results[0] if results else {'error': 'no conductor sampled'}
    total = sum(r['samples'] for r in good)
    top = collections.Counter()
    for r in good:
        for func, share in r['plugin_top']:
            top[func] += share * r['samples'] / total
    return {
        'samples': total,
        'plugin': round(sum(r['plugin'] * r['samples'] for r in good)
                        / total, 4),
        'ironic': round(sum(r['ironic'] * r['samples'] for r in good)
                        / total, 4),
        'plugin_top': [(f, round(s, 4)) for f, s in top.most_common(10)],
    }
