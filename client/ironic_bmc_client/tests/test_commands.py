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

"""``openstack baremetal container show|list|logs|results|chart``."""

import hashlib
import os
from unittest import mock

from osc_lib import exceptions
import pytest

from ironic_bmc_client.osc import commands
from ironic_bmc_client import runs
from ironic_bmc_client.tests import fakes
from ironic_bmc_client.tests import fixtures

OLD_ID = '0a1b2c3d-0000-4000-8000-000000000001'


def _old():
    return fixtures.report(deploy_id=OLD_ID, created=fixtures.CREATED - 3600,
                           workload_exit_code=3, state='failed',
                           error='walltime reached')


def _show(argv, compute=None, reports=None):
    fake = fakes.FakeRuns(*(reports or (fixtures.report(), _old())))
    columns, values = fakes.run(commands.ShowRun,
                                fakes.app(fake, compute=compute), argv)
    return fakes.as_dict(columns, values), fake


# --- show ------------------------------------------------------------------

def test_show_by_run_id():
    shown, fake = _show([fixtures.DEPLOY_ID])
    assert fake.calls == [('get', fixtures.DEPLOY_ID)]
    assert shown['deploy_id'] == fixtures.DEPLOY_ID
    assert shown['state'] == 'finished'
    assert shown['workload_exit_code'] == 0
    assert shown['t_ready_s'] == 54.3
    assert shown['workload_s'] == 120.0
    assert shown['bmc_joules_workload'] == 21890.4
    assert shown['rapl_joules_workload'] == 15210.7
    assert shown['tunables'].machine_readable() == {
        'hugepages': 'unsupported: no hugetlbfs in this kernel',
        'swappiness': 10, 'thp': 'never'}
    assert shown['output_tail'].split('\n') == (
        fixtures.OUTPUT.rstrip('\n').split('\n')[-10:])


def test_show_by_server_uuid_is_its_newest_run():
    shown, fake = _show([fixtures.SERVER])
    assert shown['deploy_id'] == fixtures.DEPLOY_ID
    assert fake.calls[:2] == [('get', fixtures.SERVER),
                              ('list', None, fixtures.SERVER, 1)]


def test_show_by_node_name():
    shown, fake = _show(['node-0'])
    assert shown['deploy_id'] == fixtures.DEPLOY_ID
    assert ('list', 'node-0', None, 1) in fake.calls


def test_show_by_server_name_through_the_compute_client():
    compute = mock.Mock(spec=['find_server'])
    compute.find_server.return_value = mock.Mock(id=fixtures.SERVER)
    shown, fake = _show(['my-job'], compute=compute)
    compute.find_server.assert_called_once_with('my-job',
                                                ignore_missing=True)
    assert ('list', None, fixtures.SERVER, 1) in fake.calls
    assert shown['instance_uuid'] == fixtures.SERVER


def test_show_with_a_novaclient_compute_client():
    compute = mock.Mock(spec=['servers'])
    compute.servers.find.return_value = mock.Mock(id=fixtures.SERVER)
    shown, _fake = _show(['my-job'], compute=compute)
    assert shown['instance_uuid'] == fixtures.SERVER


def test_show_when_the_compute_lookup_fails_tries_a_node():
    compute = mock.Mock(spec=['find_server'])
    compute.find_server.side_effect = RuntimeError('compute is down')
    shown, fake = _show(['node-0'], compute=compute)
    assert shown['node_name'] == 'node-0'


def test_show_an_older_run():
    shown, _fake = _show(['node-0', '--run', OLD_ID])
    assert shown['deploy_id'] == OLD_ID
    assert shown['error'] == 'walltime reached'


def test_show_a_run_of_another_node_is_refused():
    with pytest.raises(exceptions.CommandError,
                       match='is not a run of node-9'):
        _show(['node-9', '--run', OLD_ID])


def test_show_an_unknown_run():
    with pytest.raises(exceptions.CommandError,
                       match='no run %s of your project' % OLD_ID):
        _show(['node-0', '--run', OLD_ID], reports=[fixtures.report()])


