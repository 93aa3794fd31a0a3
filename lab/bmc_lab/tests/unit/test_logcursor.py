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

import os

from bmc_lab import logcursor


def _append(path, data):
    with open(path, 'ab') as f:
        f.write(data)


def _rotate(path, backups=3):
    """What virtlogd does at max_size: log -> log.0 -> log.1 ..."""
    oldest = '%s.%d' % (path, backups - 1)
    if os.path.exists(oldest):
        os.unlink(oldest)
    for i in range(backups - 2, -1, -1):
        if os.path.exists('%s.%d' % (path, i)):
            os.rename('%s.%d' % (path, i), '%s.%d' % (path, i + 1))
    os.rename(path, path + '.0')
    open(path, 'wb').close()


def test_reads_what_was_appended_since(tmp_path):
    log = str(tmp_path / 'node.console.log')
    _append(log, b'old boot\n')
    cursor = logcursor.Cursor(log)
    assert cursor.read() == b''
    _append(log, b'new boot\n')
    assert cursor.text() == 'new boot\n'


def test_follows_one_rotation(tmp_path):
    # The failure this guards against: the offset taken before a deploy
    # lies past the end of the fresh file after virtlogd rotated it.
    log = str(tmp_path / 'node.console.log')
    _append(log, b'x' * 5000)
    cursor = logcursor.Cursor(log)
    _append(log, b'agent boot\n')
    _rotate(log)
    _append(log, b'SYSLINUX\n')
    assert cursor.read() == b'agent boot\nSYSLINUX\n'


def test_follows_several_rotations_in_order(tmp_path):
    log = str(tmp_path / 'node.console.log')
    _append(log, b'before\n')
    cursor = logcursor.Cursor(log)
    for word in (b'one\n', b'two\n', b'three\n'):
        _append(log, word)
        _rotate(log, backups=5)
    _append(log, b'four\n')
    assert cursor.read() == b'one\ntwo\nthree\nfour\n'


def test_cursor_file_rotated_away_keeps_what_is_left(tmp_path):
    log = str(tmp_path / 'node.console.log')
    _append(log, b'before\n')
    cursor = logcursor.Cursor(log)
    for word in (b'a\n', b'b\n', b'c\n', b'd\n'):
        _append(log, word)
        _rotate(log, backups=2)
    # Only the two newest backups survive: the marked file is gone.
    assert cursor.read() == b'c\nd\n'


def test_log_created_after_the_cursor(tmp_path):
    log = str(tmp_path / 'node.console.log')
    cursor = logcursor.Cursor(log)
    assert cursor.read() == b''
    _append(log, b'first boot\n')
    _rotate(log)
    _append(log, b'second boot\n')
    assert cursor.read() == b'first boot\nsecond boot\n'


def test_older_backups_are_not_new(tmp_path):
    log = str(tmp_path / 'node.console.log')
    _append(log, b'last week\n')
    _rotate(log)
    os.unlink(log)
    cursor = logcursor.Cursor(log)
    _append(log, b'today\n')
    assert cursor.read() == b'today\n'
