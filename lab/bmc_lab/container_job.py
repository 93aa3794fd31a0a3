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

"""The main job: a container image run on a lab node from RAM.

Builds the demo image locally (busybox and a script, no Docker engine),
pushes it to the lab registry, deploys it in job mode with the
``container`` deploy interface, waits for the workload to exit and
returns the run report from the vendor passthru.
"""

import json
import os
import shutil
import tempfile
import time

from ironic_bmc_client import runs
from ironicclient.common.apiclient import exceptions as client_exc
from keystoneauth1 import session

from bmc_lab import client as lab_client
from bmc_lab import ociimage
from bmc_lab import procs
from bmc_common import protocol

DEMO_REPO = 'bmc/demo'
DEMO_TAG = '1'

DEMO_SCRIPT = """#!/bin/sh
echo "Hello from a container running on a whole (virtual) machine."
echo "kernel:   $(uname -r)"
echo "cpus:     $(grep -c ^processor /proc/cpuinfo)"
echo "memory:   $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
echo "root fs:  $(awk '$2 == "/" {print $3}' /proc/mounts | tail -n 1)"
echo "message:  $DEMO_MESSAGE"
echo "thp:      $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1)"
# A job long enough for the BMC's power samples, when asked for.
sleep "${DEMO_SLEEP:-0}"
exit "${DEMO_EXIT_CODE:-0}"
"""


def build_demo_tree(path):
    """A minimal root: static busybox, its applets, a script."""
    for d in ('bin', 'etc', 'proc', 'sys', 'dev', 'tmp', 'run', 'root'):
        os.makedirs(os.path.join(path, d), exist_ok=True)
    shutil.copy2('/bin/busybox', os.path.join(path, 'bin', 'busybox'))
    for applet in ('sh', 'echo', 'cat', 'uname', 'grep', 'awk', 'tail',
                   'ls', 'sleep', 'env', 'id', 'true', 'sed', 'wc', 'head'):
        os.symlink('busybox', os.path.join(path, 'bin', applet))
    with open(os.path.join(path, 'etc', 'passwd'), 'w') as f:
        f.write('root:x:0:0:root:/root:/bin/sh\n')
    with open(os.path.join(path, 'etc', 'group'), 'w') as f:
        f.write('root:x:0:\n')
    script = os.path.join(path, 'demo.sh')
    with open(script, 'w') as f:
        f.write(DEMO_SCRIPT)
    os.chmod(script, 0o755)


def push_demo_image_with(settings, repo, files, tag='1', links=None,
                         modes=None, **config):
    """The demo root plus ``files`` (path in the image -> bytes, made
    executable when they start with ``#!``) and ``links`` (path -> symlink
    target, replacing an empty directory), with ``modes`` (path -> mode)
    set last, pushed as ``repo:tag`` with the
    demo script as its command unless ``config`` (build_image's keyword
    arguments: cmd, user, stop_signal, ...) says otherwise; its
    reference."""
    with tempfile.TemporaryDirectory() as tmp:
        build_demo_tree(tmp)
        for path, data in files.items():
            dest = os.path.join(tmp, path.lstrip('/'))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, 'wb') as f:
                f.write(data)
            if data.startswith(b'#!'):
                os.chmod(dest, 0o755)
        for path, target in (links or {}).items():
            dest = os.path.join(tmp, path.lstrip('/'))
            if os.path.isdir(dest):
                os.rmdir(dest)
            os.symlink(target, dest)
        for path, mode in (modes or {}).items():
            os.chmod(os.path.join(tmp, path.lstrip('/')), mode)
        config.setdefault('cmd', ['/demo.sh'])
        config.setdefault('env', ['PATH=/bin'])
        image = ociimage.build_image([ociimage.entries_from_dir(tmp)],
                                     **config)
    ociimage.Pusher(settings.registry_address).push_image(repo, tag, image)
    return '%s/%s:%s' % (settings.registry_address, repo, tag)


def push_demo_image(settings, tag=DEMO_TAG):
    """Build and push the demo image; returns its reference by tag."""
    return push_demo_image_with(
        settings, DEMO_REPO, {}, tag=tag,
        env=['PATH=/bin', 'DEMO_MESSAGE=set by the image'], workdir='/')


#: States of a deploy, undeploy, clean or service still under way.
BUSY_STATES = ('deploying', 'wait call-back', 'deleting', 'cleaning',
               'clean wait', 'servicing', 'service wait', 'inspecting',
               'inspect wait')
