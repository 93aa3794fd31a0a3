#!/usr/bin/env python3
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

"""A stand-in for crun in the workload tests: the commands and exit
statuses the supervisor relies on, with real processes and signals, but
no namespaces, chroot or cgroup (the test machine may not allow them).

``run --bundle B --pid-file P ID`` runs ``process.args`` of B/config.json
with its env and cwd (inside ``root.path``) in a process group of its
own, writes P, and exits with the process's status (128 + signal when
killed, as crun); an executable it cannot find fails before P exists.
``kill [--all] ID SIG`` signals that process (its group with --all);
``delete --force ID`` forgets it.  Every call is appended to
``<root>/calls``.
"""

import json
import os
import shutil
import signal
import sys


def _signal(text):
    if text.isdigit():
        return int(text)
    return int(signal.Signals['SIG' + text if not text.startswith('SIG')
                              else text])


def main(argv):
    assert argv[0] == '--root'
    root, argv = argv[1], argv[2:]
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, 'calls'), 'a') as f:
        f.write(' '.join(argv) + '\n')
    state = os.path.join(root, 'state.json')
    command = argv[0]
    if command == 'run':
        bundle = argv[argv.index('--bundle') + 1]
        pid_file = argv[argv.index('--pid-file') + 1]
        with open(os.path.join(bundle, 'config.json')) as f:
            spec = json.load(f)
        process = spec['process']
        env = dict(e.split('=', 1) for e in process['env'])
        program = shutil.which(process['args'][0], path=env.get('PATH'))
        if program is None:
            print('executable file `%s` not found in $PATH'
                  % process['args'][0], file=sys.stderr)
            return 1
        cwd = os.path.join(spec['root']['path'], process['cwd'].lstrip('/'))
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            os.chdir(cwd)
            os.execve(program, process['args'], env)
        with open(state, 'w') as f:
            json.dump({'pid': pid}, f)
        with open(pid_file, 'w') as f:
            f.write(str(pid))
        _pid, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status)
    if command == 'kill':
        everything = '--all' in argv
        args = [a for a in argv[1:] if a != '--all']
        try:
            with open(state) as f:
                pid = json.load(f)['pid']
        except OSError:
            print('container %s does not exist' % args[0], file=sys.stderr)
            return 1
        try:
            if everything:
                os.killpg(pid, _signal(args[1]))
            else:
                os.kill(pid, _signal(args[1]))
        except ProcessLookupError:
            return 1
        return 0
    if command == 'delete':
        if os.path.exists(state):
            os.unlink(state)
        return 0
    print('fake crun: unknown command %s' % command, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
