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

"""Sphinx configuration of the release notes (tox -e releasenotes).

The same notes also render in the main documentation
(doc/source/releasenotes.rst).
"""

extensions = [
    'openstackdocstheme',
    'reno.sphinxext',
]

project = 'Bare-Metal Container for OpenStack Ironic Release Notes'
copyright = 'Bare-Metal Container developers'

openstackdocs_repo_name = 'x/ironic-bmc'
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
html_theme = 'openstackdocs'

source_suffix = {'.rst': 'restructuredtext'}
master_doc = 'index'
exclude_patterns = ['_build']
pygments_style = 'native'
highlight_language = 'none'