#: What an earlier run may leave that undeploying returns to AVAILABLE.
UNDEPLOYABLE_STATES = ('active', 'deploy failed', 'error')


def reclaim(settings, index=0, out=print, timeout=900):
    """Bring lab node ``index`` back to AVAILABLE from what an earlier run
    left (a demo stopped mid-deploy leaves it deploying, then ACTIVE):
    wait for a deploy or undeploy under way to end, then undeploy.  A
    state this cannot undo is a LabError that says what to run."""
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    node = cli.node.get(name)
    if node.provision_state in BUSY_STATES:
        out('Node %s is %s (an earlier run); waiting for that to end ...'
            % (name, node.provision_state))
        deadline = time.monotonic() + timeout
        while (node.provision_state in BUSY_STATES
               and time.monotonic() < deadline):
            time.sleep(2)
            node = cli.node.get(name)
    state = node.provision_state
    if state == 'available':
        return
    if state in UNDEPLOYABLE_STATES:
        out('Node %s was left %s by an earlier run; undeploying it first '
            '...' % (name, state))
        undeploy(settings, index, timeout=timeout)
        return
    raise procs.LabError(
        'node %s is %s, not available: run "OS_AUTH_TYPE=none '
        'OS_ENDPOINT=%s openstack baremetal node show %s" to see why, or '
        '"bmc-lab down" then try again' % (name, state, settings.api_url,
                                           name))


def use_container_interfaces(settings, name):
    """Give lab node ``name`` (enrolled with the ramdisk deploy) the
    container deploy and vendor interfaces."""
    lab_client.get_client(settings).node.update(name, [
        {'op': 'add', 'path': '/deploy_interface', 'value': 'container'},
        {'op': 'add', 'path': '/vendor_interface', 'value': 'container'}])


def newest_report(settings, name):
    """The newest run report of node ``name``, through the container
    runs API (the operator's view: the lab's is unauthenticated outside
    the cloud profile)."""
    client = runs.RunsClient(session.Session(),
                             endpoint_override=settings.runs_api_url)
    found = client.list(node=name, limit=1)
    if not found:
        raise procs.LabError('node %s has no run report' % name)
    return client.get(found[0]['deploy_id'])


def deploy(settings, image, index=0, mode=protocol.MODE_JOB, extra=None,
           out=print, timeout=900, wait=True, configdrive=None):
    """Deploy ``image`` on a lab node; wait for ACTIVE (unless ``wait`` is
    false); return the node's state watcher.  ``configdrive`` goes with
    the request, as ``openstack baremetal node deploy --config-drive``
    sends it (a JSON object Ironic builds the ISO from, or the gzipped
    base64 ISO)."""
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    if cli.node.get(name).provision_state != 'available':
        # What a failed test before left (ACTIVE, deploy failed): it is
        # not this deploy's failure too.
        reclaim(settings, index, out=out)
    use_container_interfaces(settings, name)
    patch = [
        {'op': 'add', 'path': '/instance_info/' + protocol.II_IMAGE,
         'value': image},
        {'op': 'add', 'path': '/instance_info/' + protocol.II_MODE,
         'value': mode},
    ]
    for key, value in (extra or {}).items():
        patch.append({'op': 'add', 'path': '/instance_info/%s' % key,
                      'value': value})
    cli.node.update(name, patch)
    watcher = lab_client.StateWatcher(cli, name)
    out('Deploying %s on %s with the container deploy interface ...'
        % (image, name))
    cli.node.set_provision_state(
        name, 'active',
        **({} if configdrive is None else {'configdrive': configdrive}))
    if wait:
        watcher.wait('active', timeout)
    return watcher


def wait_report(settings, index=0, states=('finished',), timeout=600,
                name=None, until=None):
    """Poll the run report of node ``name`` (default: lab node ``index``)
    until its state is one of ``states`` (or ``until(report)`` is true,
    when given)."""
    cli = lab_client.get_client(settings)
    name = name or settings.node_name(index)
    deadline = time.monotonic() + timeout
    report = None
    while time.monotonic() < deadline:
        try:
            report = cli.node.vendor_passthru(name, 'run_report',
                                              http_method='GET')
        except client_exc.ClientException:
            # The API restarting (a test may restart Ironic).
            time.sleep(2)
            continue
        report = report.to_dict() if hasattr(report, 'to_dict') else report
        if report and (until(report) if until
                       else report.get('state') in states):
            return report
        time.sleep(2)
    raise procs.LabError('the run report of %s did not reach %s within %ds; '
                         'last: %s' % (name, getattr(until, '__doc__', None)
                                       or '/'.join(states), timeout, report))


