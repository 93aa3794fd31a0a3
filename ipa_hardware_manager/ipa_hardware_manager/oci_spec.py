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

"""The OCI runtime spec (``config.json``) of the node's workload.

The workload runs under an OCI runtime (crun) from a spec written here
from the image config and the run's arguments.  Two shapes:

* privileged (the default): the container *is* the machine.  It shares
  the node's network, IPC and UTS; it sees every device (a bind of the
  node's devtmpfs, so devices that appear later are there too), has every
  capability, may write ``/sys`` and ``/proc/sys`` and load modules.  It
  gets its own mount and PID namespaces only, so that its ``/dev/shm``
  and ``/dev/mqueue`` are fresh, the agent's files are out of reach, and
  the end of its init ends every process it made.
* confined: Docker's defaults for a host-network container: its own IPC,
  UTS and cgroup namespaces, the default devices, a read-only ``/sys``,
  masked ``/proc`` paths; Docker's capabilities but CAP_SYS_CHROOT (the
  root is a chroot: ``crun --no-pivot``) and CAP_NET_RAW (the network is
  the provisioning network); a seccomp filter that refuses what reaches
  beyond the container or remakes its mount view (:data:`SECCOMP_DENIED`,
  new user namespaces).

Both shapes give the process what ``docker run`` gives it (the
differences are the bare-metal defaults above, listed in the README's
"The container on the node"): ``/run`` and ``/tmp`` are the image's own
directories, not fresh mounts (an image may have put owned directories
there, ``/var/run/postgresql``); ``HOSTNAME`` is set and ``TERM`` is not
(there is no terminal); a ``user:group`` gets no supplementary groups;
the soft limit of open files is 1024 (:data:`bmc_common.oci.DEFAULT_RLIMITS`);
the workload's ``oomScoreAdj`` is 0, so the OOM killer weighs it as any
process and not as the agent, which protects itself.

Users are resolved as OCI runtimes do; files of the image are read with
symlinks resolved inside the root, never on the node.
"""

import os
import platform
import socket

from bmc_common import oci
from ipa_hardware_manager import container_root

#: runtime-spec version written; crun 1.8 implements 1.0.x.
OCI_VERSION = '1.0.2'

#: Capability numbers to names (linux/capability.h); the node's kernel
#: says how many it knows (/proc/sys/kernel/cap_last_cap).
CAPABILITIES = (
    'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH', 'CAP_FOWNER',
    'CAP_FSETID', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETPCAP',
    'CAP_LINUX_IMMUTABLE', 'CAP_NET_BIND_SERVICE', 'CAP_NET_BROADCAST',
    'CAP_NET_ADMIN', 'CAP_NET_RAW', 'CAP_IPC_LOCK', 'CAP_IPC_OWNER',
    'CAP_SYS_MODULE', 'CAP_SYS_RAWIO', 'CAP_SYS_CHROOT', 'CAP_SYS_PTRACE',
    'CAP_SYS_PACCT', 'CAP_SYS_ADMIN', 'CAP_SYS_BOOT', 'CAP_SYS_NICE',
    'CAP_SYS_RESOURCE', 'CAP_SYS_TIME', 'CAP_SYS_TTY_CONFIG', 'CAP_MKNOD',
    'CAP_LEASE', 'CAP_AUDIT_WRITE', 'CAP_AUDIT_CONTROL', 'CAP_SETFCAP',
    'CAP_MAC_OVERRIDE', 'CAP_MAC_ADMIN', 'CAP_SYSLOG', 'CAP_WAKE_ALARM',
    'CAP_BLOCK_SUSPEND', 'CAP_AUDIT_READ', 'CAP_PERFMON', 'CAP_BPF',
    'CAP_CHECKPOINT_RESTORE')
#: What Docker (moby's oci/caps/defaults.go) gives a container.
DEFAULT_CAPABILITIES = (
    'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD',
    'CAP_NET_RAW', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETFCAP', 'CAP_SETPCAP',
    'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE')
