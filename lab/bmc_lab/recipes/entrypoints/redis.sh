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
# The redis recipe's workload (the BMC paper's THP experiment): a
# redis-server on 127.0.0.1 and redis-benchmark against it, SET then GET,
# BMC_SWEEP_SIZE requests each, then the server shut down.  The last line
# is one JSON object; "requests_per_second" (higher is better) is the
# rate of the whole run, SET and GET together: 2 N requests over the time
# the two tests took, i.e. the harmonic mean of "set_rps" and "get_rps".
#
# The server runs with --disable-thp no: Redis 7 otherwise turns THP off
# for its own process (prctl), and the kernel's THP setting, which is the
# experiment, would not apply to it.
#
# Environment: BMC_SWEEP_SIZE (requests per test, 20000), BMC_REDIS_CLIENTS
# (50), BMC_REDIS_KEYSPACE (random keys, 100000), BMC_REDIS_DATA (value
# bytes, 64), BMC_REDIS_PORT (6379), BMC_BENCH_SECONDS (bound of the
# benchmark, 300).  Bad input: a message on stderr and exit status 2.
set -u
PROG=bmc-redis
. "${BMC_RECIPE_LIB:-/usr/local/lib/bmc-recipe}/common.sh"

whole n BMC_SWEEP_SIZE 20000 1 100000000
whole clients BMC_REDIS_CLIENTS 50 1 10000
whole keyspace BMC_REDIS_KEYSPACE 100000 1 100000000
whole data BMC_REDIS_DATA 64 1 1048576
whole port BMC_REDIS_PORT 6379 1 65535
whole limit BMC_BENCH_SECONDS 300 1 86400
need redis-server redis-cli redis-benchmark timeout awk

dir=$(mktemp -d /tmp/bmc-redis.XXXXXX) || die "cannot make a directory in /tmp"
server=
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill "$server" 2>/dev/null
        wait "$server" 2>/dev/null
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

version=$(token "$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')")
echo "$PROG: redis $version, THP $(thp enabled) (defrag $(thp defrag)), $n requests per test, $clients clients, $(nproc) CPUs"

redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes \
    --save '' --appendonly no --dir "$dir" --daemonize no \
    --disable-thp no --logfile "$dir/redis.log" &
server=$!
# The server that answers must be this one (not another on the port).
answering() {
    redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null \
        | tr -d '\r' | sed -n 's/^process_id://p'
}
tries=0
until [ "$(answering)" = "$server" ]; do
    if ! kill -0 "$server" 2>/dev/null; then
        tail -n 5 "$dir/redis.log" >&2
        server=
        die "redis-server exited before it answered"
    fi
    tries=$((tries + 1))
    [ "$tries" -le 100 ] || die "redis-server did not answer within 10 s"
    sleep 0.1
done

start=$(now)
timeout "$limit" redis-benchmark -h 127.0.0.1 -p "$port" -c "$clients" \
    -n "$n" -r "$keyspace" -d "$data" -t set,get -q --csv \
    >"$dir/bench.csv" 2>"$dir/bench.err"
rc=$?
end=$(now)
[ "$rc" != 124 ] || die "redis-benchmark did not finish within $limit s (BMC_BENCH_SECONDS)"
[ "$rc" = 0 ] || die "redis-benchmark failed (exit $rc): $(tail -n 3 "$dir/bench.err")"
cat "$dir/bench.csv"

redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1
wait "$server"
rc=$?
server=
[ "$rc" = 0 ] || die "redis-server exited with status $rc on shutdown"

result=$(awk -F, -v n="$n" -v clients="$clients" -v keyspace="$keyspace" \
    -v data="$data" -v secs="$(seconds "$start" "$end")" \
    -v thp="$(thp enabled)" -v defrag="$(thp defrag)" \
    -v version="$version" -v cpus="$(nproc)" '
    function unq(s) { gsub(/"/, "", s); return s }
    unq($1) == "SET" { set = unq($2) + 0; set50 = unq($5) + 0 }
    unq($1) == "GET" { get = unq($2) + 0; get50 = unq($5) + 0 }
    END {
        if (set <= 0 || get <= 0) {
            print "no SET and GET rates in the output of redis-benchmark"
            exit
        }
        printf "{\"clients\": %d, \"cpus\": %d, \"data_bytes\": %d, " \
            "\"get_p50_ms\": %.3f, \"get_rps\": %.2f, \"keyspace\": %d, " \
            "\"metric\": \"requests_per_second\", \"n\": %d, " \
            "\"redis\": \"%s\", \"requests_per_second\": %.2f, " \
            "\"seconds\": %.3f, \"set_p50_ms\": %.3f, \"set_rps\": %.2f, " \
            "\"thp\": \"%s\", \"thp_defrag\": \"%s\"}\n", clients, cpus,
            data, get50, get, keyspace, n, version, 2 / (1 / set + 1 / get),
            secs, set50, set, thp, defrag
    }' "$dir/bench.csv")
case $result in
    '{'*) echo "$result" ;;
    *) die "$result" ;;
esac
