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

"""A run's output and result files, kept next to its report.

``[container]report_dir/<node>/<deploy id>.output.log`` holds the output
the node kept; ``<deploy id>.results/`` the result files, under their
path inside the container.  The report says what is there (sizes,
digests, what was dropped or refused); the ``run_output`` vendor method
returns them.
"""

import hashlib
import json
import os
import shutil
import time

from ironic.common import exception
from ironic.common.i18n import _

from ironic_bmc import agent_replies
from ironic_bmc.conf import CONF
from ironic_bmc import run_store


#: A profiling run's kernel profile (see ironic_bmc.kernel.run_profile).
KERNEL_PROFILE_SUFFIX = '.kernel-profile.tar'


def _base(node_uuid, deploy_id):
    return os.path.join(CONF.container.report_dir, node_uuid, deploy_id)


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(data)
    os.replace(tmp, path)


def save(node, deploy_id, collected, wanted):
    """Store what the collect step returned; the report's ``output`` and
    ``results`` sections.

    The node's reply is checked before anything is written: an object of
    the protocol's shape, the output within ``[container]output_max_mb``
    once unpacked, only the result paths the run asked for (``wanted``),
    together within ``[container]results_max_mb``.

    :raises: AgentReplyInvalid naming what broke the protocol; nothing of
        this run is left on disk then.
    """
    base = _base(node.uuid, deploy_id)
    collected = agent_replies.mapping(node, collected, _('the collect reply'))
    output = agent_replies.mapping(node, collected.get('output') or {},
                                   _('the collected output'))
    output_max = CONF.container.output_max_mb * 1024 * 1024
    data = (agent_replies.unpack(node, output['data'], output_max,
                                 _('the collected output'))
            if output.get('data') else b'')
    section = {
        'bytes': agent_replies.integer(node, output.get('bytes', len(data)),
                                       _('the output\'s "bytes"')),
        'kept': len(data),
        'dropped': agent_replies.integer(node, output.get('dropped', 0),
                                         _('the output\'s "dropped"')),
        'sha256': hashlib.sha256(data).hexdigest()}
    section['complete'] = section['dropped'] == 0
    returned = agent_replies.mapping(node, collected.get('results') or {},
                                     _('the collected results'))
    unasked = sorted(set(returned) - set(wanted))
    if unasked:
        raise agent_replies.refuse(
            node, _('result files the run did not ask for: %s')
            % ', '.join(repr(p)[:100] for p in unasked[:5]))
    results, files = {}, {}
    budget = CONF.container.results_max_mb * 1024 * 1024
    for path in wanted:
        if path not in returned:
            continue
        entry = agent_replies.mapping(node, returned[path],
                                      _('result %r') % path)
        if 'data' not in entry:
            results[path] = {'error': str(entry.get('error')
                                          or 'not returned')[:500]}
            continue
        content = agent_replies.unpack(node, entry['data'], budget,
                                       _('result %r') % path)
        budget -= len(content)
        digest = hashlib.sha256(content).hexdigest()
        if entry.get('sha256') not in (None, digest):
            results[path] = {'error': 'the content changed on its way from '
                                      'the node (sha256 mismatch)'}
            continue
        files[path] = content
        results[path] = {'size': len(content), 'sha256': digest}
    results_dir = base + '.results'
    shutil.rmtree(results_dir, ignore_errors=True)
    _write(base + '.output.log', data)
    for path, content in files.items():
        _write(_result_path(results_dir, path), content)
    return section, results


def save_output(node_uuid, deploy_id, data):
    """Keep ``data`` (bytes the conductor read itself, e.g. a node's
    console) as the run's output; the report's ``output`` section."""
    kept = data[:CONF.container.output_max_mb * 1024 * 1024]
    _write(output_file(node_uuid, deploy_id), kept)
    return {'bytes': len(data), 'kept': len(kept),
            'dropped': len(data) - len(kept),
            'sha256': hashlib.sha256(kept).hexdigest(),
            'complete': len(kept) == len(data)}


def _result_path(results_dir, path):
    parts = [p for p in path.split('/') if p not in ('', '.')]
    if not parts or '..' in parts:
        raise exception.InvalidParameterValue(
            _('%r is not a result path') % path)
    return os.path.join(results_dir, *parts)


def read_output(node_uuid, deploy_id):
    """The kept output of a run (bytes).

    :raises: NotFound when this conductor has none.
    """
    try:
        with open(_base(node_uuid, deploy_id) + '.output.log', 'rb') as f:
            return f.read()
    except FileNotFoundError:
        raise exception.NotFound(
            _('Run %(run)s of node %(node)s has no output on conductor '
              '%(host)s: it has not ended yet, or another conductor ran '
              'it') % {'run': deploy_id, 'node': node_uuid,
                       'host': CONF.host}) from None


def result_file(node_uuid, deploy_id, path):
    """Where this conductor keeps result ``path`` of a run (it may not
    exist).

    :raises: InvalidParameterValue if ``path`` is not a result path.
    """
    return _result_path(_base(node_uuid, deploy_id) + '.results', path)


def output_file(node_uuid, deploy_id):
    """Where this conductor keeps the output of a run (it may not
    exist: the run has not ended)."""
    return _base(node_uuid, deploy_id) + '.output.log'


def read_result(node_uuid, deploy_id, path):
    """A result file of a run (bytes).

    :raises: NotFound when this conductor does not have it.
    """
    try:
        with open(_result_path(_base(node_uuid, deploy_id) + '.results',
                               path), 'rb') as f:
            return f.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise exception.NotFound(
            _('Run %(run)s of node %(node)s has no result %(path)s on '
              'conductor %(host)s (the report\'s "results" says what was '
              'returned)') % {'run': deploy_id, 'node': node_uuid,
                              'path': path, 'host': CONF.host}) from None


def prune(max_age_days, now=None):
    """Delete the reports, outputs and result files of runs that ended
    more than ``max_age_days`` ago; never a node's newest run (it may
    still be running, or be the one its owner reads now).

    :returns: the number of runs deleted.
    """
    if max_age_days <= 0:
        return 0
    root = CONF.container.report_dir
    limit = (now or time.time()) - max_age_days * 86400
    deleted = 0
    try:
        node_dirs = os.listdir(root)
    except FileNotFoundError:
        return 0
    for node_dir in node_dirs:
        if node_dir.startswith('.'):
            continue  # run_store's index
        directory = os.path.join(root, node_dir)
        try:
            runs = sorted(
                ((os.path.getmtime(os.path.join(directory, n)), n[:-5])
                 for n in os.listdir(directory) if n.endswith('.json')),
                reverse=True)
        except (NotADirectoryError, FileNotFoundError):
            continue
        for mtime, run in runs[1:]:
            if mtime >= limit:
                continue
            base = os.path.join(directory, run)
            try:
                with open(base + '.json') as f:
                    indexed = json.load(f)
            except (OSError, ValueError):
                indexed = {}
            if not isinstance(indexed, dict):
                indexed = {}
            for path in (base + '.json', base + '.output.log',
                         base + run_store.POWER_SUFFIX,
                         base + KERNEL_PROFILE_SUFFIX):
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
            run_store.unindex(dict(indexed, deploy_id=run))
            shutil.rmtree(base + '.results', ignore_errors=True)
            deleted += 1
    return deleted
