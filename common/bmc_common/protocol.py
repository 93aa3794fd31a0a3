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

"""The boot protocol between the conductor plugin and the node side.

This is the one place that names what crosses from ``ironic_bmc`` (the
conductor) to the node (the IPA hardware manager in
``ipa_hardware_manager``, or any initrd that follows the protocol):
artifact formats, the in-band step names and their arguments, kernel
arguments, and the fields of the run report.

It must stay importable with the standard library only: the agent ramdisk
installs this package without the conductor's dependencies.
"""

import base64
import collections
import gzip

# --- rootfs artifacts --------------------------------------------------------

#: A read-only EROFS image, mounted from RAM with a tmpfs overlay on top.
FORMAT_EROFS = 'erofs'
#: A read-only squashfs image, mounted from RAM with a tmpfs overlay.
FORMAT_SQUASHFS = 'squashfs'
#: An uncompressed tarball, unpacked into tmpfs (the slow baseline).
FORMAT_TAR = 'tar'
ARTIFACT_FORMATS = (FORMAT_EROFS, FORMAT_SQUASHFS, FORMAT_TAR)
#: The unpacked root as a directory on the conductor host, exported
#: read-only over NFS (``nfs`` mode); never sent over HTTP.
FORMAT_TREE = 'tree'

# --- instance_info keys (the user contract) ----------------------------------

II_IMAGE = 'container_image'
II_ROOTFS = 'container_rootfs'
II_COMMAND = 'container_command'
II_ENV = 'container_env'
II_MODE = 'container_mode'
II_TUNABLES = 'container_tunables'
#: A knob that did not apply fails the deploy (default: reported only).
II_TUNABLES_STRICT = 'container_tunables_strict'
#: Run the OS-noise probe before and after the tunables: seconds per run.
II_NOISE_PROBE = 'container_noise_probe'
#: Diagnostic: the agent first times a plain transfer of the artifact.
II_MEASURE_LINK = 'container_measure_link'
#: stream mode: RAM the node's block cache may use (bytes, "512M", "25%").
II_STREAM_CACHE = 'container_stream_cache'
#: The longest the workload may run (seconds, "90m", "HH:MM:SS").
II_WALLTIME = 'container_walltime'
#: false: the container is confined (Docker's defaults) instead of
#: sharing the machine.
II_PRIVILEGED = 'container_privileged'
#: Process rlimits over the HPC defaults (bmc_common.oci.DEFAULT_RLIMITS).
II_RLIMITS = 'container_rlimits'
#: Files (absolute paths inside the container) returned with the report.
II_RESULTS = 'container_results'

ROOTFS_RAMFS = 'ramfs'
ROOTFS_NFS = 'nfs'
ROOTFS_STREAM = 'stream'
ROOTFS_MODES = (ROOTFS_RAMFS, ROOTFS_NFS, ROOTFS_STREAM)
#: Modes the node side can bring up today.
ROOTFS_MODES_SUPPORTED = (ROOTFS_RAMFS, ROOTFS_NFS, ROOTFS_STREAM)

MODE_SERVICE = 'service'
MODE_JOB = 'job'
WORKLOAD_MODES = (MODE_SERVICE, MODE_JOB)

# --- in-band steps run by the agent ------------------------------------------
# All of them are deploy steps of the ``deploy`` interface in IPA terms,
# priority 0 on the agent side: the conductor asks for them explicitly.

STEP_STAGE_ROOTFS = 'bmc_stage_rootfs'
"""Stage the rootfs artifact.

args: ``url`` (HTTP URL of the artifact), ``digest`` (``sha256:<hex>``),
``format`` (one of ARTIFACT_FORMATS), ``size`` (bytes), ``rootfs`` (one of
ROOTFS_MODES), ``measure_link`` (bool, diagnostic).  Returns ``{"root":
<path>, "bytes": int, "timings": {"download", "mount"[, "raw_transfer"]},
"stages": [...]}`` (seconds).

In ``nfs`` mode there is no artifact URL: ``nfs`` is ``{"server": host,
"port": int, "export": pseudo path, "options": mount options}``, and the
node mounts the export read-only under a tmpfs overlay.  The result then
has ``"bytes": 0`` and ``"nfs": {"export": "host:/path", "mount": s}``.

With ``verity`` ``{"root_hash", "url", "size"}`` (``ramfs``, ``stream``)
the artifact's blocks are checked by dm-verity when read instead of by
``digest`` first.  ``stream`` mode needs it, and takes ``stream``
``{"cache_max": bytes|None, "rate": bytes/s}``: only the hash tree is
downloaded before the mount; the result's ``"stream"`` section names the
NBD device and whether the background fetch runs.
"""

