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

"""Image fidelity at the spec level, and the harness itself.

For every case of :data:`bmc_lab.fidelity.images.CASES` the image is
written as an OCI layout and unpacked by ``umoci``; its ``config.json``
(with Docker's documented additions) is the reference for the spec the
project writes for the same image: the conductor's start arguments,
then the agent's ``oci_spec.build`` on umoci's root.  Compared: args,
env, cwd, uid, gid, additionalGids.

Every case is covered here.  On a QEMU node (the e2e tier) the process
view is probed for a (entrypoint switching user, with container_args),
b, c, d and f's ``USER app`` (one image), e and f's ``USER app:app``;
the spec-level corners (a uid /etc/passwd does not list, a user listed
in its own primary group) only here.
"""

import json
import os
import shutil
import subprocess

import pytest

from bmc_lab.fidelity import images
from bmc_lab.fidelity import probe
from bmc_lab.fidelity import spec_diff
from bmc_lab.fidelity import views

needs_umoci = pytest.mark.skipif(not spec_diff.umoci_available(),
                                 reason='umoci is not installed '
                                 '(tools/host-setup.sh installs it)')


@pytest.fixture(scope='module')
def unpacked(tmp_path_factory):
    """Each case's umoci bundle, unpacked once."""
    found = {}

    def get(case):
        if case.name not in found:
            found[case.name] = spec_diff.unpack(
                case, str(tmp_path_factory.mktemp(case.name)))
        return found[case.name]
    return get


def _config(bundle):
    with open(os.path.join(bundle, 'config.json')) as f:
        return json.load(f)


@needs_umoci
@pytest.mark.parametrize('name', sorted(images.CASES))
def test_spec_as_the_image_spec_and_docker_give_it(name, unpacked):
    case = images.CASES[name]
    bundle = unpacked(case)
    reference = spec_diff.flatten(spec_diff.reference_process(
        case, _config(bundle)))
    got = spec_diff.flatten(spec_diff.project_process(
        case, os.path.join(bundle, 'rootfs')))
    expected = dict(reference, **spec_diff.INTENDED)
    known = {field: value for (case_name, field), (value, _why)
             in spec_diff.KNOWN_DIVERGENCES.items() if case_name == name}
    mismatches = views.compare(expected, got, reference)
    unknown = [m for m in mismatches if known.get(m.field, m) != m.got]
    gone = set(known) - {m.field for m in mismatches}
    assert not unknown, views.format_mismatches(case, unknown)
    assert not gone, ('%s: the known divergence of %s is gone: remove it '
                      'from spec_diff.KNOWN_DIVERGENCES' % (name, gone))


@needs_umoci
@pytest.mark.parametrize('name', sorted(images.CASES))
def test_the_docker_view_users_as_umoci_resolves_them(name, unpacked):
    # The e2e's expected view resolves users itself (views.docker_user):
    # here it agrees with runc's library, as umoci uses it.
    case = images.CASES[name]
    process = _config(unpacked(case))['process']
    passwd, group = case.passwd_group()
    uid, gid, sgids, home = views.docker_user(passwd, group, case.user)
    user = process['user']
    assert (uid, gid, sorted(sgids)) == (
        user['uid'], user['gid'], sorted(user.get('additionalGids', [])))
    env = dict(e.partition('=')[::2] for e in process['env'])
    assert env.get('HOME', '/') == home


