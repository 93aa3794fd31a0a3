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
# The web recipe's workload (the BMC paper's RFS experiment): Apache
# (Debian's apache2, mpm_event, its default configuration but listening on
# 127.0.0.1:8080 only) serving its static /index.html, and ApacheBench,
# "ab -n BMC_SWEEP_SIZE -c BMC_WEB_CONCURRENCY", without keep-alive, then
# Apache stopped.  The last line is one JSON object; "requests_per_second"
# (higher is better) is ab's mean rate.  A request that failed or was not
# answered 2xx fails the run.
#
# Environment: BMC_SWEEP_SIZE (requests, 5000), BMC_WEB_CONCURRENCY (4),
# BMC_BENCH_SECONDS (bound of the benchmark, 300).  Bad input: a message on
# stderr and exit status 2.
set -u
PROG=bmc-web
. "${BMC_RECIPE_LIB:-/usr/local/lib/bmc-recipe}/common.sh"
URL=http://127.0.0.1:8080/index.html

whole n BMC_SWEEP_SIZE 5000 1 100000000
whole conc BMC_WEB_CONCURRENCY 4 1 20000
whole limit BMC_BENCH_SECONDS 300 1 86400
[ "$conc" -le "$n" ] || die "BMC_WEB_CONCURRENCY ($conc) must not exceed BMC_SWEEP_SIZE ($n)"
need apache2ctl ab timeout awk

dir=$(mktemp -d /tmp/bmc-web.XXXXXX) || die "cannot make a directory in /tmp"
started=
# alive PID: a process that has not exited (a zombie has).
alive() {
    [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"
}
stop_apache() {
    pid=$(cat "$APACHE_PID_FILE" 2>/dev/null)
    apache2ctl stop >/dev/null 2>&1
    # apache2ctl returns once it has signalled the server: wait for it.
    tries=0
    while [ -n "$pid" ] && alive "$pid"; do
        tries=$((tries + 1))
        [ "$tries" -le 100 ] || return 1
        sleep 0.1
    done
}
cleanup() {
    [ -z "$started" ] || stop_apache
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

# Apache's directories, as apache2ctl reads them (APACHE_ENVVARS is
# apache2ctl's own way to name another file).  /run is the image's own
# in a container: make sure of what apache2ctl expects there.
set +u
. "${APACHE_ENVVARS:-/etc/apache2/envvars}"
set -u
mkdir -p "$APACHE_RUN_DIR" "$APACHE_LOCK_DIR" "$APACHE_LOG_DIR" \
    || die "cannot make Apache's directories"
version=$(token "$(apache2 -v 2>/dev/null | sed -n 's/^Server version: Apache\/\([^ ]*\).*/\1/p')")
rfs=$(cat /proc/sys/net/core/rps_sock_flow_entries 2>/dev/null || echo unknown)
lo_rps=$(cat /sys/class/net/lo/queues/rx-0/rps_cpus 2>/dev/null || echo unknown)
echo "$PROG: apache $version, $n requests, concurrency $conc, $(nproc) CPUs, rps_sock_flow_entries $rfs, lo rps_cpus $lo_rps"

started=1
if ! apache2ctl start >"$dir/start.log" 2>&1; then
    cat "$dir/start.log" >&2
    tail -n 5 "$APACHE_LOG_DIR/error.log" >&2 2>/dev/null
    die "apache2 did not start"
fi
pid=$(cat "$APACHE_PID_FILE" 2>/dev/null)
tries=0
until ab -q -n 1 "$URL" >/dev/null 2>&1; do
    # (Not another server on the port: this one runs.)
    [ -n "$pid" ] && alive "$pid" || die "apache2 is not running after its start"
    tries=$((tries + 1))
    [ "$tries" -le 100 ] || die "apache2 did not answer $URL within 10 s"
    sleep 0.1
done

timeout "$limit" ab -q -n "$n" -c "$conc" "$URL" >"$dir/ab.out" 2>"$dir/ab.err"
rc=$?
[ "$rc" != 124 ] || die "ab did not finish within $limit s (BMC_BENCH_SECONDS)"
[ "$rc" = 0 ] || die "ab failed (exit $rc): $(tail -n 3 "$dir/ab.err")"
cat "$dir/ab.out"

started=
stop_apache || die "apache2 did not stop within 10 s"

result=$(awk -v n="$n" -v conc="$conc" -v version="$version" \
    -v cpus="$(nproc)" -v rfs="$(token "$rfs")" -v lo_rps="$(token "$lo_rps")" '
    /^Complete requests:/ { complete = $3 }
    /^Failed requests:/ { failed = $3 }
    /^Non-2xx responses:/ { non2xx = $3 }
    /^Requests per second:/ { rps = $4 }
    /^Time taken for tests:/ { secs = $5 }
    /^Time per request:.*\(mean\)$/ { mean = $4 }
    /^Document Length:/ { doc = $3 }
    /^ *50% / { p50 = $2 }
    /^ *99% / { p99 = $2 }
    END {
        if (rps == "" || complete == "") {
            print "no rate in the output of ab"; exit
        }
        if (complete != n || failed + 0 != 0 || non2xx + 0 != 0) {
            printf "ab: %s of %d requests complete, %d failed, %d not " \
                "2xx\n", complete, n, failed, non2xx
            exit
        }
        printf "{\"apache\": \"%s\", \"concurrency\": %d, \"cpus\": %d, " \
            "\"document_bytes\": %d, \"lo_rps_cpus\": \"%s\", " \
            "\"mean_ms\": %.3f, \"metric\": \"requests_per_second\", " \
            "\"n\": %d, \"p50_ms\": %d, \"p99_ms\": %d, " \
            "\"requests_per_second\": %.2f, " \
            "\"rps_sock_flow_entries\": \"%s\", \"seconds\": %.3f}\n",
            version, conc, cpus, doc, lo_rps, mean, n, p50, p99, rps, rfs,
            secs
    }' "$dir/ab.out")
case $result in
    '{'*) echo "$result" ;;
    *) die "$result" ;;
esac
