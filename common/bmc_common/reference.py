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

"""What the keys of the deploy and the run report's fields mean.

The user contract of :mod:`bmc_common.protocol`, described once: the
documentation's key and report references are generated from these
tuples (``doc/source/_exts/bmc_keys.py``), and a unit test checks that
every ``protocol.II_*`` constant has its entry.  Values are
reStructuredText.
"""

import collections

from bmc_common import protocol

#: Who may set a key: the operator only, in ``instance_info``
#: (``WHO_OPERATOR``), or also a tenant, as a property of the Glance image
#: the deploy names (``WHO_TENANT``; ``instance_info`` wins over it).
WHO_OPERATOR = 'operator'
WHO_TENANT = 'tenant'

Key = collections.namedtuple('Key', 'name type default who description')
Key.__doc__ = """One key of the deploy: ``name``, its value's ``type``, its
``default`` (None when it has none), ``who`` may set it (WHO_OPERATOR or
WHO_TENANT) and a ``description``."""

#: The keys of ``instance_info`` a container deploy reads, in the order
#: the documentation lists them.
INSTANCE_INFO_KEYS = (
    Key(protocol.II_IMAGE, 'OCI reference', None, WHO_TENANT,
        'Required. An OCI reference, by tag (``host:port/repo:tag``) or '
        'by digest (``host:port/repo@sha256:...``). An ``oci://`` prefix '
        'is accepted. The manifest matching the node\'s ``cpu_arch`` is '
        'chosen from an image index.'),
    Key('image_pull_secret', 'string', None, WHO_OPERATOR,
        'Registry credentials, as Ironic handles them: a token or '
        '``user:password``. ``driver_info/image_pull_secret`` is the '
        'operator\'s fallback. Sent only to the registries of '
        '``[container]credential_registries``, and for an image a Glance '
        'image property names only to those of '
        '``[container]tenant_credential_registries``.'),
    Key(protocol.II_ROOTFS, '``ramfs``, ``stream`` or ``nfs``', '``ramfs``',
        WHO_TENANT,
        'How the node gets the container\'s root (see '
        ':doc:`/admin/rootfs-modes`).'),
    Key(protocol.II_STREAM_CACHE, 'bytes, size or percentage',
        'as much as ``ramfs`` could hold', WHO_TENANT,
        '``stream`` mode only: the RAM the node\'s block cache may use, '
        'as bytes, a size (``512M``, ``2G``) or a share of the node\'s '
        'RAM (``25%``). Refused at validate when it is not a size, less '
        'than 1 MiB, or more than ``properties/memory_mb``.'),
    Key(protocol.II_MODE, '``service`` or ``job``', '``service``', WHO_TENANT,
        '``service`` runs until undeploy. ``job`` runs to completion.'),
    Key(protocol.II_COMMAND, 'JSON list of strings', 'the image\'s',
        WHO_TENANT,
        'Replaces the image\'s ENTRYPOINT and CMD (``docker run '
        '--entrypoint``). A NUL byte in an argument is refused at '
        'validate.'),
    Key(protocol.II_ARGS, 'JSON list of strings', 'the image\'s CMD',
        WHO_TENANT,
        'Replaces the image\'s CMD and keeps its ENTRYPOINT, as '
        '``docker run IMAGE ARGS`` does: an official image\'s '
        '``docker-entrypoint.sh`` still runs. ``[]`` runs the ENTRYPOINT '
        'without arguments. Refused at validate with '
        '``container_command`` (set one), or when not a JSON list of '
        'strings without NUL bytes.'),
    Key(protocol.II_ENV, 'JSON object', None, WHO_TENANT,
        'Entries laid over the image\'s Env.'),
    Key(protocol.II_WALLTIME, 'duration', None, WHO_TENANT,
        'The longest the workload may run: seconds, ``90m``, ``2h``, '
        '``1d`` or ``HH:MM:SS``. The agent then stops it as ``undeploy`` '
        'does; the run ends ``failed`` with ``walltime_exceeded: true`` '
        'and an ``error`` that says so. Refused at validate when it is '
        'not a duration or not more than 0.'),
    Key(protocol.II_PRIVILEGED, 'boolean',
        '``true``; ``false`` where the operator sets '
        '``allow_privileged = false``', WHO_TENANT,
        '``true``: the container shares the machine. ``false``: it is '
        'confined (see :ref:`container-on-the-node`). ``true`` is refused '
        'at validate where the operator does not allow it.'),
    Key(protocol.II_RESULTS, 'JSON list of paths', None, WHO_TENANT,
        'Files (absolute paths inside the container, at most 64) that the '
        'conductor keeps with the report when the workload has exited, at '
        'most ``[container]results_max_mb`` (16) MiB together. They must '
        'be in the image\'s own directories (``/results``, '
        '``/work``, ``/tmp``...): ``/dev``, ``/proc`` and ``/sys`` are '
        'mounts of the container, gone once it exits, and are refused at '
        'validate, as are relative paths and ``..``.'),
    Key(protocol.II_KERNEL_PROFILE, '``gcov``', None, WHO_OPERATOR,
        'A profiling run: the node must boot a kernel of the gcov build '
        'variant (``kernel_build`` vendor method, set as ``kernel`` and '
        '``kernel_modules``). The agent resets the kernel\'s gcov '
        'counters just before the workload starts; once it has exited the '
        'conductor keeps every ``.gcda`` file (at most '
        '``[container]kernel_profile_max_mb`` MiB) with the report, the '
        'input of a ``pgo`` build. Refused at validate for a tenant\'s '
        'deploy and as an image property: the profile counts everything '
        'the kernel did.'),
    Key(protocol.II_GROUP, 'name', None, WHO_OPERATOR,
        'A run group: the nodes deployed with the same name (in the same '
        'project, or by the operator) form one job of '
        '``container_group_size`` nodes. No workload starts until every '
        'member has staged its root; then all start, each with '
        '``BMC_RANK``, ``BMC_SIZE``, a hostfile and the members in '
        '``/etc/hosts``. Lowercase letters, digits and ``-``, at most '
        '%d characters (host names are ``NAME-RANK``). The node needs a '
        'port on ``[container]group_physical_network`` with '
        '``extra/bmc_group_address``. Set in ``instance_info``, or by a '
        'tenant as a property of the servers of one Nova request '
        '(``--min N --max N --config-drive true --property '
        'container_group=NAME``); refused as an image property (see '
        ':doc:`/admin/run-groups`).'
        % protocol.GROUP_NAME_MAX),
    Key(protocol.II_GROUP_SIZE, 'integer', None, WHO_OPERATOR,
        'How many nodes the run group has: 2 to '
        '``[container]group_max_size`` (32).'),
    Key(protocol.II_GROUP_LAUNCHER, '``ssh`` or ``none``', '``ssh``',
        WHO_OPERATOR,
        '``ssh``: the command runs on rank 0 only, once every other '
        'member\'s sshd (the image\'s ``/usr/sbin/sshd``, on its group '
        'address) accepts; the group\'s own keys let rank 0 in '
        '(``mpiexec -f $BMC_HOSTFILE`` works as is). ``none``: every '
        'member runs the command.'),
    Key(protocol.II_RLIMITS, 'JSON object',
        '``memlock`` unlimited, ``nofile`` soft 1024, hard 1048576',
        WHO_TENANT,
        'Process limits laid over the HPC defaults: ``{"stack": '
        '"unlimited", "nofile": {"soft": 4096, "hard": 65536}}``. The '
        'names are those of ``setrlimit`` without ``RLIMIT_``; a value is '
        'a number, ``"unlimited"`` or ``{"soft", "hard"}``. An unknown '
        'name, a negative value or a soft limit above the hard one is '
        'refused at validate, naming it.'),
    Key(protocol.II_TUNABLES, 'profile name or JSON object', None, WHO_TENANT,
        'Kernel tunables for the run: a profile name (``thp-never``) or '
        'a JSON object of knobs, optionally naming a profile to start '
        'from (``{"profile": "hpc-compute", "hugepages": 512}``). See '
        ':doc:`/admin/tunables`.'),
    Key(protocol.II_TUNABLES_STRICT, 'boolean', '``false``', WHO_TENANT,
        '``true``: a knob the machine supports but that did not apply '
        'fails the deploy before the workload starts, and ``last_error`` '
        'names each such knob. ``false``: it is reported (``ok: false`` '
        'with its ``error``) and the run goes on.'),
    Key('kernel', 'URL', 'the node\'s ``deploy_kernel``', WHO_OPERATOR,
        'The kernel, given as any URL Ironic accepts: ``http(s)://``, '
        '``file://`` under ``[conductor]file_url_allowed_paths``, a Glance '
        'image, or ``oci://...@sha256:``. A tenant names a kernel with '
        'the image property ``kernel_id``.'),
    Key('ramdisk', 'URL', 'the node\'s ``deploy_ramdisk``', WHO_OPERATOR,
        'The agent ramdisk, as a URL as for ``kernel``. Always the '
        'operator\'s.'),
    Key('kernel_modules', 'URL', None, WHO_OPERATOR,
        'The modules initrd for ``kernel`` (a cpio of '
        '``/lib/modules/<version>``), unpacked over the agent ramdisk. '
        'For the default kernel, it defaults to '
        '``driver_info/container_kernel_modules``, then to '
        '``[container]default_kernel_modules``. A tenant names one with '
        'the image property ``ramdisk_id``.'),
    Key('kernel_append_params', 'string', None, WHO_OPERATOR,
        'As Ironic defines it (``%default%`` expands).'),
    Key(protocol.II_MEASURE_LINK, 'boolean', '``false``', WHO_OPERATOR,
        'Diagnostic: the agent first times a plain HTTP transfer of the '
        'artifact (the report\'s ``staging.raw_transfer_s``).'),
    Key(protocol.II_CONFIGDRIVE_OPTIONAL, 'boolean',
        '``[container]configdrive_optional`` (``false``)', WHO_OPERATOR,
        '``true``: a configdrive that is malformed or larger than '
        '``[container]configdrive_max_kb`` is left out, the run goes on '
        'without it and the report\'s ``configdrive`` says why. '
        '``false``: such a configdrive fails the deploy before the node '
        'is powered on (see :ref:`configdrive`).'),
    Key(protocol.II_UNIKERNEL, 'URL', None, WHO_OPERATOR,
        'The unikernel deploy interface only: the multiboot image iPXE '
        'boots with no agent (``http://``, ``https://``, ``file://``); '
        'see :doc:`/admin/unikernel`. Every key that needs the agent '
        '(``container_*``, ``kernel``, ``ramdisk``, ``kernel_modules``, a '
        'configdrive) is refused with it, and so is a tenant\'s deploy.'),
    Key(protocol.II_UNIKERNEL_ARGS, 'string', None, WHO_OPERATOR,
        'The unikernel\'s command line (at most 512 characters: letters, '
        'digits, spaces and ``= , . _ : / + -``), e.g. ``duration=5 '
        'repeat=3`` for the noise unikernel.'),
    Key(protocol.II_UNIKERNEL_TIMEOUT, 'seconds',
        '``[container]unikernel_timeout`` (900)', WHO_OPERATOR,
        'From power-on to the unikernel\'s end line on the console; then '
        'the run fails (its ``error`` says what the console showed) and '
        'the node is powered off.'),
    Key(protocol.II_NOISE_PROBE, 'seconds or JSON object', None, WHO_OPERATOR,
        'Runs the OS-noise probe (``bmc_noise_probe``) on the workload\'s '
        'CPUs before and after the tunables are applied, so the report '
        'shows what the profile changed: seconds per CPU (more than 0, at '
        'most 30), or an object with ``duration``, ``cpus`` and '
        '``threshold_us``.'),
)