STEP_START_WORKLOAD = 'bmc_start_workload'
"""Start the workload in the staged root under an OCI runtime.

args: ``command`` (list of str, required), ``env`` (dict), ``workdir``
(str), ``user`` (``uid[:gid]`` or name), ``mode`` (one of WORKLOAD_MODES),
``stop_signal`` (the image's StopSignal), ``walltime`` (seconds),
``privileged`` (bool, default true), ``rlimits`` (see
``bmc_common.oci.parse_rlimits``).  Returns ``{"pid": int, "started":
float}``.
"""

STEP_WORKLOAD_STATUS = 'bmc_workload_status'
"""Report the workload state.  Arg ``notify_exit`` (bool): the conductor
accepts the agent's heartbeats again, and the agent sends one when the
workload ends on its own (not on a requested stop).

Returns ``{"state": "running"|"exited"|"absent", "exit_code": int|None,
"output_tail": str, "stages": [...]}``; in ``stream`` mode also
``"stream": {"bytes", "size", "started", "fully_local_at", "cached_bytes",
"error", ...}``, the background fetch so far (epoch seconds).
"""

STEP_STOP_WORKLOAD = 'bmc_stop_workload'
"""Stop the workload: its StopSignal, then SIGKILL to its whole cgroup
after ``grace`` seconds; ``reason`` (one of STOP_REASONS) is recorded.
Returns the workload status, whose ``stop`` is ``{"reason", "signal",
"grace", "killed", "seconds", "requested"}``."""

STEP_QUIET_AGENT = 'bmc_quiet_agent'
"""The deploy is over: the agent stops heartbeating (the conductor polls
it for the workload's state); no args.  Returns ``{"heartbeats":
"stopped"|"none"}``."""

STEP_COLLECT_OUTPUT = 'bmc_collect_output'
"""Return what the workload leaves: its kept output and the named result
files of the staged root.

args: ``results`` (absolute paths inside the container), ``max_bytes``
(the bound of all result files together).  Returns ``{"output": {"data",
"kept", "bytes", "dropped", "finished"}, "results": {path: {"data",
"size", "sha256"} | {"error"}}}``; ``data`` is gzip then base64.
"""

def pack(data):
    """A ``data`` field of the collect step: gzip, then base64."""
    return base64.b64encode(gzip.compress(data, 6)).decode('ascii')


def unpack(text):
    """The bytes of a ``data`` field of the collect step."""
    return gzip.decompress(base64.b64decode(text))


#: Where a container's own mounts are: files there are gone once it
#: exited, so they cannot be results.
# a list of mount points to refuse, not a file opened.
CONTAINER_MOUNTS = ('/proc', '/dev', '/sys', '/run', '/tmp')  # noqa: S108

STOP_REQUEST = 'request'
STOP_UNDEPLOY = 'undeploy'
#: Set by the agent itself when ``walltime`` has passed.
STOP_WALLTIME = 'walltime'
STOP_REASONS = (STOP_REQUEST, STOP_UNDEPLOY, STOP_WALLTIME)

TUNABLES_TRAIT_PREFIX = 'CUSTOM_BMC_TUNABLES_'
"""Traits (and deploy templates of the same name) that select a tunables
profile: ``thp-never`` -> ``CUSTOM_BMC_TUNABLES_THP_NEVER``."""

STEP_APPLY_TUNABLES = 'bmc_apply_tunables'
"""Apply run-time kernel tunables, check boot-time ones, read all back.

args: ``tunables`` (dict of knobs, see bmc_common.tunables.schema).
Returns ``{"tunables": {knob: {"requested", "previous", "actual", "ok",
"supported"[, "reason"][, "error"]}}, "stages": [tunables-applied]}``.
"""

STEP_NOISE_PROBE = 'bmc_noise_probe'
"""Measure OS noise on CPUs with a fixed-work loop; args ``cpus``,
``duration``, ``threshold_us``."""