def test_show_with_no_run_yet():
    with pytest.raises(exceptions.CommandError) as exc:
        _show(['node-7'])
    assert str(exc.value) == (
        'no run recorded yet for node-7 (not a run id, nor a server or a '
        'node with a run of your project)')


def test_show_api_error_is_a_command_error():
    fake = mock.Mock()
    fake.get.side_effect = runs.RunsError('the runs API is read-only', 405)
    with pytest.raises(exceptions.CommandError, match='read-only'):
        fakes.run(commands.ShowRun, fakes.app(fake), [fixtures.DEPLOY_ID])


# --- list ------------------------------------------------------------------

def test_list():
    fake = fakes.FakeRuns(fixtures.report(), _old())
    columns, rows = fakes.run(commands.ListRuns, fakes.app(fake), [])
    rows = [fakes.as_dict(columns, row) for row in rows]
    assert [r['deploy_id'] for r in rows] == [fixtures.DEPLOY_ID, OLD_ID]
    assert rows[0]['node'] == 'node-0'
    assert rows[0]['created'] == '2025-11-26T09:40:00+00:00'
    assert rows[0]['bmc_joules_workload'] == 21890.4


def test_list_filters():
    fake = fakes.FakeRuns(fixtures.report(), _old())
    compute = mock.Mock(spec=['find_server'])
    compute.find_server.return_value = mock.Mock(id=fixtures.SERVER)
    _columns, rows = fakes.run(
        commands.ListRuns, fakes.app(fake, compute=compute),
        ['--node', 'node-0', '--server', 'my-job', '--limit', '1'])
    assert fake.calls == [('list', 'node-0', fixtures.SERVER, 1)]
    assert len(rows) == 1


def test_list_unknown_server():
    with pytest.raises(exceptions.CommandError, match='no server my-job'):
        fakes.run(commands.ListRuns, fakes.app(fakes.FakeRuns()),
                  ['--server', 'my-job'])


# --- logs ------------------------------------------------------------------

OUT = ''.join('line %03d\n' % i for i in range(900))


def _logs(outputs, argv=()):
    fake = fakes.FakeRuns(fixtures.report(state='running'),
                          outputs={fixtures.DEPLOY_ID: outputs})
    application = fakes.app(fake)
    with mock.patch.object(commands.time, 'sleep') as sleep:
        fakes.run(commands.RunLogs, application,
                  [fixtures.DEPLOY_ID] + list(argv))
    return application, sleep


def test_logs_of_an_ended_run():
    application, sleep = _logs([runs.RunOutput(OUT, 'finished', True)])
    assert application.stdout.getvalue() == OUT
    assert application.stderr.getvalue() == ''
    sleep.assert_not_called()


def test_logs_of_a_running_run_prints_the_tail_and_says_so():
    application, _sleep = _logs([runs.RunOutput(OUT[-4096:], 'running',
                                                 False)])
    assert application.stdout.getvalue() == OUT[-4096:]
    assert 'is running' in application.stderr.getvalue()
    assert '--follow' in application.stderr.getvalue()


def test_logs_follow_prints_each_line_once():
    outputs = [runs.RunOutput(OUT[1000:1000 + 4096], 'running', False),
               runs.RunOutput(OUT[1000:1000 + 4096], 'running', False),
               runs.RunOutput(OUT[2000:2000 + 4096], 'running', False),
               runs.RunOutput(OUT[3000:3000 + 4096], 'exited', False),
               runs.RunOutput(OUT, 'finished', True)]
    application, sleep = _logs(outputs, ['--follow', '--interval', '0.5'])
    assert application.stdout.getvalue() == OUT[1000:]
    assert sleep.call_args_list == [mock.call(0.5)] * 4
    assert application.stderr.getvalue() == ''


# --- results ---------------------------------------------------------------

FILES = {'/results/residuals.csv': b'1,0.1\n2,0.01\n',
         '/results/sub/log.txt': b'ok\n'}


def _results(argv, files=FILES, refused=()):
    fake = fakes.FakeRuns(fixtures.report(), files=dict(files),
                          refused=list(refused))
    columns, rows = fakes.run(commands.RunResults, fakes.app(fake),
                              [fixtures.DEPLOY_ID] + list(argv))
    return [fakes.as_dict(columns, row) for row in rows], fake


