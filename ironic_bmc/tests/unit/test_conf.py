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

"""ironic_bmc.conf: every topic module registered and listed once, so the
sample config and the reference show every option the code reads."""

import os
import pkgutil

from oslo_config import cfg

from ironic_bmc import conf
from ironic_bmc.conf import opts


def test_every_topic_module_is_registered():
    here = os.path.dirname(conf.__file__)
    modules = {m.name for m in pkgutil.iter_modules([here])}
    topics = {t.__name__.rsplit('.', 1)[-1] for t in conf.TOPICS}
    assert modules - topics == {'api', 'opts'}


def test_the_generator_lists_what_is_registered_once():
    """register_opts registers exactly what list_opts lists.  (On a
    ConfigOpts of its own: in a test process the agent's own [container]
    options, ironic-python-agent's, share the global CONF's group.)"""
    fresh = cfg.ConfigOpts()
    conf.register_opts(fresh)
    listed = dict(opts.list_opts())
    assert list(listed) == [conf.GROUP, conf.API_GROUP]
    for group, group_opts in listed.items():
        names = [o.name for o in group_opts]
        assert len(names) == len(set(names)), group
        registered = set(fresh[group].keys())
        assert set(names) == registered, (group, set(names) ^ registered)
