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

"""Configuration files of the lab's services: INI ones written from
dictionaries, and any one written to its path."""

import configparser
import io
import os


def ini_text(conf, header):
    """An INI file's text: ``header`` (comment lines), then ``conf``
    ({section: {option: value}}, options in the given order)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    for section, values in conf.items():
        if section != 'DEFAULT':
            parser.add_section(section)
        for key, value in values.items():
            parser.set(section, key, value)
    buf = io.StringIO()
    buf.write(header)
    parser.write(buf)
    return buf.getvalue()


def write_file(path, text):
    """Write ``text`` to ``path``, its directory made first."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
