#!/bin/bash
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
#
# A clean Debian 12 root for CI: what a fresh machine has, nothing the CI
# machine has.  Needs root.
#
#   tools/ci-root.sh build DIR
#       debootstrap (minbase) bookworm into DIR, with Python 3.11, pip and
#       git, apt sources for bookworm, -updates and -security, updated.
#   tools/ci-root.sh run [--private-net] [-e NAME=VALUE]... DIR SRC -- CMD...
#       git-clone the checkout SRC into DIR/root/src ("-": use the clone
#       already there), then run CMD as root in DIR, in /root/src, with a
#       clean environment, inside private mount and PID namespaces: when
#       CMD ends, every process it started is killed and every mount made
#       inside is gone.  The network namespace is the host's (127.0.0.1
#       services are reachable) unless --private-net gives it its own,
#       with only a loopback.  Exits with CMD's exit code.
#   tools/ci-root.sh clean DIR
#       remove DIR; refuses while anything is mounted under it or a run
#       uses it.
#
# Environment: CI_ROOT_MIRROR (http://deb.debian.org/debian),
# CI_ROOT_SECURITY_MIRROR (http://deb.debian.org/debian-security).
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
SUITE=bookworm
MIRROR=${CI_ROOT_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${CI_ROOT_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# A fresh Debian 12 machine as the README assumes it: Python 3.11, pip and
# git (pbr reads the project's version from git).  minbase has only the
# "required" packages; every real install also has the "important" ones,
# of which iproute2 (ip) and procps (ps, kill, pgrep) are the ones a
# setup script may reasonably use unchecked.  ca-certificates: HTTPS to
# PyPI.  Nothing else: whatever else the project needs, it must install.
INCLUDE=python3,python3-pip,git,ca-certificates,iproute2,procps
MARKER=.ci-root-built
LOCK=.ci-root.lock
CLEAN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

die() { echo "ci-root: $*" >&2; exit 2; }
say() { echo "ci-root: $*" >&2; }

usage() {
    sed -n '14,33p' "$SELF" | sed 's/^# \{0,1\}//'
}

need_root() {
    [ "$(id -u)" = 0 ] || die "must run as root"
}

# Mount points under $1 that any process on this machine sees, in any
# mount namespace (a run's init lives outside the chroot, so it shows
# them under DIR too).
mounts_under() {
    local dir=$1 f
    for f in /proc/self/mountinfo /proc/[0-9]*/mountinfo; do
        awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' \
            "$f" 2>/dev/null || true
    done | sort -u
}

# Loop devices backed by a file under $1.
loops_under() {
    command -v losetup >/dev/null || return 0
    losetup -n -O NAME,BACK-FILE 2>/dev/null | awk -v d="$1" \
        'index($2, d "/") == 1 { print $1 }' || true
}

# Loop devices are not namespaced: one that a run attached and did not
# detach (diskimage-builder failing half-way, say) outlives the run and
# pins the file it maps.  Detach those attached since $1 (a list of the
# devices then in use) whose backing file lay on a mount that no longer
# exists anywhere: the run's private mounts.
detach_dead_loops() {
    local before=$1 dev majmin file
    command -v losetup >/dev/null || return 0
    local mounted
    # (A process that exits between the glob and cat's open makes cat
    # fail; with pipefail that failed the whole run under set -e, after
    # every test had passed.  A gone process has no mounts to count.)
    mounted=$( { cat /proc/[0-9]*/mountinfo 2>/dev/null || true; } \
        | awk '{ print $3 }' | sort -u)
    while read -r dev majmin file; do
        [ -n "$dev" ] || continue
        grep -qxF "$dev" <<<"$before" && continue
        grep -qxF "$majmin" <<<"$mounted" && continue
        say "WARNING: $dev was left attached to $file (a file on a mount" \
            "of the run); detaching it"
        losetup -d "$dev" || say "WARNING: could not detach $dev"
    done < <(losetup -n -O NAME,BACK-MAJ:MIN,BACK-FILE 2>/dev/null || true)
}

abs_dir() {
    [ -n "$1" ] || die "no directory given"
    readlink -m "$1"
}

check_root_dir() {
    local dir=$1
    [ -f "$dir/$MARKER" ] || die "$dir is not a root built by '$0 build'"
}

# --- build -------------------------------------------------------------------

cmd_build() {
    [ $# = 1 ] || die "usage: $0 build DIR"
    need_root
    local dir
    dir=$(abs_dir "$1")
    case $dir in /|/usr|/var|/etc|/root|/home|/tmp|/var/tmp)
        die "refusing to build into $dir" ;; esac
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
        die "$dir exists and is not empty"
    fi
    if ! command -v debootstrap >/dev/null; then
        say "installing debootstrap on this machine"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q --no-install-recommends debootstrap \
            >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null && apt-get install -y -q \
                    --no-install-recommends debootstrap >/dev/null; }
    fi
    mkdir -p "$dir"
    local t0=$SECONDS
    say "debootstrap --variant=minbase --include=$INCLUDE $SUITE $dir $MIRROR"
    local log=$dir.debootstrap.log
    if ! debootstrap --variant=minbase --include="$INCLUDE" \
            "$SUITE" "$dir" "$MIRROR" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        [ -f "$dir/debootstrap/debootstrap.log" ] && \
            tail -n 30 "$dir/debootstrap/debootstrap.log" >&2
        die "debootstrap failed (log: $log)"
    fi
    rm -f "$log"
    say "debootstrap done in $((SECONDS - t0)) s"

    # apt sources as on an installed Debian 12 machine.
    rm -f "$dir/etc/apt/sources.list"
    cat >"$dir/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # Package scripts must not start daemons: there is no init here, and
    # a daemon would listen in the host's network namespace (nginx on
    # :80, docker-registry on :5000).  The host does the same.
    cat >"$dir/usr/sbin/policy-rc.d" <<'EOF'
#!/bin/sh
# ci-root: package scripts start no services in this root.
exit 101
EOF
    chmod 0755 "$dir/usr/sbin/policy-rc.d"
    if [ ! -s "$dir/etc/hosts" ]; then
        printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
            >"$dir/etc/hosts"
    fi
    # The local CAs of this site (Debian's place for them), e.g. a proxy
    # that re-signs HTTPS: any machine on this network has them, and
    # without them nothing reaches PyPI.  Nothing else of the host's
    # configuration (pip.conf, wheel caches, indexes) is copied.
    local cas=0 ca
    for ca in /usr/local/share/ca-certificates/*.crt; do
        [ -f "$ca" ] || continue
        install -m 0644 "$ca" "$dir/usr/local/share/ca-certificates/"
        cas=$((cas + 1))
    done
    : >"$dir/$MARKER"

    t0=$SECONDS
    say "apt-get update && apt-get upgrade inside the root" \
        "($cas local CA certificate(s) from this machine)"
    enter "$dir" 0 -- /bin/sh -c \
        'export DEBIAN_FRONTEND=noninteractive;
         update-ca-certificates >/dev/null &&
         apt-get update -q >/dev/null && apt-get -y -q upgrade \
             </dev/null >/dev/null && apt-get clean' \
        || die "apt-get update/upgrade in the root failed"
    say "apt update/upgrade done in $((SECONDS - t0)) s"
    say "built $dir ($(du -sh --one-file-system "$dir" | cut -f1))"
}

# --- run ---------------------------------------------------------------------

# enter DIR PRIVATE_NET [NAME=VALUE...] -- CMD...: the namespaces and the
# chroot.  Holds a shared lock on DIR/.ci-root.lock for "clean" to see.
enter() {
    local dir=$1 private_net=$2
    shift 2
    local -a ns=(--mount --pid --fork --kill-child --propagation private)
    [ "$private_net" = 1 ] && ns+=(--net)
    cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
    # The host name is the host's (no UTS namespace); a Debian install
    # resolves it through /etc/hosts (sudo complains on every call if it
    # cannot, and diskimage-builder reads that complaint as output).
    local host
    host=$(hostname)
    if ! awk -v h="$host" '$1 !~ /^#/ { for (i = 2; i <= NF; i++)
            if ($i == h) f = 1 } END { exit !f }' "$dir/etc/hosts"; then
        printf '127.0.1.1\t%s\n' "$host" >>"$dir/etc/hosts"
    fi
    local loops_before
    loops_before=$(losetup -n -O NAME 2>/dev/null || true)
    local rc=0
    # The lock is inherited by everything in the run, so "clean" sees the
    # run until its last process is gone.
    exec 9>>"$dir/$LOCK"
    flock --shared --nonblock 9 || die "$dir is being removed"
    # Signals (a CI timeout signals the whole process group): unshare
    # ignores SIGINT/SIGTERM while it waits; the namespace's init (below)
    # traps them and exits, which kills the rest; this shell waits for
    # that, then checks for leftovers.
    trap 'say "signal: waiting for the run to stop"' TERM INT HUP
    unshare "${ns[@]}" -- "$SELF" __init "$dir" "$private_net" "$@" \
        || rc=$?
    trap - TERM INT HUP
    exec 9>&-
    detach_dead_loops "$loops_before"
    local left
    left=$(mounts_under "$dir")
    if [ -n "$left" ]; then
        say "WARNING: still mounted under $dir after the run:"
        echo "$left" >&2
    fi
    return $rc
}

# PID 1 of the new PID namespace, in the new mount namespace, outside the
# chroot.  Mounts what a booted machine has, then runs CMD in the chroot
# and returns its exit code.  When this process exits the kernel kills
# every other process of the namespace, and the mount namespace goes with
# the last of them.
cmd_init() {
    local dir=$1 private_net=$2
    shift 2
    local -a env=(HOME=/root USER=root LOGNAME=root SHELL=/bin/bash
                  PATH=$CLEAN_PATH)
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        env+=("$1")
        shift
    done
    [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || die "no command given"

    # Nothing mounted here may leak back to the host (unshare made the
    # tree private already; make sure).
    mount --make-rprivate /
    if [ "$private_net" = 1 ]; then
        ip link set lo up
    fi
    # The root is a mount point of its own, as / is on a machine.
    mount --bind "$dir" "$dir"
    mount -t proc -o nosuid,nodev,noexec proc "$dir/proc"
    mount -t sysfs -o nosuid,nodev,noexec sysfs "$dir/sys"
    # The host's device nodes (loop, kvm, net/tun, null...), but a devpts
    # and a /dev/shm of our own.
    mount --bind /dev "$dir/dev"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 \
        devpts "$dir/dev/pts"
    mount --bind "$dir/dev/pts/ptmx" "$dir/dev/ptmx"
    mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$dir/dev/shm"
    mount -t tmpfs -o nosuid,nodev,mode=0755 run "$dir/run"
    mkdir -m 1777 "$dir/run/lock"
    mount -t tmpfs -o nosuid,nodev,mode=1777 tmp "$dir/tmp"
    # No /sys/fs/cgroup: libvirtd then runs QEMU without cgroups, which
    # the lab does not need, and nothing of the run is left in the host's
    # cgroup tree.

    local child=
    on_signal() {
        trap - TERM INT HUP
        say "signal $1: stopping everything in the root"
        exit $((128 + $2))
    }
    trap 'on_signal TERM 15' TERM
    trap 'on_signal INT 2' INT
    trap 'on_signal HUP 1' HUP
    # In the background so that "wait" can be interrupted by the traps
    # (bash keeps stdin for it only if told to).
    exec 3<&0
    chroot "$dir" /usr/bin/env -i "${env[@]}" /bin/sh -c \
        'cd /root/src 2>/dev/null || cd /root; exec "$@"' ci-root "$@" \
        <&3 3<&- &
    child=$!
    exec 3<&-
    local rc=0
    # While waiting, bash also reaps the orphans that are re-parented to it.
    wait "$child" || rc=$?
    exit $rc
}

cmd_run() {
    need_root
    local private_net=0
    local -a env=()
    while [ $# -gt 0 ]; do
        case $1 in
            --private-net) private_net=1; shift ;;
            -e) [ $# -ge 2 ] || die "-e needs NAME=VALUE"
                case $2 in *=*) ;; *) die "-e needs NAME=VALUE" ;; esac
                env+=("$2"); shift 2 ;;
            -*) die "unknown option $1" ;;
            *) break ;;
        esac
    done
    [ $# -ge 4 ] && [ "$3" = -- ] || \
        die "usage: $0 run [--private-net] [-e NAME=VALUE]... DIR SRC -- CMD..."
    local dir src=$2
    dir=$(abs_dir "$1")
    shift 3
    check_root_dir "$dir"
    local dest=$dir/root/src
    if [ "$src" = - ]; then
        [ -d "$dest/.git" ] || die "$dest holds no clone yet"
    elif [ -e "$dest" ]; then
        die "$dest exists already (pass SRC '-' to run in it again)"
    else
        src=$(readlink -f "$src")
        git -C "$src" rev-parse --git-dir >/dev/null 2>&1 \
            || die "$src is not a git checkout"
        say "git clone $src -> $dest ($(git -C "$src" rev-parse --short HEAD))"
        git clone --quiet --no-hardlinks "$src" "$dest"
    fi
    enter "$dir" "$private_net" "${env[@]}" -- "$@"
}

# --- clean -------------------------------------------------------------------

cmd_clean() {
    [ $# = 1 ] || die "usage: $0 clean DIR"
    need_root
    local dir
    dir=$(abs_dir "$1")
    [ -e "$dir" ] || { rm -f "$dir.debootstrap.log"; return 0; }
    case $dir in /|/usr|/var|/etc|/root|/home|/tmp|/var/tmp)
        die "refusing to remove $dir" ;; esac
    if [ ! -f "$dir/$MARKER" ] && [ ! -d "$dir/debootstrap" ] \
            && [ -n "$(ls -A "$dir")" ]; then
        die "$dir does not look like a ci-root; not removing it"
    fi
    if [ -e "$dir/$LOCK" ] && ! flock --exclusive --nonblock "$dir/$LOCK" true
    then
        die "a run still uses $dir; not removing it"
    fi
    local left loops
    left=$(mounts_under "$dir")
    if [ -n "$left" ]; then
        echo "$left" >&2
        die "still mounted under $dir; not removing it"
    fi
    loops=$(loops_under "$dir")
    if [ -n "$loops" ]; then
        echo "$loops" >&2
        die "loop devices still use files under $dir; not removing it"
    fi
    # --one-file-system: even a mount appearing now is not crossed.
    rm -rf --one-file-system "$dir"
    rm -f "$dir.debootstrap.log"
    say "removed $dir"
}

case ${1:-} in
    build) shift; cmd_build "$@" ;;
    run) shift; cmd_run "$@" ;;
    clean) shift; cmd_clean "$@" ;;
    __init) shift; cmd_init "$@" ;;
    -h|--help|help) usage ;;
    *) usage >&2; exit 2 ;;
esac
