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

"""[container] options: run reports, the boot's HTTP log, consoles and the
unikernel's timeout."""

from oslo_config import cfg

opts = [
    cfg.StrOpt('report_dir', default='$state_path/container_reports',
               help='Directory holding run reports, one JSON file per '
                    'deploy, kept after the node is undeployed.'),
    cfg.IntOpt('report_retention_days', default=30, min=0,
               help='Delete the report, output and result files of a run '
                    'this many days after they last changed (checked '
                    'every [container]local_state_sweep_interval); a '
                    'node\'s newest run is always kept.  0 keeps them '
                    'all: every run may leave output_max_mb plus '
                    'results_max_mb on this conductor\'s disk.'),
    cfg.StrOpt('boot_http_log', default='',
               help='Access log of the HTTP server that serves '
                    '[deploy]http_root to the nodes, when the conductor '
                    'can read it.  The report\'s boot section then splits '
                    'firmware from the boot-file downloads.  Its lines '
                    'are in the "combined" format (one-second '
                    'resolution) or start with "$msec $request_time" '
                    '(nginx: log_format ironic_bmc \'$msec $request_time '
                    '$status $body_bytes_sent "$request"\').'),
    cfg.StrOpt('console_log_template', default='',
               help='Where this conductor reads a node\'s serial console '
                    'output: a file path with {node_uuid} and/or '
                    '{node_name}, e.g. the logs conserver or '
                    'ipmiconsole keep (/var/log/conserver/{node_name}), '
                    'or libvirt\'s file console in a lab.  The unikernel '
                    'deploy interface reads its run there (a unikernel '
                    'has no agent); empty disables that interface.'),
    cfg.IntOpt('unikernel_timeout', default=900, min=30, max=86400,
               help='Seconds from power-on to a unikernel\'s end line, '
                    'unless instance_info/unikernel_timeout says '
                    'otherwise; the run then fails and the node is '
                    'powered off.'),
    cfg.IntOpt('console_read_max_kb', default=4096, min=64,
               help='Most of a node\'s console one unikernel run reads '
                    '(KiB); the rest is not read.'),
]
