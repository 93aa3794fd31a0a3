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
 * The measurement core of the cycle-level OS-noise probe, shared by
 * bmc-noise (Linux, bmc-noise.c) and bmc-noise-unikernel (bare metal,
 * unikernel/): the timed loop, the accounting of each delta, the
 * statistics and the JSON report.  Freestanding: no libc, no libm, no
 * libgcc helper (it builds with gcc -m32 -ffreestanding and links without
 * libgcc), so only <stddef.h> and <stdint.h>, which the compiler has.
 */

#ifndef BMC_NOISE_CORE_H
#define BMC_NOISE_CORE_H

#include <stddef.h>
#include <stdint.h>

#define NOISE_HIST_BINS 64
#define NOISE_BUCKETS 4
/* Events whose deltas are kept for the median and the 99th percentile. */
#define NOISE_MAX_KEPT 100000
/* Room for any report: its fixed part and 64 histogram bins. */
#define NOISE_JSON_MAX 8192

extern const uint64_t noise_edges[NOISE_BUCKETS];
extern const char *const noise_bucket_names[NOISE_BUCKETS];

struct noise_stats {
    uint64_t samples, events, floor, largest, lost;
    uint64_t buckets[NOISE_BUCKETS];
    uint64_t hist[NOISE_HIST_BINS];
    uint64_t *kept;             /* the caller's array of kept_max */
    size_t nkept, kept_max;
    double mean, m2;            /* Welford, over the events */
};

/* What the caller measured around the loop. */
struct noise_run {
    unsigned long cpu;
    const char *method;         /* "rdtscp", "lfence-rdtsc", ... */
    const char *clock;          /* the reference clock; NULL: no key */
    uint64_t threshold;         /* cycles */
    uint64_t cycles;            /* counter at the loop's end less start */
    double tsc_hz;
    double duration_s;
};

void noise_init(struct noise_stats *s, uint64_t *kept, size_t kept_max);

/* floor(log2(v)) for v > 0, without a 64-bit helper on 32-bit x86. */
static inline unsigned noise_log2(uint64_t v)
{
    uint32_t hi = (uint32_t)(v >> 32);
    if (hi)
        return 63 - (unsigned)__builtin_clz(hi);
    return 31 - (unsigned)__builtin_clz((uint32_t)v);
}

/* One delta between two readings of the counter. */
static inline void noise_account(struct noise_stats *s, uint64_t delta,
                                 uint64_t threshold)
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
    for (int i = NOISE_BUCKETS - 1; i >= 0; i--) {
        if (delta >= noise_edges[i]) {
            s->buckets[i]++;
            break;
        }
    }
    s->hist[noise_log2(delta)]++;
    if (s->nkept < s->kept_max)
        s->kept[s->nkept++] = delta;
    double d = (double)delta - s->mean;
    s->mean += d / (double)s->events;
    s->m2 += d * ((double)delta - s->mean);
}

/* The loop, once per way of reading the counter (no call in the loop):
 * reads READ() until it reaches END, accounting each delta into the
 * noise_stats S; START and STOP get the first and the last reading. */
#define NOISE_SPIN(READ, S, THRESHOLD, END, START, STOP)                  \
    do {                                                                  \
        uint64_t prev_ = READ(), now_;                                    \
        (START) = prev_;                                                  \
        while (prev_ < (END)) {                                           \
            now_ = READ();                                                \
            noise_account((S), now_ - prev_, (THRESHOLD));                \
            prev_ = now_;                                                 \
        }                                                                 \
        (STOP) = prev_;                                                   \
    } while (0)

/* The statistics of S (it sorts S's kept deltas) as one line of JSON,
 * without a newline, in BUF (NUL-terminated, cut at SIZE).  Returns the
 * length of the whole report: a result >= SIZE means it was cut. */
size_t noise_report(struct noise_stats *s, const struct noise_run *run,
                    char *buf, size_t size);

/* A small formatter into a caller's buffer, always NUL-terminated. */
struct noise_buf {
    char *p;
    size_t size, len;           /* len counts what did not fit too */
};

void noise_buf_init(struct noise_buf *b, char *p, size_t size);
void noise_put_char(struct noise_buf *b, char c);
void noise_put_str(struct noise_buf *b, const char *str);
/* STR as a JSON string, quotes included. */
void noise_put_json_str(struct noise_buf *b, const char *str);
void noise_put_u64(struct noise_buf *b, uint64_t v);
/* V with DECIMALS (0-9) digits after the point, as printf's "%.*f"
 * in glibc: the double's exact value rounded to nearest, ties to even
 * (2^64 and beyond, infinities and NaN are written as 0). */
void noise_put_fixed(struct noise_buf *b, double v, int decimals);

/* N / D and N % D (D not 0, below 2^63), with no libgcc helper. */
uint64_t noise_udivmod64(uint64_t n, uint64_t d, uint64_t *rem);
/* The square root (Newton's iteration; 0 for X <= 0). */
double noise_sqrt(double x);
/* Sorts N values in place (heapsort: no recursion, no allocation). */
void noise_sort_u64(uint64_t *v, size_t n);

#endif