def undeploy(settings, index=0, timeout=300):
    cli = lab_client.get_client(settings)
    name = settings.node_name(index)
    cli.node.set_provision_state(name, 'deleted')
    lab_client.StateWatcher(cli, name).wait('available', timeout)


def _short(value):
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 14 else text[:11] + '...'


def format_report(report):
    """A readable table of a run report."""
    lines = []
    for key in ('node_name', 'image', 'image_digest', 'kernel', 'mode',
                'rootfs', 'state', 'workload_exit_code'):
        lines.append('%-20s %s' % (key, report.get(key)))
    if report.get('error'):
        lines.append('%-20s %s' % ('error', report['error']))
    artifact = report.get('artifact') or {}
    if artifact:
        lines.append('%-20s %s, %.1f MB (unpacked %.1f MB), %s' % (
            'artifact', artifact.get('format'),
            artifact.get('size', 0) / 1e6,
            artifact.get('unpacked_size', 0) / 1e6,
            artifact.get('digest')))
    staging = report.get('staging') or {}
    if staging:
        line = '%.1f MB before the workload started' % (
            (staging.get('bytes_before_start') or 0) / 1e6)
        if staging.get('nfs_export'):
            line += ', NFS export %s mounted in %.2f s' % (
                staging['nfs_export'], staging.get('nfs_mount_s') or 0)
        lines.append('%-20s %s' % ('staging', line))
    stream = report.get('stream') or {}
    if stream:
        if stream.get('fully_local'):
            line = ('fully local %.1f s after the workload started '
                    '(background fetch %.1f s)' % (
                        stream.get('fully_local_after_start_s') or 0,
                        stream.get('background_fetch_s') or 0))
        else:
            line = 'not fully local: %s' % (
                stream.get('not_local_reason') or stream.get('error')
                or 'the run ended first')
        if stream.get('bytes_fetched') is not None:
            line += '; %.1f MB fetched' % (stream['bytes_fetched'] / 1e6)
        if stream.get('bytes_cached') is not None:
            line += '; %.1f MB in the bounded cache' % (
                stream['bytes_cached'] / 1e6)
        lines.append('%-20s %s' % ('stream', line))
    boot = report.get('boot') or {}
    if boot.get('phases'):
        lines.append('%-20s %s s: %s' % (
            'boot', boot.get('agent_up_s'), ', '.join(
                '%s %s' % (phase[:-2], 'n/a' if secs is None else secs)
                for phase, secs in boot['phases'].items())))
    stages = report.get('stages') or []
    if stages:
        t0 = min(s['start'] for s in stages)
        lines.append('')
        lines.append('%-20s %9s %9s %9s' % ('stage', 'start', 'end',
                                             'seconds'))
        for s in stages:
            lines.append('%-20s %9.2f %9.2f %9.2f' % (
                s['name'], s['start'] - t0, s['end'] - t0,
                s['end'] - s['start']))
    tunables = report.get('tunables') or {}
    if tunables:
        lines.append('')
        lines.append('%-20s %-14s %-14s %-14s %s' % (
            'tunable', 'requested', 'previous', 'actual', 'ok'))
        for name, t in sorted(tunables.items()):
            lines.append('%-20s %-14s %-14s %-14s %s%s' % (
                name, _short(t.get('requested')), _short(t.get('previous')),
                _short(t.get('actual')), t.get('ok'),
                '' if t.get('supported', True) else
                '  (unsupported: %s)' % t.get('reason')))
    energy = report.get('energy')
    if energy:
        lines.append('')
        if energy.get('available') is False:
            lines.append('energy               unavailable: %s'
                         % energy.get('reason'))
        else:
            lines.append('energy (%s)  run %.1f J, workload %.1f J, '
                         '%s samples every %ss' % (
                             energy.get('method'),
                             energy.get('bmc_joules_run') or 0,
                             energy.get('bmc_joules_workload') or 0,
                             energy.get('bmc_samples'),
                             energy.get('period_s')))
        rapl = energy.get('rapl') or {}
        lines.append('RAPL                 %s' % (
            '%.1f J' % rapl['joules'] if rapl.get('joules') is not None
            else 'absent: %s' % rapl.get('reason')))
    if report.get('output_tail'):
        lines.append('')
        lines.append('workload output (tail):')
        lines.extend('  | ' + ln for ln in
                     report['output_tail'].rstrip('\n').splitlines())
    return '\n'.join(lines)