#: Dropped from Docker's set in a confined container: the workload runs
#: under ``crun run --no-pivot`` (the agent's root is the initramfs, which
#: pivot_root cannot leave), a chroot that CAP_SYS_CHROOT lets root leave;
#: and it shares the node's network namespace, the provisioning network,
#: where CAP_NET_RAW forges packets.
CONFINED_DROPPED = ('CAP_SYS_CHROOT', 'CAP_NET_RAW')
CONFINED_CAPABILITIES = tuple(c for c in DEFAULT_CAPABILITIES
                              if c not in CONFINED_DROPPED)
#: System calls a confined container may not make (its seccomp filter
#: answers EPERM): those that reach beyond the container (kernel modules,
#: kexec, keyrings, BPF, time, swap, reboot), those that leave or remake
#: its mount view (mount, pivot_root, chroot, namespaces, file handles),
#: as Docker's default profile does.
SECCOMP_DENIED = (
    'acct', 'add_key', 'bpf', 'chroot', 'clock_adjtime', 'clock_settime',
    'create_module', 'delete_module', 'finit_module', 'fsconfig', 'fsmount',
    'fsopen', 'fspick', 'get_kernel_syms', 'init_module', 'ioperm', 'iopl',
    'kexec_file_load', 'kexec_load', 'keyctl', 'lookup_dcookie', 'mount',
    'mount_setattr', 'move_mount', 'name_to_handle_at', 'nfsservctl',
    'open_by_handle_at', 'open_tree', 'perf_event_open', 'pivot_root',
    'query_module', 'quotactl', 'reboot', 'request_key', 'setns',
    'settimeofday', 'stime', 'swapoff', 'swapon', 'sysfs', '_sysctl',
    'umount', 'umount2', 'unshare', 'uselib', 'userfaultfd', 'ustat',
    'vm86', 'vm86old')
#: clone() with this flag (a new user namespace, in which the process
#: would hold every capability again) is refused too; clone3, whose flags
#: a filter cannot read, answers ENOSYS so that the C library falls back
#: to clone (as Docker's profile does).
CLONE_NEWUSER = 0x10000000
ENOSYS = 38
EPERM = 1
_SECCOMP_ARCHES = {
    'x86_64': ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'],
    'aarch64': ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM'],
}
#: Paths a confined container must not read or write (as Docker).
MASKED_PATHS = (
    '/proc/asound', '/proc/acpi', '/proc/kcore', '/proc/keys',
    '/proc/latency_stats', '/proc/timer_list', '/proc/timer_stats',
    '/proc/sched_debug', '/proc/scsi', '/sys/firmware',
    '/sys/devices/virtual/powercap')
READONLY_PATHS = ('/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys',
                  '/proc/sysrq-trigger')
#: The hostname of a confined container (its own UTS namespace).
CONFINED_HOSTNAME = 'bmc-workload'
#: The workload's ``oom_score_adj``: a process like any other.  The agent
#: lowers its own (:func:`oci_runtime.protect_agent`), and the workload,
#: started from it, would otherwise inherit that protection.
WORKLOAD_OOM_SCORE_ADJ = 0
#: Character devices a confined container may use (crun creates the
#: default nodes in its /dev tmpfs; these are the cgroup rules).
_DEFAULT_DEVICE_RULES = (
    (1, 3), (1, 5), (1, 7), (1, 8), (1, 9),   # null zero full random urandom
    (5, 0), (5, 1), (5, 2), (136, None),      # tty console ptmx pts/*
    (10, 200),                                # net/tun
)

DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

#: (Paths and users inside the image's root: container_root.)
SpecError = container_root.SpecError


def _capabilities(privileged, cap_last_cap):
    if privileged:
        caps = list(CAPABILITIES[:cap_last_cap + 1])
    else:
        caps = list(CONFINED_CAPABILITIES)
    return {'bounding': caps, 'effective': caps, 'permitted': caps}


def seccomp(machine=None):
    """The seccomp filter of a confined container (OCI ``linux.seccomp``)."""
    machine = machine or platform.machine()
    return {
        'defaultAction': 'SCMP_ACT_ALLOW',
        'architectures': list(_SECCOMP_ARCHES.get(machine, [])),
        'syscalls': [
            {'names': list(SECCOMP_DENIED), 'action': 'SCMP_ACT_ERRNO',
             'errnoRet': EPERM},
            {'names': ['clone'], 'action': 'SCMP_ACT_ERRNO',
             'errnoRet': EPERM,
             'args': [{'index': 0, 'value': CLONE_NEWUSER,
                       'valueTwo': CLONE_NEWUSER,
                       'op': 'SCMP_CMP_MASKED_EQ'}]},
            {'names': ['clone3'], 'action': 'SCMP_ACT_ERRNO',
             'errnoRet': ENOSYS},
        ]}


