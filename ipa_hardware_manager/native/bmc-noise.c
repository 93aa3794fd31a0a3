/*
 * Licensed under the Apache License, Version 2.0 (the "License"); you may
 * not use this file except in compliance with the License. You may obtain
 * a copy of the License at
 *
 *      http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
 * WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
 * License for the specific language governing permissions and limitations
 * under the License.
 *
 * bmc-noise: cycle-level OS noise on one CPU.
 *
 * Pinned to the CPU it is given, it reads the time-stamp counter in a
 * tight loop (rdtscp, or lfence;rdtsc;lfence where the CPU has no rdtscp)
 * for a fixed time.  Two consecutive readings normally differ by the cost
 * of one iteration (the floor, tens of cycles); a larger delta means the
 * CPU did something else: an interrupt, a softirq, another task, an SMI,
 * a hypervisor exit.  As in the IncludeOS thesis's measurements, deltas
 * of at least --threshold-cycles (150) are events, counted in the buckets
 * 150-400, 400-2000, 2000-6000 and over 6000 cycles and in a log2
 * histogram; their mean, standard deviation and 90 % confidence interval,
 * the events per second and the share of time lost (the sum of delta less
 * the floor) are computed by the measurement core it shares with the
 * bare-metal probe, bmc-noise-unikernel (noise-core.c, unikernel/ at the
 * top of the repository).  The counter's rate is measured against
 * CLOCK_MONOTONIC_RAW over the run.
 *
 * Output: one JSON object on stdout.  Exit 2 on bad arguments, 3 when
 * the CPU cannot be used (no TSC, not pinnable); the agent then falls back
 * to its Python probe.  x86-64 only; no allocation in the loop.
 */

#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "noise-core.h"

#define MAX_DURATION 30.0

static uint64_t kept[NOISE_MAX_KEPT];

static int has_tsc(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (d & (1u << 4));
}

static int has_rdtscp(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001, &a, &b, &c, &d) && (d & (1u << 27));
}

static inline uint64_t read_rdtscp(void)
{
    unsigned aux;
    return __rdtscp(&aux);
}

static inline uint64_t read_fenced(void)
{
    uint64_t t;
    _mm_lfence();
    t = __rdtsc();
    _mm_lfence();
    return t;
}

static double now_raw(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(const char *name)
{
    fprintf(stderr, "usage: %s --cpu N [--duration SECONDS] "
            "[--threshold-cycles N] [--cgroup DIR]\n", name);
}

/* Move this process into the cgroup v2 directory DIR (the workload's
 * partition owns CPUs the agent's own cgroup may not use). */
static int join_cgroup(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir)
            >= (int)sizeof(path))
        return -1;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fprintf(f, "%d\n", (int)getpid()) > 0;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int main(int argc, char **argv)
{
    long cpu = -1;
    double duration = 5.0;
    uint64_t threshold = 150;
    const char *cgroup = NULL;

    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (i + 1 >= argc) {
            usage(argv[0]);
            return 2;
        }
        errno = 0;
        if (!strcmp(argv[i], "--cpu"))
            cpu = strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--duration"))
            duration = strtod(argv[++i], &end);
        else if (!strcmp(argv[i], "--threshold-cycles"))
            threshold = strtoull(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--cgroup")) {
            cgroup = argv[++i];
            continue;
        } else {
            usage(argv[0]);
            return 2;
        }
        if (errno || !end || *end) {
            fprintf(stderr, "%s: bad value %s\n", argv[i - 1], argv[i]);
            return 2;
        }
    }
    if (cpu < 0 || cpu >= CPU_SETSIZE || !(duration > 0)
            || duration > MAX_DURATION || threshold < 1) {
        usage(argv[0]);
        return 2;
    }
    if (!has_tsc()) {
        fprintf(stderr, "this CPU has no time-stamp counter\n");
        return 3;
    }
    if (cgroup && join_cgroup(cgroup)) {
        fprintf(stderr, "cannot join the cgroup %s: %s\n", cgroup,
                strerror(errno));
        return 1;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set)) {
        fprintf(stderr, "cannot pin to CPU %ld: %s\n", cpu, strerror(errno));
        return 3;
    }
    int rdtscp = has_rdtscp();

    /* The counter's rate, roughly, to know when to stop (50 ms). */
    double t0 = now_raw();
    uint64_t c0 = read_fenced();
    while (now_raw() - t0 < 0.05)
        ;
    double hz_guess = (read_fenced() - c0) / (now_raw() - t0);

    struct noise_stats s;
    noise_init(&s, kept, NOISE_MAX_KEPT);
    uint64_t start, stop;
    double w0 = now_raw();
    uint64_t end = read_fenced() + (uint64_t)(duration * hz_guess);
    if (rdtscp)
        NOISE_SPIN(read_rdtscp, &s, threshold, end, start, stop);
    else
        NOISE_SPIN(read_fenced, &s, threshold, end, start, stop);
    double elapsed = now_raw() - w0;
    uint64_t cycles = stop - start;
    struct noise_run run = {
        .cpu = (unsigned long)cpu,
        .method = rdtscp ? "rdtscp" : "lfence-rdtsc",
        .clock = NULL,
        .threshold = threshold,
        .cycles = cycles,
        .tsc_hz = elapsed > 0 ? cycles / elapsed : hz_guess,
        .duration_s = elapsed,
    };
    static char json[NOISE_JSON_MAX];
    noise_report(&s, &run, json, sizeof(json));
    printf("%s\n", json);
    return 0;
}
