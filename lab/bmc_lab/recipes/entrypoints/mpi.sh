#!/bin/sh
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
# The mpi recipe's workload: an MPI ping-pong (bmc-mpi-pingpong, built
# from pingpong.c in the image) under Debian's MPICH, BMC_SWEEP_SIZE
# timed round trips of BMC_MPI_BYTES between rank 0 and each other rank.
# The last line is one JSON object; "latency_us" (lower is better) is half
# the mean round trip (the mean over rank 0's peers).
#
# In a run group (BMC_SIZE set: the agent's ssh launcher runs this on
# rank 0 once every other member's sshd answers) one rank per member,
# in the order of BMC_HOSTFILE: Hydra starts rank 0 here (a fork, no
# ssh) and the others through the members' sshd; every byte, Hydra's and
# MPI's, goes over the group's NIC.  Alone, 2 ranks on this machine
# (shared memory, no NIC at all).  Either way a rank that ran elsewhere
# than it should fails the run.
#
# "bmc-mpi --rank ITERATIONS BYTES" is what mpiexec starts on every
# member: it pins UCX to that member's own group NIC, then runs the
# ping-pong (see group_nic).
#
# Environment: BMC_SWEEP_SIZE (round trips, 1000), BMC_MPI_BYTES (message
# bytes, 8), BMC_BENCH_SECONDS (bound of the run, 300); the agent's
# BMC_SIZE, BMC_HOSTFILE, BMC_GROUP_IFACE.  Bad input: a message on
# stderr and exit status 2.
set -u
PROG=bmc-mpi
. "${BMC_RECIPE_LIB:-/usr/local/lib/bmc-recipe}/common.sh"
PINGPONG=${BMC_MPI_PINGPONG:-/usr/local/bin/bmc-mpi-pingpong}
# What mpiexec starts on every member: this script, at its place in the
# image.
SELF=${BMC_MPI_SELF:-/usr/local/bin/bmc-mpi}

# group_nic: the NIC that holds this member's own address in the group,
# the address its host name has in /etc/hosts (the agent's entries).
# Each member finds its own: the group NIC's name may differ from node
# to node, and a rank that Hydra starts on another member inherits rank
# 0's environment, BMC_GROUP_IFACE included.
group_nic() {
    _host=$(hostname)
    _addr=$(getent ahostsv4 "$_host" | awk '{ print $1; exit }')
    [ -n "$_addr" ] || die "$_host: its host name has no IPv4 address (/etc/hosts)"
    _nic=$(ip -o -4 addr show to "$_addr/32" | awk '{ print $2; exit }')
    case $_nic in
        '') die "$_host: no NIC has its address $_addr (/etc/hosts)" ;;
        lo) die "$_host: its host name is $_addr, a loopback address, not the group's (/etc/hosts)" ;;
    esac
    echo "$_nic"
}

if [ "${1:-}" = --rank ]; then
    # One rank, as mpiexec starts it on each member.  UCX would take any
    # NIC: every node's first NIC has the same address (QEMU user
    # networking), and a peer told to connect there connects to itself
    # ("Destination is unreachable").  Only the group NIC, only TCP
    # (one rank per member: no shared memory between ranks), and "self"
    # for a rank to itself.
    shift
    if [ -n "${BMC_SIZE:-}" ]; then
        UCX_NET_DEVICES=$(group_nic) || exit 2
        UCX_TLS=tcp,self
    else
        # Alone: shared memory only, no NIC at all.
        UCX_TLS=self,sm
    fi
    export UCX_NET_DEVICES UCX_TLS
    exec "$PINGPONG" "$@"
fi

whole n BMC_SWEEP_SIZE 1000 1 1000000
whole bytes BMC_MPI_BYTES 8 0 16777216
whole limit BMC_BENCH_SECONDS 300 1 86400
need mpiexec timeout awk hostname getent ip
[ -x "$PINGPONG" ] || die "$PINGPONG is missing from the image"

