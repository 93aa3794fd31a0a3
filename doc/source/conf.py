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

"""Sphinx configuration of the documentation (tox -e docs)."""

import copy
import os
import re
import sys

from oslo_config import sphinxext as oslo_sphinxext

# The local extension (the key and report references, generated from
# bmc_common.protocol).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '_exts'))

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    'oslo_policy.sphinxext',
    'reno.sphinxext',
    'bmc_keys',
]

project = 'Bare-Metal Container for OpenStack Ironic'
copyright = 'Bare-Metal Container developers'

# openstackdocstheme
openstackdocs_repo_name = 'x/ironic-bmc'
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
html_theme = 'openstackdocs'
html_static_path = ['_static']
html_css_files = ['bmc.css']
html_title = project

# The sample configuration file, written at build time (not committed).
config_generator_config_file = (
    '../../tools/config/ironic-bmc-config-generator.conf')
sample_config_basename = '_static/ironic-bmc'

source_suffix = {'.rst': 'restructuredtext'}
master_doc = 'index'
exclude_patterns = ['_build']
pygments_style = 'native'
# Literal blocks are shell, INI and JSON: no guessed highlighting.
highlight_language = 'none'


# The options' help is plain text (the sample file shows it as it is);
# show-options reads it as reStructuredText, where a bare "*" (user.*,
# *.conf) would start emphasis.  Escape it in the rendered help only.
_format_opt = oslo_sphinxext._format_opt


def _format_plain_opt(opt, group_name):
    if opt.help and '*' in opt.help:
        opt = copy.copy(opt)
        opt.help = re.sub(r'(?<!\\)\*', r'\\*', opt.help)
    return _format_opt(opt, group_name)


oslo_sphinxext._format_opt = _format_plain_opt
