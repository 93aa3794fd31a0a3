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
#: Replaces the image's CMD, keeps its ENTRYPOINT (``docker run IMAGE ARGS``).
II_ARGS = 'container_args'
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
#: A configdrive that is malformed or too large is left out (reported)
#: instead of failing the deploy (over [container]configdrive_optional).
II_CONFIGDRIVE_OPTIONAL = 'container_configdrive_optional'
#: Ironic's own instance_info key (not one of the container deploy's):
#: the configdrive of the deploy, Nova's or the one ``openstack baremetal
#: node deploy --config-drive`` gives.
CONFIGDRIVE_KEY = 'configdrive'
II_KERNEL_PROFILE = 'container_kernel_profile'
"""Operator-only: ``gcov`` profiles the kernel during the workload (the
node must boot a kernel of the gcov build variant); the run keeps the
profile, from which a pgo kernel build is made."""
KERNEL_PROFILES = ('gcov',)

# --- run groups: one job across several nodes --------------------------------

#: The group a deploy belongs to: a lowercase DNS label of at most
#: GROUP_NAME_MAX characters.  The nodes deployed with the same name in
#: the same project (or by the operator) and within one another's deploy
#: form one job.
II_GROUP = 'container_group'
#: How many nodes the group has (2 .. [container]group_max_size).
II_GROUP_SIZE = 'container_group_size'
#: How the ranks are launched: ``ssh`` (the command runs on rank 0; every
#: other member runs the image's sshd, keys the group made for itself
#: let rank 0 in) or ``none`` (every member runs the command).  ``ssh``
#: needs openssh-server in the image (GROUP_SSHD), the workload to run as
#: root, and a privileged container (sshd's privilege separation
#: chroots, which a confined container may not): the agent refuses the
#: start otherwise, on every rank.
II_GROUP_LAUNCHER = 'container_group_launcher'
GROUP_LAUNCHER_SSH = 'ssh'
GROUP_LAUNCHER_NONE = 'none'
GROUP_LAUNCHERS = (GROUP_LAUNCHER_SSH, GROUP_LAUNCHER_NONE)
GROUP_NAME_MAX = 48
GROUP_NAME_PATTERN = r'^[a-z0-9]([a-z0-9-]*[a-z0-9])?$'

#: What a member's container finds (paths inside its root).
GROUP_DIR = '/etc/bmc/group'
#: The members' host names, one per line, by rank.
GROUP_HOSTFILE = GROUP_DIR + '/hostfile'
GROUP_SSHD_CONFIG = GROUP_DIR + '/sshd_config'
#: The image's sshd (Debian's openssh-server), run by the ssh launcher.
GROUP_SSHD = '/usr/sbin/sshd'
GROUP_SSH_PORT = 22
#: The environment every member's command gets.
ENV_GROUP = 'BMC_GROUP'
ENV_GROUP_ID = 'BMC_GROUP_ID'
ENV_RANK = 'BMC_RANK'
ENV_SIZE = 'BMC_SIZE'
ENV_HOSTFILE = 'BMC_HOSTFILE'
#: The group network's interface and this member's address on it.
ENV_GROUP_IFACE = 'BMC_GROUP_IFACE'
ENV_GROUP_ADDRESS = 'BMC_GROUP_ADDRESS'
#: The members' host names, space-separated, by rank.
ENV_GROUP_HOSTS = 'BMC_GROUP_HOSTS'


def group_hostname(name, rank):
    """Member ``rank``'s host name in group ``name``."""
    return '%s-%d' % (name, rank)


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
``bmc_common.oci.parse_rlimits``), ``configdrive`` (``{"url", "sha256",
"size", "authorized_keys"}``: the ISO the conductor checked; its files
are bound read-only at CONFIGDRIVE_PATH, it is attached as a read-only
loop device labelled ``config-2``, and with ``authorized_keys`` the
public keys of its meta_data.json are added to the root's
``/root/.ssh/authorized_keys``), ``kernel_profile`` (``"gcov"``: the
kernel's gcov counters are reset just before the runtime starts; see
STEP_COLLECT_KERNEL_PROFILE).  Returns ``{"pid": int, "started":
float[, "configdrive": {"files", "bytes", "device", "authorized_keys",
"seconds"}][, "group": {"interface", "address", "peers_ready"}]}``.

