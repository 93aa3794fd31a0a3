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
 * the floor) are computed here.  The counter's rate is measured against
 * CLOCK_MONOTONIC_RAW over the run.
 *
 * Output: one JSON object on stdout.  Exit 2 on bad arguments, 3 when
 * the CPU cannot be used (no TSC, not pinnable); the agent then falls back
 * to its Python probe.  x86-64 only; no allocation in the loop.
 */

#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define MAX_KEPT 100000
#define HIST_BINS 64
#define MAX_DURATION 30.0

static const uint64_t EDGES[] = {150, 400, 2000, 6000};
static const char *const BUCKETS[] = {"150-400", "400-2000", "2000-6000",
                                      ">6000"};

static uint64_t kept[MAX_KEPT];

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

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

struct stats {
    uint64_t samples, events, floor, largest, lost;
    uint64_t buckets[4];
    uint64_t hist[HIST_BINS];
    size_t nkept;
    double mean, m2;            /* Welford, over the events */
};

static void account(struct stats *s, uint64_t delta, uint64_t threshold)
{
    s->samples++;
    if (delta < s->floor)
        s->floor = delta;
    if (delta < threshold)
        return;
    s->events++;
    if (delta > s->largest)
        s->largest = delta;
    s->lost += delta;
    for (int i = 3; i >= 0; i--) {
        if (delta >= EDGES[i]) {
            s->buckets[i]++;
            break;
        }
    }
    s->hist[63 - __builtin_clzll(delta)]++;
    if (s->nkept < MAX_KEPT)
        kept[s->nkept++] = delta;
    double d = (double)delta - s->mean;
    s->mean += d / (double)s->events;
    s->m2 += d * ((double)delta - s->mean);
}

/* The loop, once per way of reading the counter (no call in the loop). */
#define SPIN(READ)                                                        \
    do {                                                                  \
        uint64_t prev = READ(), now;                                      \
        start = prev;                                                     \
        while (prev < end) {                                              \
            now = READ();                                                 \
            account(&s, now - prev, threshold);                           \
            prev = now;                                                   \
        }                                                                 \
        stop = prev;                                                      \
    } while (0)

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

    struct stats s;
    memset(&s, 0, sizeof(s));
    s.floor = UINT64_MAX;
    uint64_t start, stop;
    double w0 = now_raw();
    uint64_t end = read_fenced() + (uint64_t)(duration * hz_guess);
    if (rdtscp)
        SPIN(read_rdtscp);
    else
        SPIN(read_fenced);
    double elapsed = now_raw() - w0;
    uint64_t cycles = stop - start;
    double hz = elapsed > 0 ? cycles / elapsed : hz_guess;
    if (s.floor == UINT64_MAX)
        s.floor = 0;
    double lost = (double)s.lost - (double)s.floor * (double)s.events;
    double stddev = s.events > 1 ? sqrt(s.m2 / (double)(s.events - 1)) : 0;
    double half = s.events > 1 ? 1.6449 * stddev / sqrt((double)s.events)
                               : 0;
    uint64_t median = 0, p99 = 0;
    if (s.nkept) {
        qsort(kept, s.nkept, sizeof(kept[0]), cmp_u64);
        median = kept[s.nkept / 2];
        p99 = kept[(size_t)(0.99 * s.nkept) < s.nkept
                   ? (size_t)(0.99 * s.nkept) : s.nkept - 1];
    }

    printf("{\"cpu\": %ld, \"method\": \"%s\", \"tsc_hz\": %.0f, "
           "\"duration_s\": %.3f, \"samples\": %llu, \"floor_cycles\": %llu, "
           "\"threshold_cycles\": %llu, \"events\": %llu, "
           "\"events_per_s\": %.2f, \"lost_share\": %.6f, "
           "\"largest_cycles\": %llu, \"median_cycles\": %llu, "
           "\"p99_cycles\": %llu, \"mean_cycles\": %.1f, "
           "\"stddev_cycles\": %.1f, \"ci90_cycles\": [%.1f, %.1f], "
           "\"buckets\": {",
           cpu, rdtscp ? "rdtscp" : "lfence-rdtsc", hz, elapsed,
           (unsigned long long)s.samples, (unsigned long long)s.floor,
           (unsigned long long)threshold, (unsigned long long)s.events,
           elapsed > 0 ? s.events / elapsed : 0.0,
           cycles ? (lost > 0 ? lost : 0) / (double)cycles : 0.0,
           (unsigned long long)s.largest, (unsigned long long)median,
           (unsigned long long)p99, s.mean, stddev, s.mean - half,
           s.mean + half);
    for (int i = 0; i < 4; i++)
        printf("%s\"%s\": %llu", i ? ", " : "", BUCKETS[i],
               (unsigned long long)s.buckets[i]);
    printf("}, \"histogram\": [");
    int first = 1;
    for (int k = 0; k < HIST_BINS; k++) {
        if (!s.hist[k])
            continue;
        printf("%s[%llu, %llu]", first ? "" : ", ",
               (unsigned long long)(1ULL << k),
               (unsigned long long)s.hist[k]);
        first = 0;
    }
    printf("]}\n");
    return 0;
}
