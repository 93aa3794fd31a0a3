
"""tempest plugin of ironic-bmc (entry point tempest.test_plugins)."""

import os

from tempest import config
from tempest.test_discover import plugins

from ironic_bmc_tempest_plugin import config as bmc_config


class BmcTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        base_path = os.path.split(os.path.dirname(
            os.path.abspath(__file__)))[0]
        test_dir = os.path.join(base_path, 'ironic_bmc_tempest_plugin',
                                'tests')
        return test_dir, base_path

    def register_opts(self, conf):
        config.register_opt_group(conf, bmc_config.group, bmc_config.opts)

    def get_opt_lists(self):
        return [(bmc_config.group.name, bmc_config.opts)]