def _mounts(privileged, hugepages):
    nsd = ['nosuid', 'noexec', 'nodev']
    mounts = [{'destination': '/proc', 'type': 'proc', 'source': 'proc',
               'options': list(nsd)}]
    if privileged:
        # Not rbind: the node's own /dev/shm and /dev/mqueue stay out,
        # fresh ones are mounted over the bind below.  /dev/pts is the
        # node's: its /dev/ptmx (in the bind) allocates there.
        mounts += [
            {'destination': '/dev', 'type': 'bind', 'source': '/dev',
             'options': ['bind', 'nosuid']},
            {'destination': '/dev/pts', 'type': 'bind', 'source': '/dev/pts',
             'options': ['bind', 'nosuid', 'noexec']}]
    else:
        # crun fills its own /dev with the default devices and points
        # /dev/ptmx at the new devpts instance.
        mounts += [
            {'destination': '/dev', 'type': 'tmpfs', 'source': 'tmpfs',
             'options': ['nosuid', 'strictatime', 'mode=755',
                         'size=65536k']},
            {'destination': '/dev/pts', 'type': 'devpts', 'source': 'devpts',
             'options': ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666',
                         'mode=0620']}]
    mounts += [
        # No size: MPI's shared-memory transport may use it all.
        # Otherwise Docker's options (noexec too).
        # the container's own fresh tmpfs at /dev/shm.
        {'destination': '/dev/shm', 'type': 'tmpfs', 'source': 'shm',  # noqa: S108
         'options': ['nosuid', 'noexec', 'nodev', 'mode=1777']},
        {'destination': '/dev/mqueue', 'type': 'mqueue', 'source': 'mqueue',
         'options': list(nsd)},
    ]
    if hugepages:
        mounts.append({'destination': '/dev/hugepages', 'type': 'hugetlbfs',
                       'source': 'hugetlbfs',
                       'options': ['nosuid', 'nodev', 'mode=1770']})
    # The node's network namespace is shared, and a new sysfs cannot be
    # mounted without one of its own (EBUSY): /sys is a bind.
    if privileged:
        # With what is mounted under it: cgroup2, debugfs, tracefs, bpf.
        mounts.append({'destination': '/sys', 'type': 'bind',
                       'source': '/sys',
                       'options': ['rbind', 'nosuid', 'noexec', 'nodev',
                                   'rw']})
    else:
        # sysfs alone, read-only; the cgroup namespace's own cgroup2.
        mounts += [
            {'destination': '/sys', 'type': 'bind', 'source': '/sys',
             'options': ['bind', 'nosuid', 'noexec', 'nodev', 'ro']},
            {'destination': '/sys/fs/cgroup', 'type': 'cgroup',
             'source': 'cgroup', 'options': nsd + ['relatime', 'ro']}]
    # No mounts on /run and /tmp: as under Docker, they are the image's
    # (the root is the run's own copy, in RAM or an overlay's upper).
    return mounts


def _device_rules(privileged):
    if privileged:
        return [{'allow': True, 'access': 'rwm'}]
    rules = [{'allow': False, 'access': 'rwm'}]
    for major, minor in _DEFAULT_DEVICE_RULES:
        rule = {'allow': True, 'type': 'c', 'major': major, 'access': 'rwm'}
        if minor is not None:
            rule['minor'] = minor
        rules.append(rule)
    return rules


def _cpu_list(cpus):
    return ','.join(str(c) for c in sorted(cpus))