def test_cases_stand_for_what_they_say():
    view = {name: views.docker_view(case)
            for name, case in images.CASES.items()}
    a = view['entrypoint_switches_user']
    assert (a['uid'], a['gid'], a['groups']) == ('999', '999', '101 999')
    assert a['args'] == ('-c', 'shared_buffers=16MB')
    assert a['cap_eff'] == views.NO_CAPS
    assert a['env:HOME'] == '/root'
    assert '/run/postgresql 999:999' in a['files']
    args = view['args_replace_cmd']
    assert args['args'] == ('-c', 'max_connections=7')
    assert args['env:POSTGRES_DB'] == 'probe'
    assert view['daemon_run_dir']['files'] == (
        '/run/appd 1000:1000', '/run/appd/appd.pid 1000:1000')
    c = view['workdir_in_tmp']
    assert c['cwd'] == '/tmp/work'
    assert '/tmp/work/input.txt 1000:1000' in c['files']
    assert images.HOSTNAME_LOOKUP.files, 'the host has no getent to copy'
    e = view['numeric_user']
    assert (e['uid'], e['gid'], e['groups']) == ('1000', '1000', '')
    assert e['env:PATH'] == views.DOCKER_PATH
    assert e['env:HOME'] == '/home/app'
    assert view['named_user_group']['groups'] == ''
    assert view['named_user']['groups'] == '29 44'
    unknown = view['unknown_uid']
    assert (unknown['uid'], unknown['gid'], unknown['env:HOME']) == (
        '4242', '0', '/')
    for v in view.values():
        assert 'env:TERM' not in v
        assert v['mount:/tmp'] == v['mount:/run'] == '-'


def _render(fields, facts):
    """A probe's output of these fields (what the script prints)."""
    lines = [probe.PREFIX + 'begin=1']
    mounts = {}
    for key, value in fields.items():
        if key == 'args':
            lines += [probe.PREFIX + 'arg=' + a for a in value]
        elif key == 'files':
            lines += [probe.PREFIX + 'file=' + f for f in value]
        elif key.startswith('env:'):
            lines.append(probe.PREFIX + 'env=%s=%s' % (key[4:], value))
        elif key.startswith(('mount:', 'fstype:')):
            kind, _, path = key.partition(':')
            mounts.setdefault(path, {})[kind] = value
        elif key.startswith('rlimit:'):
            continue
        else:
            lines.append(probe.PREFIX + '%s=%s' % (key, value))
    for path, m in mounts.items():
        text = '-' if m['fstype'] == '-' else '%s %s,relatime' % (
            m['fstype'], m['mount'])
        lines.append(probe.PREFIX + 'mount:%s=%s' % (path, text))
    for name in ('nofile', 'memlock'):
        lines.append(probe.PREFIX + 'rlimit:%s=%s %s' % (
            name, fields['rlimit:%s:soft' % name],
            fields['rlimit:%s:hard' % name]))
    lines += [probe.PREFIX + 'fact.%s=%s' % kv for kv in facts.items()]
    lines.append(probe.PREFIX + 'end=1')
    return 'other output\n' + '\n'.join(lines) + '\ndone\n'


NODE_FACTS = {'uts_hostname': 'node-0', 'default_address': '192.0.2.10',
              'cap_last_cap': '40'}


def test_a_node_as_intended_passes_and_a_docker_view_fails():
    case = images.NAMED_USER
    node = views.Node.from_facts(NODE_FACTS)
    expected, docker, reasons = views.expected_view(case, node)
    expected['fstype:/'] = 'tmpfs'
    assert expected['cap_bnd'] == '000001ffffffffff'
    assert expected['host_lookup'] == '192.0.2.10'
    output = _render(expected, NODE_FACTS)
    left, fields, _node = views.check(case, output, known=())
    assert left == [], left
    assert fields['mount:/dev/shm'] == 'rw,nosuid,nodev,noexec'
    # Docker's own view differs exactly where the differences are
    # intended, and each mismatch says why.
    left, _fields, _node = views.check(case, _render(docker, NODE_FACTS),
                                       known=())
    # (A user other than root has no capabilities on either.)
    assert {m.field for m in left} == {
        i.field for i in views.INTENDED_DIFFERENCES} - {'fstype:/',
                                                        'cap_eff'}
    text = views.format_mismatches(case, left)
    assert "mount:/dev/shm: expected 'rw,nosuid,nodev,noexec', got " \
        "'rw,nosuid,nodev,noexec,size=65536k' (Docker: " in text
    assert 'MPI\'s shared-memory transport' in text