#: Glance image properties that are not ``instance_info`` keys: a
#: tenant's boot files, each the UUID of a Glance image.
IMAGE_PROPERTY_KEYS = (
    Key('kernel_id', 'Glance image UUID', None, WHO_TENANT,
        'The kernel to boot (``--disk-format aki --container-format '
        'aki``); it becomes ``kernel``. A tenant\'s kernel runs the '
        'agent: such a deploy is as trusted as the node once its workload '
        'starts.'),
    Key('ramdisk_id', 'Glance image UUID', None, WHO_TENANT,
        'That kernel\'s modules initrd, a cpio of '
        '``/lib/modules/<version>`` (``--disk-format ari '
        '--container-format ari``); it becomes ``kernel_modules``, '
        'unpacked over the operator\'s agent ramdisk, and only with a '
        '``kernel_id``. Never the agent ramdisk itself.'),
)

ReportField = collections.namedtuple('ReportField', 'name type description')
ReportField.__doc__ = """One top-level field of a run report: ``name``,
the ``type`` of its value and a ``description``."""

#: The top-level fields of a run report (``run_report`` vendor method),
#: in the order the documentation lists them.
REPORT_FIELDS = (
    ReportField('version', 'integer',
                'The report format\'s version (%d).'
                % protocol.REPORT_VERSION),
    ReportField('deploy_id', 'string',
                'The run\'s id (a UUID); ``run_output`` takes it as '
                '``deploy_id`` for an earlier run of the node.'),
    ReportField('node', 'string', 'The node\'s UUID.'),
    ReportField('node_name', 'string or null', 'The node\'s name.'),
    ReportField('project_id', 'string or null',
                'The project the run is for: the node\'s lessee, else '
                'the project of the Nova instance holding a node without '
                'a lessee, else the node\'s owner; null for the '
                'operator\'s own run (ironic_bmc.ownership).  Its readers '
                'read the run, its output and its result files through '
                'the container runs API.'),
    ReportField('node_owner', 'string or null',
                'The node\'s owner project when the run began; its '
                'readers read the report too (not the output nor the '
                'result files of another project\'s run).'),
    ReportField('instance_uuid', 'string or null',
                'The instance (Nova server) of the run.'),
    ReportField('created', 'epoch seconds', 'When the run began.'),
    ReportField('state', 'string',
                '``deploying``, ``running``, ``exited`` (the workload '
                'ended), then one of the final states: ``finished`` (a '
                'job that ran to its end), ``undeployed`` (a run ended by '
                'undeploy) or ``failed``.'),
    ReportField('error', 'string or null',
                'Why the run failed, or what went wrong after the workload '
                'exited (its output refused, its walltime reached, a '
                'block that failed its integrity check).'),
    ReportField('image', 'string', 'The container image as given.'),
    ReportField('image_digest', 'string',
                'The digest of the manifest the run used.'),
    ReportField('rootfs', 'string',
                'The rootfs mode: ``ramfs``, ``stream`` or ``nfs``.'),
    ReportField('mode', 'string', '``service`` or ``job``.'),
    ReportField('kernel', 'string', 'The kernel booted.'),
    ReportField('ramdisk', 'string', 'The agent ramdisk booted.'),
    ReportField('kernel_modules', 'string or null',
                'The modules initrd unpacked over the agent ramdisk.'),
    ReportField('kernel_args', 'list',
                'The kernel arguments the tunables added (boot-time '
                'knobs); a unikernel run\'s command line, word by word.'),
    ReportField('warm', 'boolean',
                'True when the run reused the agent cleaning left up '
                '(fast track): no power action, no boot.'),
    ReportField('agent_up_for_s', 'number',
                'Warm and kexec runs: how long the reused agent had been '
                'up (since cleaning rebooted the node into it).'),
    ReportField('kexec', 'object',
                'kexec runs: what the warm agent loaded (``method``, '
                '``download_s``, ``load_s``, ``initrd_bytes``) before it '
                'jumped into the run\'s kernel; the ``boot`` section then '
                'starts with ``kexec_s`` instead of ``firmware_ipxe_s``.'),
    ReportField('cold_reason', 'string or null',
                'Cold and kexec runs: why the agent up was not reused as '
                'it was, or why the node was booted rather than reused '
                '(fast track off, no agent booted by cleaning, another '
                'kernel or kernel arguments, ...).'),
    ReportField('artifact', 'object',
                'The rootfs artifact: its ``format``, ``compression``, '
                '``size`` and ``unpacked_size``, ``digest``, '
                '``manifest_digest``, ``cache_key``, whether this run '
                '``built`` it and in how many ``build_seconds``, its '
                '``verity`` parameters, the image ``config``.'),
    ReportField('build_restarts', 'integer',
                'How many times the rootfs build was started again after '
                'it was lost (conductor restart or take-over).'),
    ReportField('stages', 'list',
                'Each stage is ``{"name", "start", "end"}`` (epoch '
                'seconds), in the order they happen: %s.'
                % ', '.join('``%s``' % s for s in protocol.STAGES)),
    ReportField('boot', 'object',
                'Where ``agent-up`` went (see :ref:`report-boot`).'),
    ReportField('staging', 'object',
                'How the root was staged: ``rootfs``, ``verify`` '
                '(``dm-verity`` or ``sha256``), ``bytes`` and '
                '``bytes_before_start``, ``download_s``, ``mount_s``, '
                '``raw_transfer_s`` (with ``container_measure_link``); in '
                '``nfs`` mode ``nfs_export`` and ``nfs_mount_s``.'),
    ReportField('stream', 'object',
                '``stream`` mode only: how long after the workload\'s '
                'start the image was fully local '
                '(``fully_local_after_start_s``), how long the background '
                'copy took (``background_fetch_s``), what was fetched '
                '(``bytes_fetched``), and ``not_local_reason`` when the '
                'cache is smaller than the image.'),
    ReportField('tunables', 'object',
                'For each knob, ``requested``, ``previous``, ``actual`` '
                'and ``ok``; a knob the machine lacks is ``supported: '
                'false`` with the ``reason``, one that did not apply has '
                'its ``error``. The NodeOS partitions add ``at_start`` '
                '(see :doc:`/admin/tunables`).'),
    ReportField('noise', 'object',
                'The OS-noise probe\'s results: ``before-tunables`` and '
                '``after-tunables`` (``container_noise_probe``), '
                '``service-<time>`` (the ``bmc_noise_probe`` service '
                'step).'),
    ReportField('configdrive', 'object',
                'The deploy\'s configdrive, when it had one: ``used: '
                'true`` with its ``bytes`` (the ISO, unpacked), '
                '``sha256``, ``file_count``, ``files`` (the first of their '
                'paths) and ``public_keys`` (how many meta_data.json '
                'holds), and ``node``: what the agent did (``files`` '
                'extracted, ``authorized_keys`` added, the loop '
                '``device``, ``seconds``); or ``used: false`` with the '
                '``reason`` it was left out '
                '(``container_configdrive_optional``).'),
    ReportField('workload_exit_code', 'integer or null',
                'The workload\'s exit code, once it exited.'),
    ReportField('kind', 'string',
                '``unikernel`` for a run of the unikernel deploy '
                'interface; absent for a container run.'),
    ReportField('unikernel', 'object',
                'A unikernel run\'s console: whether its ``booted`` line '
                'came, its ``errors`` lines, how many protocol lines it '
                'broke (``bad_lines``, not used) and whether the console '
                'file was rotated during the run (``console_restarted``).'),
    ReportField('output_tail', 'string',
                'The last %d bytes of the workload\'s stdout and stderr.'
                % protocol.OUTPUT_TAIL_BYTES),
    ReportField('output', 'object',
                'The kept output: how many bytes came (``bytes``), how '
                'many were kept (``kept``) and dropped (``dropped``, '
                '``complete``), its ``sha256``; or the ``error`` that kept '
                'it back. The output itself comes from ``run_output``.'),
    ReportField('results', 'object',
                'Each file of ``container_results`` with its ``size`` and '
                '``sha256``, or the ``error`` that kept it back (not '
                'found, not a regular file, past the bound).'),
    ReportField('kernel_profile', 'object',
                'A profiling run\'s kernel profile (``container_kernel_'
                'profile``): ``method``, the ``files`` and ``bytes`` of '
                'its ``.gcda`` files, their tar\'s ``sha256``, the '
                '``kernel_build`` they were counted on, the kernel\'s '
                '``uname_v`` and the node\'s ``machine`` (``cpu_model``, '
                '``hypervisor``, ``clocksource``, ``emulated``: QEMU TCG, '
                'where no gain can be measured); or the ``error`` that '
                'kept it back.'),
    ReportField('stop', 'object',
                'How the workload was ended: ``reason`` (%s), ``signal``, '
                '``grace``, ``killed`` (whether the ``SIGKILL`` was '
                'needed), ``seconds``.'
                % ', '.join('``%s``' % r for r in protocol.STOP_REASONS)),
    ReportField('walltime_exceeded', 'boolean',
                '``true`` when the agent ended the workload at its '
                '``container_walltime``.'),
    ReportField('energy', 'object',
                'The BMC\'s power readings over the run: '
                '``bmc_joules_run`` and ``bmc_joules_workload`` (without '
                'firmware, boot and shutdown), ``bmc_samples``, '
                '``period_s``, ``method``, and ``rapl`` (RAPL joules for '
                'the workload window, or the reason they are absent); '
                '``available: false`` with the ``reason`` when the BMC '
                'gave none (``rapl`` is still there), ``complete: false`` '
                'after a take-over; a node without a BMC (Wake-on-LAN) has '
                '``bmc: "unavailable: no BMC (Wake-on-LAN node)"`` and '
                '``in_band_only: true`` (see :doc:`/admin/energy`).'),
    ReportField('group', 'object',
                'A run group member\'s: ``name``, ``id`` (the same in '
                'every member\'s report), ``rank``, ``size``, '
                '``launcher``, ``members`` (``rank``, ``node``, '
                '``node_name``, ``deploy_id``, ``hostname``, '
                '``address``), ``barrier`` (``staged_at``, '
                '``released_at``, ``waited_s``), ``state`` and, once the '
                'group has ended, ``ended_by`` (the ``rank``, ``node`` and '
                '``reason`` of the member that ended it; ``ok``: it ended '
                'well). The ``run_group`` vendor method aggregates the '
                'members\' reports.'),
    ReportField('takeovers', 'list',
                'The conductors that took the node over during the run: '
                '``{"conductor", "time"}``.'),
)