def build(root, command, env=None, workdir=None, user=None,
          privileged=True, rlimits=None, cpus=None, hugepages=False,
          cgroup_path='/bmc-workload', cap_last_cap=40, annotations=None,
          mounts=None, hostname=None, group_hostname=None):
    """The runtime spec of the workload as a dict (``config.json``).

    :param root: the staged root (the container's ``root.path``).
    :param env: variables over the defaults (PATH, HOME, HOSTNAME).
    :param hostname: the container's hostname (:func:`hostname_of`).
    :param group_hostname: a run group member's host name, which a
        confined container takes too.
    :param rlimits: ``container_rlimits`` (over the HPC defaults).
    :param cpus: the CPUs the workload owns (a cpuset), or None.
    :param hugepages: mount hugetlbfs at /dev/hugepages.
    :param mounts: OCI mounts over the defaults (the configdrive's).
    :param command: a non-empty list of strings, ``workdir`` an absolute
        path (the caller has checked both).
    :raises SpecError: naming what is wrong.
    """
    cwd = workdir or '/'
    if not os.path.isdir(container_root.resolve_in_root(root, cwd)):
        raise SpecError('workdir %s is not a directory in the image' % cwd)
    uid, gid, additional, home = container_root.resolve_user(root, user)
    try:
        limits = oci.parse_rlimits(rlimits)
    except ValueError as exc:
        raise SpecError('rlimits: %s' % exc) from None
    # No TERM: there is no terminal (Docker sets one only with -t).
    variables = {'PATH': DEFAULT_PATH, 'HOSTNAME': hostname_of(
        privileged, hostname, group_hostname), 'HOME': home,
        'container': 'bmc'}
    variables.update(env or {})
    process = {
        'terminal': False,
        'user': {'uid': uid, 'gid': gid},
        'args': list(command),
        'env': ['%s=%s' % kv for kv in variables.items()],
        'cwd': cwd,
        'capabilities': _capabilities(privileged, cap_last_cap),
        'rlimits': limits,
        'noNewPrivileges': False,
        'oomScoreAdj': WORKLOAD_OOM_SCORE_ADJ,
    }
    if additional:
        process['user']['additionalGids'] = additional
    namespaces = [{'type': 'pid'}, {'type': 'mount'}]
    if not privileged:
        namespaces += [{'type': 'ipc'}, {'type': 'uts'},
                       {'type': 'cgroup'}]
    resources = {'devices': _device_rules(privileged)}
    if cpus:
        resources['cpu'] = {'cpus': _cpu_list(cpus)}
    linux = {'namespaces': namespaces, 'cgroupsPath': cgroup_path,
             'resources': resources}
    if not privileged:
        linux['maskedPaths'] = list(MASKED_PATHS)
        linux['readonlyPaths'] = list(READONLY_PATHS)
        linux['seccomp'] = seccomp()
    spec = {
        'ociVersion': OCI_VERSION,
        'process': process,
        'root': {'path': root, 'readonly': False},
        'mounts': _mounts(privileged, hugepages) + list(mounts or ()),
        'linux': linux,
    }
    if not privileged:
        spec['hostname'] = hostname_of(False, group_hostname=group_hostname)
    if annotations:
        spec['annotations'] = {str(k): str(v) for k, v in annotations.items()}
    return spec


def hostname_of(privileged, node_hostname=None, group_hostname=None):
    """The container's hostname: a run group member's (``group_hostname``,
    which the agent gives the node too when it is privileged); else the
    node's when it shares the node's UTS namespace (privileged), else
    :data:`CONFINED_HOSTNAME`."""
    if group_hostname:
        return group_hostname
    if not privileged:
        return CONFINED_HOSTNAME
    return node_hostname or socket.gethostname()


def cap_last_cap(proc='/proc'):
    """The highest capability number the running kernel knows."""
    try:
        with open(os.path.join(proc, 'sys/kernel/cap_last_cap')) as f:
            return min(int(f.read()), len(CAPABILITIES) - 1)
    except (OSError, ValueError):
        return len(CAPABILITIES) - 1


def hugepages_configured(sys='/sys'):
    """Whether the node has reserved huge pages of any size."""
    base = os.path.join(sys, 'kernel/mm/hugepages')
    try:
        sizes = os.listdir(base)
    except OSError:
        return False
    for size in sizes:
        try:
            with open(os.path.join(base, size, 'nr_hugepages')) as f:
                if int(f.read()) > 0:
                    return True
        except (OSError, ValueError):
            continue
    return False