def test_every_differing_field_is_reported():
    expected = {'uid': '1000', 'files': ('/run/a 0:0',), 'env:X': '1'}
    got = {'uid': '0', 'files': ('/run/b 0:0',), 'env:TERM': 'linux'}
    found = {m.field: m for m in views.compare(expected, got)}
    assert set(found) == {'uid', 'files', 'env:X', 'env:TERM'}
    assert str(found['env:TERM']) == "env:TERM: expected None, got 'linux'"
    assert str(found['files']) == ("files: missing ['/run/a 0:0'], "
                                   "unexpected ['/run/b 0:0']")


def test_known_divergences_pass_until_they_are_gone():
    case = images.NAMED_USER
    node = views.Node.from_facts(NODE_FACTS)
    expected, _docker, _reasons = views.expected_view(case, node)
    expected['fstype:/'] = 'tmpfs'
    shm = dict(expected, **{'mount:/dev/shm': 'rw,nosuid,nodev'})
    known = (('mount:/dev/shm', 'rw,nosuid,nodev', 'not yet'),)
    assert views.check(case, _render(shm, NODE_FACTS), known)[0] == []
    left = views.check(case, _render(expected, NODE_FACTS), known)[0]
    assert [m.field for m in left] == ['mount:/dev/shm']
    assert 'gone' in str(left[0])


def test_a_cut_output_is_no_probe():
    with pytest.raises(probe.ProbeError, match='cut'):
        probe.parse(probe.PREFIX + 'begin=1\n' + probe.PREFIX + 'uid=0\n')
    with pytest.raises(probe.ProbeError, match='no probe'):
        probe.parse('hello\n')


@pytest.mark.skipif(not os.path.exists('/bin/busybox'),
                    reason='no busybox on this host')
def test_the_probe_runs_on_busybox_alone(tmp_path):
    # The images' shell and applets, nothing of the host's PATH.
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    for applet in images.APPLETS + ('head',):
        if not (bin_dir / applet).exists():
            os.symlink('/bin/busybox', bin_dir / applet)
    script = tmp_path / 'bmc-probe'
    script.write_text(probe.SCRIPT)
    done = subprocess.run(
        ['/bin/busybox', 'sh', str(script), 'one arg', '-c'],
        env={'PATH': str(bin_dir), 'X': 'a=b'}, cwd=str(tmp_path),
        capture_output=True, text=True, check=True, timeout=60)
    fields, facts = probe.parse(done.stdout)
    assert fields['args'] == ('one arg', '-c')
    assert fields['env:X'] == 'a=b'
    assert fields['uid'] == str(os.geteuid())
    assert fields['cwd'] == str(tmp_path)
    assert facts['host_lookup_via'] == 'hosts-file'
    assert set(probe.MOUNT_PATHS) == {
        k.partition(':')[2] for k in fields if k.startswith('mount:')}
    assert fields['mount:/proc'].startswith('rw')
    for key in ('rlimit:nofile:soft', 'rlimit:memlock:hard', 'cap_eff',
                'cap_bnd', 'oom_score_adj', 'hostname', 'host_lookup'):
        assert fields[key], (key, done.stdout)
    assert facts['uts_hostname'] == fields['hostname']


@pytest.mark.skipif(shutil.which('ldd') is None, reason='no ldd')
def test_the_lookup_case_has_a_working_getent(tmp_path):
    # glibc's own getent (getaddrinfo through nsswitch.conf), run in the
    # image's root.
    if os.geteuid() != 0:
        pytest.skip('chroot needs root')
    for entry in images.HOSTNAME_LOOKUP.entries():
        path = tmp_path / entry.name
        if entry.kind == 'dir':
            path.mkdir(parents=True, exist_ok=True)
        elif entry.kind == 'symlink':
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(entry.linkname, path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(entry.data)
            path.chmod(entry.mode or 0o644)
    (tmp_path / 'etc' / 'hosts').write_text('192.0.2.10\tnode-0\n')
    done = subprocess.run(['chroot', str(tmp_path), '/usr/bin/getent',
                           'hosts', 'node-0'], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split() == ['192.0.2.10', 'node-0'], done