def test_results_list():
    rows, _fake = _results([], refused=[
        {'path': '/tmp/x', 'error': 'not in the image\'s directories'}])
    assert rows == [
        {'path': '/results/residuals.csv', 'size': 13, 'error': None,
         'sha256': hashlib.sha256(FILES['/results/residuals.csv'])
         .hexdigest()},
        {'path': '/results/sub/log.txt', 'size': 3, 'error': None,
         'sha256': hashlib.sha256(b'ok\n').hexdigest()},
        {'path': '/tmp/x', 'size': None, 'sha256': None,
         'error': 'not in the image\'s directories'}]


def test_results_download_all(tmp_path):
    rows, _fake = _results(['--output-dir', str(tmp_path)])
    assert [r['file'] for r in rows] == [
        str(tmp_path / 'results' / 'residuals.csv'),
        str(tmp_path / 'results' / 'sub' / 'log.txt')]
    assert (tmp_path / 'results' / 'sub' / 'log.txt').read_bytes() == b'ok\n'
    assert not list(tmp_path.glob('**/*.part'))


def test_results_download_named_into_the_current_directory(tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows, fake = _results(['/results/sub/log.txt'])
    assert [c for c in fake.calls if c[0] == 'result'] == [
        ('result', fixtures.DEPLOY_ID, '/results/sub/log.txt')]
    assert (tmp_path / 'results' / 'sub' / 'log.txt').exists()
    assert rows[0]['size'] == 3


def test_results_unknown_name(tmp_path):
    with pytest.raises(exceptions.CommandError,
                       match='no result file /results/nope'):
        _results(['/results/nope', '--output-dir', str(tmp_path)])


@pytest.mark.parametrize('path', ['/results/../../etc/passwd', '/',
                                  '/results//x', '/./x'])
def test_results_refuses_paths_outside(tmp_path, path):
    with pytest.raises(exceptions.CommandError, match='refusing'):
        _results(['--output-dir', str(tmp_path)], files={path: b'x'})
    assert list(tmp_path.iterdir()) == []


def test_results_refuses_a_symlink_out_of_the_directory(tmp_path):
    outside = tmp_path / 'outside'
    outside.mkdir()
    (tmp_path / 'out').mkdir()
    os.symlink(outside, tmp_path / 'out' / 'results')
    with pytest.raises(exceptions.CommandError, match='outside'):
        _results(['--output-dir', str(tmp_path / 'out')])
    assert list(outside.iterdir()) == []


def test_results_digest_mismatch_writes_nothing(tmp_path):
    fake = fakes.FakeRuns(fixtures.report(), files=dict(FILES))
    fake.result = mock.Mock(side_effect=runs.RunsError('sha256 mismatch'))
    with pytest.raises(exceptions.CommandError, match='sha256'):
        fakes.run(commands.RunResults, fakes.app(fake),
                  [fixtures.DEPLOY_ID, '--output-dir', str(tmp_path)])
    assert list(tmp_path.iterdir()) == []


# --- chart -----------------------------------------------------------------

def _chart(argv, report=None):
    fake = fakes.FakeRuns(report or fixtures.report())
    application = fakes.app(fake)
    fakes.run(commands.RunChart, application, [fixtures.DEPLOY_ID] + argv)
    return application


def test_chart_default_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    application = _chart([])
    data = (tmp_path / 'run-6f1c2a9e-timeline.png').read_bytes()
    assert data.startswith(b'\x89PNG')
    assert application.stdout.getvalue() == (
        'run-6f1c2a9e-timeline.png: timeline chart of run %s, %d bytes\n'
        % (fixtures.DEPLOY_ID, len(data)))


def test_chart_power_svg(tmp_path):
    path = tmp_path / 'p.svg'
    _chart(['--kind', 'power', '--format', 'svg', '-o', str(path)])
    assert b'<svg' in path.read_bytes()


def test_chart_unavailable_gives_the_reason():
    with pytest.raises(exceptions.CommandError,
                       match=r'no BMC power samples .*Wake-on-LAN'):
        _chart(['--kind', 'power', '-o', '/nonexistent/x.png'],
               report=fixtures.no_bmc_report())