me=$(hostname)
if [ -n "${BMC_SIZE:-}" ]; then
    mode=group
    whole ranks BMC_SIZE 2 2 4096
    hostfile=${BMC_HOSTFILE:-}
    iface=${BMC_GROUP_IFACE:-}
    [ -n "$hostfile" ] && [ -r "$hostfile" ] \
        || die "BMC_SIZE is set but BMC_HOSTFILE ('$hostfile') is not a readable file"
    [ -n "$iface" ] || die "BMC_SIZE is set but BMC_GROUP_IFACE is not"
    ip link show dev "$iface" >/dev/null 2>&1 \
        || die "BMC_GROUP_IFACE '$iface' is no interface of this node"
    # The hosts by rank: blank lines and comments are not members.
    hosts=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$hostfile")
    count=$(printf '%s\n' "$hosts" | grep -c .)
    [ "$count" = "$ranks" ] \
        || die "$hostfile names $count hosts, BMC_SIZE is $ranks"
    first=$(printf '%s\n' "$hosts" | sed -n 1p)
    [ "$first" = "$me" ] \
        || die "this is $me, but rank 0 of $hostfile is $first: the command runs on rank 0"
    # What the ranks will find (group_nic) must be what the agent says.
    nic=$(group_nic) || exit 2
    [ "$nic" = "$iface" ] \
        || die "$me's address is on $nic, not on the group NIC $iface (BMC_GROUP_IFACE)"
else
    mode=local
    ranks=2
    hosts=$(printf '%s\n%s' "$me" "$me")
fi

dir=$(mktemp -d /tmp/bmc-mpi.XXXXXX) || die "cannot make a directory in /tmp"
trap 'rm -rf "$dir"' EXIT
trap 'exit 143' TERM INT HUP

version=$(token "$(mpiexec --version 2>/dev/null | sed -n 's/^ *Version: *//p' | head -n 1)")
echo "$PROG: MPICH $version, $mode, $ranks ranks, $n round trips of $bytes bytes, $(nproc) CPUs"

if [ "$mode" = group ]; then
    # Every other member reachable over ssh first, all at once: Hydra
    # does not give up on a member whose ssh failed (it waits for its
    # rank until the timeout), and ssh's own message says why.
    i=0
    for host in $hosts; do
        i=$((i + 1))
        [ "$i" = 1 ] && continue
        timeout 30 ssh -o BatchMode=yes -o ConnectTimeout=20 "$host" true \
            </dev/null >"$dir/ssh.$i" 2>&1 &
        echo "$! $host $i" >>"$dir/ssh.pids"
    done
    while read -r pid host i; do
        wait "$pid" || die "cannot ssh to $host: $(tail -n 2 "$dir/ssh.$i" | tr '\n' ' ')"
    done <"$dir/ssh.pids"
    # -iface: Hydra's own connections (the proxies' back to mpiexec) go
    # to the group NIC's address, not to whatever the first NIC has.
    # -ppn 1: one rank per member, in the hostfile's order.
    set -- -f "$hostfile" -n "$ranks" -ppn 1 -iface "$iface"
else
    set -- -n 2 -hosts "$me"
fi
start=$(now)
timeout -k 10 "$limit" mpiexec "$@" "$SELF" --rank "$n" "$bytes" \
    >"$dir/out" 2>"$dir/err"
rc=$?
end=$(now)
cat "$dir/err" >&2
[ "$rc" != 124 ] && [ "$rc" != 137 ] \
    || die "the ping-pong did not finish within $limit s (BMC_BENCH_SECONDS)"
[ "$rc" = 0 ] || die "mpiexec failed (exit $rc): $(tail -n 3 "$dir/err" | tr '\n' ' ')"
grep -v '^{' "$dir/out"

# Each rank where it belongs: rank R on the hostfile's line R + 1.
got=$(sed -n 's/^bmc-mpi-pingpong: rank [0-9]* on //p' "$dir/out")
[ "$(printf '%s\n' "$got" | grep -c .)" = "$ranks" ] \
    || die "the ping-pong did not name its $ranks ranks"
rank=0
for want in $hosts; do
    name=$(printf '%s\n' "$got" | sed -n "$((rank + 1))p")
    [ "$name" = "$want" ] || die "rank $rank ran on $name, not on $want"
    rank=$((rank + 1))
done

result=$(grep '^{' "$dir/out" | tail -n 1)
case $result in
    '{'*'"latency_us": '*'}') ;;
    *) die "no result from the ping-pong" ;;
esac
# Ours first: "latency_us" stays the last key.
printf '{"metric": "latency_us", "mode": "%s", "mpich": "%s", "seconds": %s, %s\n' \
    "$mode" "$version" "$(seconds "$start" "$end")" "${result#\{}"