# --- kernel arguments --------------------------------------------------------
# For initrds that follow the protocol without the agent (minimal busybox
# initrd).  The IPA-based ramdisk receives the same values as step args.

KARG_ARTIFACT_URL = 'bmc.rootfs_url'
KARG_ARTIFACT_DIGEST = 'bmc.rootfs_digest'
KARG_ARTIFACT_FORMAT = 'bmc.rootfs_format'
KARG_ROOTFS_MODE = 'bmc.rootfs'

# --- run report --------------------------------------------------------------

REPORT_VERSION = 1

# Stage names, in the order they happen.
STAGE_ARTIFACT_READY = 'artifact-ready'
STAGE_POWER_ON = 'power-on'
STAGE_BOOT_FILES_FETCHED = 'boot-files-fetched'
STAGE_AGENT_UP = 'agent-up'
STAGE_TUNABLES_APPLIED = 'tunables-applied'
STAGE_ROOTFS_STAGED = 'rootfs-staged'
STAGE_WORKLOAD_STARTED = 'workload-started'
STAGE_WORKLOAD_EXITED = 'workload-exited'
STAGE_POWERED_OFF = 'powered-off'
STAGES = (STAGE_ARTIFACT_READY, STAGE_POWER_ON, STAGE_BOOT_FILES_FETCHED,
          STAGE_AGENT_UP, STAGE_TUNABLES_APPLIED, STAGE_ROOTFS_STAGED,
          STAGE_WORKLOAD_STARTED, STAGE_WORKLOAD_EXITED, STAGE_POWERED_OFF)

#: How much of the workload's combined stdout/stderr the report keeps.
OUTPUT_TAIL_BYTES = 4096


def stage(name, start, end):
    """One entry of a report's ``stages`` list (times: UNIX seconds)."""
    if name not in STAGES:
        raise ValueError('unknown stage %r' % name)
    return {'name': name, 'start': round(start, 3), 'end': round(end, 3)}


def format_kernel_args(args):
    """Render a dict of protocol kernel arguments, sorted, space separated.

    Values must not contain whitespace; the protocol values are URLs,
    digests and names, so a value with whitespace is a caller bug.
    """
    parts = []
    for key in sorted(args):
        value = str(args[key])
        if not value or any(c.isspace() for c in value):
            raise ValueError('kernel argument %s has an empty value or '
                             'whitespace: %r' % (key, value))
        parts.append('%s=%s' % (key, value))
    return ' '.join(parts)


def parse_kernel_args(cmdline):
    """Return the protocol arguments (``bmc.*``) found in a command line."""
    found = {}
    for word in cmdline.split():
        key, sep, value = word.partition('=')
        if sep and key.startswith('bmc.'):
            found[key] = value
    return found