``group`` (a run group member, see II_GROUP) is ``{"name", "id", "rank",
"size", "launcher", "interface": {"mac", "address" (``A.B.C.D/prefix``)},
"members": [{"rank", "hostname", "address", "host_key"}] (by rank; the
host key is the member's public ``ssh-ed25519`` key), "ssh":
{"private_key", "host_key" (this member's OpenSSH private keys,
unencrypted ed25519; the host key's public half is its member's
``host_key``), "authorized_keys" (the members' public keys)},
"peer_wait" (seconds)}``.  With the ``none`` launcher, ``ssh``, the
members' ``host_key`` and ``peer_wait`` may be absent or null.  The
result's ``address`` has its prefix.
The agent brings the interface with that MAC up with that address
alone (it refuses the interface of the node's default route), writes
GROUP_HOSTFILE, the members into ``/etc/hosts``, the group's SSH files,
sets the host name to the member's, and adds the ENV_GROUP*
variables.  With the ``ssh`` launcher rank 0 waits up to ``peer_wait``
for every other member's sshd before its command starts, and every other
member runs GROUP_SSHD (listening on its group address only) instead of
the command.
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

#: A workload status's ``state`` (STEP_WORKLOAD_STATUS, STEP_STOP_WORKLOAD):
#: it runs, it ended (``exit_code`` says how), or the agent knows of none
#: (the node rebooted, or the agent restarted without it).
WORKLOAD_RUNNING = 'running'
WORKLOAD_EXITED = 'exited'
WORKLOAD_ABSENT = 'absent'
WORKLOAD_STATES = (WORKLOAD_RUNNING, WORKLOAD_EXITED, WORKLOAD_ABSENT)

STEP_STOP_WORKLOAD = 'bmc_stop_workload'
"""Stop the workload: its StopSignal, then SIGKILL to its whole cgroup
after ``grace`` seconds; ``reason`` (one of STOP_REASONS) is recorded.
Returns the workload status, whose ``stop`` is ``{"reason", "signal",
"grace", "killed", "seconds", "requested"}``."""

STEP_KEXEC_LOAD = 'bmc_kexec_load'
"""A warm agent downloads a kernel and its initrds and loads them for
kexec.  Args: ``kernel`` ``{url, sha256, size}``, ``initrds`` (a list of
the same, joined in order), ``cmdline``.  Returns ``{"method",
"download_s", "load_s", "initrd_bytes"}``."""

STEP_KEXEC_EXEC = 'bmc_kexec_exec'
"""The agent stops heartbeating, answers, then jumps into the kernel
``bmc_kexec_load`` loaded (about a second later); no args.  Returns
``{"exec_in_s"}``."""

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

STEP_COLLECT_KERNEL_PROFILE = 'bmc_collect_kernel_profile'
"""Return the running kernel's gcov counters (reset when the workload
started with ``kernel_profile: "gcov"``): args ``max_bytes``.  Returns
``{"data", "sha256", "files", "bytes", "uname_v"}``: ``data`` (gzip, then
base64) is a tar of the ``.gcda`` files named by their paths under
``/sys/kernel/debug/gcov``, ``sha256`` that of the tar."""


def pack(data):
    """A ``data`` field of the collect step: gzip, then base64."""
    return base64.b64encode(gzip.compress(data, 6)).decode('ascii')


def unpack(text):
    """The bytes of a ``data`` field of the collect step."""
    return gzip.decompress(base64.b64decode(text))


#: Where a container's own mounts are: files there are gone once it
#: exited, so they cannot be results.  (/run and /tmp are the image's own
#: directories, as under Docker: what the workload leaves there stays.)
CONTAINER_MOUNTS = ('/proc', '/dev', '/sys')

#: Where the container sees the files of the configdrive (read-only):
#: ``openstack/latest/meta_data.json``, ``user_data``...
CONFIGDRIVE_PATH = '/run/bmc/config-drive'

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

# A run's ``state`` (its report's and its group's), in the order a run
# goes through them.  A run in one of RUN_FINAL_STATES never changes again.
RUN_DEPLOYING = 'deploying'
RUN_RUNNING = 'running'
#: The workload ended; the conductor collects what it left.
RUN_EXITED = 'exited'
#: A job that ran to its end.
RUN_FINISHED = 'finished'
#: A run ended by an undeploy.
RUN_UNDEPLOYED = 'undeployed'
RUN_FAILED = 'failed'
RUN_FINAL_STATES = (RUN_FINISHED, RUN_UNDEPLOYED, RUN_FAILED)
RUN_STATES = (RUN_DEPLOYING, RUN_RUNNING, RUN_EXITED) + RUN_FINAL_STATES

# Stage names, in the order they happen.
STAGE_ARTIFACT_READY = 'artifact-ready'
STAGE_POWER_ON = 'power-on'
STAGE_KEXEC = 'kexec'
STAGE_BOOT_FILES_FETCHED = 'boot-files-fetched'
STAGE_AGENT_UP = 'agent-up'
STAGE_TUNABLES_APPLIED = 'tunables-applied'
STAGE_ROOTFS_STAGED = 'rootfs-staged'
STAGE_WORKLOAD_STARTED = 'workload-started'
STAGE_WORKLOAD_EXITED = 'workload-exited'
STAGE_POWERED_OFF = 'powered-off'
STAGES = (STAGE_ARTIFACT_READY, STAGE_POWER_ON, STAGE_KEXEC,
          STAGE_BOOT_FILES_FETCHED,
          STAGE_AGENT_UP, STAGE_TUNABLES_APPLIED, STAGE_ROOTFS_STAGED,
          STAGE_WORKLOAD_STARTED, STAGE_WORKLOAD_EXITED, STAGE_POWERED_OFF)

#: The phases of a report's ``boot`` section (agent-up, phase by phase):
#: (phase, the mark it starts from, the mark it ends at), in boot order.
#: A kexec run's section starts with ``BOOT_PHASE_KEXEC`` (from
#: ``power_on``) instead of the first one.
BOOT_PHASES = (
    ('firmware_ipxe_s', 'power_on', 'kernel_start'),
    ('kernel_s', 'kernel_start', 'initramfs_unpack_start'),
    ('initramfs_unpack_s', 'initramfs_unpack_start', 'initramfs_unpacked'),
    ('kernel_to_init_s', 'initramfs_unpacked', 'init_start'),
    ('userspace_to_agent_s', 'init_start', 'agent_start'),
    ('agent_to_heartbeat_s', 'agent_start', 'first_heartbeat'),
    ('heartbeat_to_step_s', 'first_heartbeat', 'agent_up'),
)
BOOT_PHASE_KEXEC = 'kexec_s'

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

# --- unikernel boots (the ``unikernel`` deploy interface) --------------------
# A multiboot image booted by iPXE with no agent: what it does is read on
# the node's serial console, one line per event, each starting with
# UNIKERNEL_PREFIX.  unikernel/ (the noise probe) prints them.

II_UNIKERNEL = 'unikernel_image'
"""instance_info: URL (http(s)://, file://) of the multiboot image."""
II_UNIKERNEL_ARGS = 'unikernel_args'
"""instance_info: its command line (a string, at most 512 characters)."""
II_UNIKERNEL_TIMEOUT = 'unikernel_timeout'
"""instance_info: seconds from power-on to the end line (default
[container]unikernel_timeout); then the run fails and the node is
powered off."""

UNIKERNEL_PREFIX = 'bmc-unikernel: '
UNIKERNEL_BOOTED = 'booted'
#: ``result <one-line JSON>``: a bmc-noise result (see noise_cycles).
UNIKERNEL_RESULT = 'result'
UNIKERNEL_ERROR = 'error'
#: ``end rc=<int>``: the last line; the image powers the node off next.
UNIKERNEL_END = 'end'
#: The label of its noise results in the report's ``noise`` section.
NOISE_LABEL_UNIKERNEL = 'unikernel'
