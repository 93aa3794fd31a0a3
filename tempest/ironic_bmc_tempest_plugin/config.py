
"""tempest options of the ironic-bmc tests: [baremetal_container]."""

from oslo_config import cfg

group = cfg.OptGroup(name='baremetal_container',
                     title='Bare-Metal Container (container deploy) tests')

opts = [
    cfg.BoolOpt('enabled', default=False,
                help='Whether the cloud runs the ironic-bmc conductor '
                     'plugin: the container-ipmi hardware type and the '
                     'container deploy interface are enabled.'),
    cfg.StrOpt('driver', default='container-ipmi',
               help='Hardware type of the test nodes.'),
]