# --- what the keys and the report's fields mean ------------------------------
# The user contract, described once: the documentation's key and report
# references are generated from these tuples (doc/source/_exts/bmc_keys.py),
# and a unit test checks that every II_* constant has its entry.  Values
# are reStructuredText.

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
    Key(II_IMAGE, 'OCI reference', None, WHO_TENANT,
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
    Key(II_ROOTFS, '``ramfs``, ``stream`` or ``nfs``', '``ramfs``',
        WHO_TENANT,
        'How the node gets the container\'s root (see '
        ':doc:`/admin/rootfs-modes`).'),
    Key(II_STREAM_CACHE, 'bytes, size or percentage',
        'as much as ``ramfs`` could hold', WHO_TENANT,
        '``stream`` mode only: the RAM the node\'s block cache may use, '
        'as bytes, a size (``512M``, ``2G``) or a share of the node\'s '
        'RAM (``25%``). Refused at validate when it is not a size, less '
        'than 1 MiB, or more than ``properties/memory_mb``.'),
    Key(II_MODE, '``service`` or ``job``', '``service``', WHO_TENANT,
        '``service`` runs until undeploy. ``job`` runs to completion.'),
    Key(II_COMMAND, 'JSON list of strings', 'the image\'s', WHO_TENANT,
        'Replaces the image\'s ENTRYPOINT and CMD.'),
    Key(II_ENV, 'JSON object', None, WHO_TENANT,
        'Entries laid over the image\'s Env.'),
    Key(II_WALLTIME, 'duration', None, WHO_TENANT,
        'The longest the workload may run: seconds, ``90m``, ``2h``, '
        '``1d`` or ``HH:MM:SS``. The agent then stops it as ``undeploy`` '
        'does; the run ends ``failed`` with ``walltime_exceeded: true`` '
        'and an ``error`` that says so. Refused at validate when it is '
        'not a duration or not more than 0.'),
    Key(II_PRIVILEGED, 'boolean',
        '``true``; ``false`` where the operator sets '
        '``allow_privileged = false``', WHO_TENANT,
        '``true``: the container shares the machine. ``false``: it is '
        'confined (see :ref:`container-on-the-node`). ``true`` is refused '
        'at validate where the operator does not allow it.'),
    Key(II_RESULTS, 'JSON list of paths', None, WHO_TENANT,
        'Files (absolute paths inside the container, at most 64) that the '
        'conductor keeps with the report when the workload has exited, at '
        'most ``[container]results_max_mb`` (16) MiB together. They must '
        'be in the image\'s own directories (``/results``, '
        '``/work``...): ``/tmp``, ``/run``, ``/dev``, ``/proc`` and '
        '``/sys`` are mounts of the container, gone once it exits, and '
        'are refused at validate, as are relative paths and ``..``.'),
    Key(II_RLIMITS, 'JSON object',
        '``memlock`` unlimited, ``nofile`` 1048576', WHO_TENANT,
        'Process limits laid over the HPC defaults: ``{"stack": '
        '"unlimited", "nofile": {"soft": 4096, "hard": 65536}}``. The '
        'names are those of ``setrlimit`` without ``RLIMIT_``; a value is '
        'a number, ``"unlimited"`` or ``{"soft", "hard"}``. An unknown '
        'name, a negative value or a soft limit above the hard one is '
        'refused at validate, naming it.'),
    Key(II_TUNABLES, 'profile name or JSON object', None, WHO_TENANT,
        'Kernel tunables for the run: a profile name (``thp-never``) or '
        'a JSON object of knobs, optionally naming a profile to start '
        'from (``{"profile": "hpc-compute", "hugepages": 512}``). See '
        ':doc:`/admin/tunables`.'),
    Key(II_TUNABLES_STRICT, 'boolean', '``false``', WHO_TENANT,
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
    Key(II_MEASURE_LINK, 'boolean', '``false``', WHO_OPERATOR,
        'Diagnostic: the agent first times a plain HTTP transfer of the '
        'artifact (the report\'s ``staging.raw_transfer_s``).'),
    Key(II_NOISE_PROBE, 'seconds or JSON object', None, WHO_OPERATOR,
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
                'The report format\'s version (%d).' % REPORT_VERSION),
    ReportField('deploy_id', 'string',
                'The run\'s id (a UUID); ``run_output`` takes it as '
                '``deploy_id`` for an earlier run of the node.'),
    ReportField('node', 'string', 'The node\'s UUID.'),
    ReportField('node_name', 'string or null', 'The node\'s name.'),
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
                'knobs).'),
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
                % ', '.join('``%s``' % s for s in STAGES)),
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
    ReportField('workload_exit_code', 'integer or null',
                'The workload\'s exit code, once it exited.'),
    ReportField('output_tail', 'string',
                'The last %d bytes of the workload\'s stdout and stderr.'
                % OUTPUT_TAIL_BYTES),
    ReportField('output', 'object',
                'The kept output: how many bytes came (``bytes``), how '
                'many were kept (``kept``) and dropped (``dropped``, '
                '``complete``), its ``sha256``; or the ``error`` that kept '
                'it back. The output itself comes from ``run_output``.'),
    ReportField('results', 'object',
                'Each file of ``container_results`` with its ``size`` and '
                '``sha256``, or the ``error`` that kept it back (not '
                'found, not a regular file, past the bound).'),
    ReportField('stop', 'object',
                'How the workload was ended: ``reason`` (%s), ``signal``, '
                '``grace``, ``killed`` (whether the ``SIGKILL`` was '
                'needed), ``seconds``.'
                % ', '.join('``%s``' % r for r in STOP_REASONS)),
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
                'gave none, ``complete: false`` after a take-over (see '
                ':doc:`/admin/energy`).'),
    ReportField('takeovers', 'list',
                'The conductors that took the node over during the run: '
                '``{"conductor", "time"}``.'),
)
