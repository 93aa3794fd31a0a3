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
 * The measurement core of the OS-noise probe (noise-core.h): statistics
 * and the JSON report, freestanding (no libc, libm or libgcc).
 */

#include "noise-core.h"

/* The IncludeOS thesis's bucket edges (cycles): 150-400, 400-2000,
 * 2000-6000 and over 6000. */
const uint64_t noise_edges[NOISE_BUCKETS] = {150, 400, 2000, 6000};
const char *const noise_bucket_names[NOISE_BUCKETS] = {
    "150-400", "400-2000", "2000-6000", ">6000"};

void noise_init(struct noise_stats *s, uint64_t *kept, size_t kept_max)
{
    s->samples = s->events = s->largest = s->lost = 0;
    s->floor = UINT64_MAX;
    for (int i = 0; i < NOISE_BUCKETS; i++)
        s->buckets[i] = 0;
    for (int i = 0; i < NOISE_HIST_BINS; i++)
        s->hist[i] = 0;
    s->kept = kept;
    s->kept_max = kept_max;
    s->nkept = 0;
    s->mean = s->m2 = 0;
}

uint64_t noise_udivmod64(uint64_t n, uint64_t d, uint64_t *rem)
{
    uint64_t q = 0, r = 0;
    for (int i = 63; i >= 0; i--) {
        r = (r << 1) | ((n >> i) & 1);
        if (r >= d) {
            r -= d;
            q |= (uint64_t)1 << i;
        }
    }
    if (rem)
        *rem = r;
    return q;
}

double noise_sqrt(double x)
{
    union {
        double d;
        uint64_t u;
    } v;
    if (!(x > 0))
        return 0;
    if (x > 1.7976931348623157e308)
        return x;
    /* Halving the exponent gives a first guess within a few percent (or
     * a subnormal's within a factor of 2^26); Newton's iteration doubles
     * the correct bits each time. */
    v.d = x;
    v.u = (v.u >> 1) + ((uint64_t)0x1ff8 << 48);
    double y = v.d;
    for (int i = 0; i < 12; i++)
        y = 0.5 * (y + x / y);
    return y;
}

static void sift_down(uint64_t *v, size_t root, size_t n)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && v[child + 1] > v[child])
            child++;
        if (v[root] >= v[child])
            return;
        uint64_t t = v[root];
        v[root] = v[child];
        v[child] = t;
        root = child;
    }
}

void noise_sort_u64(uint64_t *v, size_t n)
{
    if (n < 2)
        return;
    for (size_t i = n / 2; i-- > 0;)
        sift_down(v, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        uint64_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift_down(v, 0, end);
    }
}

void noise_buf_init(struct noise_buf *b, char *p, size_t size)
{
    b->p = p;
    b->size = size;
    b->len = 0;
    if (size)
        p[0] = '\0';
}

void noise_put_char(struct noise_buf *b, char c)
{
    if (b->len + 1 < b->size) {
        b->p[b->len] = c;
        b->p[b->len + 1] = '\0';
    }
    b->len++;
}

void noise_put_str(struct noise_buf *b, const char *str)
{
    while (*str)
        noise_put_char(b, *str++);
}

void noise_put_json_str(struct noise_buf *b, const char *str)
{
    static const char hex[] = "0123456789abcdef";
    noise_put_char(b, '"');
    for (; *str; str++) {
        unsigned char c = (unsigned char)*str;
        if (c == '"' || c == '\\') {
            noise_put_char(b, '\\');
            noise_put_char(b, (char)c);
        } else if (c < 0x20) {
            noise_put_str(b, "\\u00");
            noise_put_char(b, hex[c >> 4]);
            noise_put_char(b, hex[c & 15]);
        } else {
            noise_put_char(b, (char)c);
        }
    }
    noise_put_char(b, '"');
}

/* The decimal digits of V, least significant first; their count. */
static int digits_of(uint64_t v, char *out)
{
    int n = 0;
    do {
        uint64_t rem;
        v = noise_udivmod64(v, 10, &rem);
        out[n++] = (char)('0' + rem);
    } while (v);
    return n;
}

void noise_put_u64(struct noise_buf *b, uint64_t v)
{
    char digits[24];
    for (int i = digits_of(v, digits) - 1; i >= 0; i--)
        noise_put_char(b, digits[i]);
}

/* V exactly as printf's "%.*f": the double is M * 2^E with M below 2^53;
 * its fraction's DECIMALS digits are F * 10^DECIMALS / 2^K, worked out
 * in 96 bits (32-bit limbs: no 128-bit type or libgcc helper on i386)
 * and rounded to nearest, ties to even, as glibc rounds. */
void noise_put_fixed(struct noise_buf *b, double v, int decimals)
{
    union {
        double d;
        uint64_t u;
    } bits;
    uint64_t ten = 1, whole = 0, q = 0;
    char digits[32];

    if (decimals < 0)
        decimals = 0;
    if (decimals > 9)
        decimals = 9;
    for (int i = 0; i < decimals; i++)
        ten *= 10;
    bits.d = v;
    int neg = (int)(bits.u >> 63);
    int exp = (int)((bits.u >> 52) & 0x7ff);
    uint64_t m = bits.u & (((uint64_t)1 << 52) - 1);
    if (exp == 0x7ff || exp >= 1023 + 64) {
        /* Not a number, infinite, or 2^64 and beyond. */
        neg = 0;
    } else {
        int e = exp ? exp - 1075 : -1074;
        if (exp)
            m |= (uint64_t)1 << 52;
        if (e >= 0) {
            whole = m << e;
        } else {
            int k = -e;
            uint64_t f = m;
            if (k < 64) {
                whole = m >> k;
                f = m & (((uint64_t)1 << k) - 1);
            }
            /* P = f * ten, as hi (bits 64-95) and lo (bits 0-63). */
            uint64_t p0 = (f & 0xffffffffu) * ten;
            uint64_t p1 = (f >> 32) * ten + (p0 >> 32);
            uint64_t lo = (p1 << 32) | (p0 & 0xffffffffu), hi = p1 >> 32;
            int up = 0;
            /* The last digit written, for a tie: q's, or whole's. */
            uint64_t odd = decimals ? 0 : whole & 1;
            if (k < 64) {
                uint64_t rem = lo & (((uint64_t)1 << k) - 1);
                uint64_t half = (uint64_t)1 << (k - 1);
                q = (lo >> k) | (hi << (64 - k));
                odd |= q & 1;
                up = rem > half || (rem == half && odd);
            } else if (k < 84) {
                /* P < 2^83: from 2^84 on, P is below half of 2^K. */
                uint64_t rem_hi = hi & (((uint64_t)1 << (k - 64)) - 1);
                uint64_t half_hi = k > 64 ? (uint64_t)1 << (k - 65) : 0;
                uint64_t half_lo = k > 64 ? 0 : (uint64_t)1 << 63;
                q = hi >> (k - 64);
                odd |= q & 1;
                up = rem_hi > half_hi || (rem_hi == half_hi
                     && (lo > half_lo || (lo == half_lo && odd)));
            }
            if (up && ++q == ten) {
                q = 0;
                whole++;
            }
        }
    }
    if (neg)
        noise_put_char(b, '-');
    noise_put_u64(b, whole);
    if (!decimals)
        return;
    noise_put_char(b, '.');
    for (int i = 0; i < decimals; i++) {
        uint64_t rem;
        q = noise_udivmod64(q, 10, &rem);
        digits[i] = (char)('0' + rem);
    }
    for (int i = decimals - 1; i >= 0; i--)
        noise_put_char(b, digits[i]);
}

static void key(struct noise_buf *b, const char *name)
{
    noise_put_str(b, ", \"");
    noise_put_str(b, name);
    noise_put_str(b, "\": ");
}

static void key_u64(struct noise_buf *b, const char *name, uint64_t v)
{
    key(b, name);
    noise_put_u64(b, v);
}

static void key_fixed(struct noise_buf *b, const char *name, double v,
                      int decimals)
{
    key(b, name);
    noise_put_fixed(b, v, decimals);
}

size_t noise_report(struct noise_stats *s, const struct noise_run *run,
                    char *buf, size_t size)
{
    struct noise_buf b;
    uint64_t floor = s->floor == UINT64_MAX ? 0 : s->floor;
    double elapsed = run->duration_s;
    double lost = (double)s->lost - (double)floor * (double)s->events;
    double stddev = s->events > 1
        ? noise_sqrt(s->m2 / (double)(s->events - 1)) : 0;
    double half = s->events > 1
        ? 1.6449 * stddev / noise_sqrt((double)s->events) : 0;
    uint64_t median = 0, p99 = 0;

    if (s->nkept) {
        size_t i = (size_t)(0.99 * (double)s->nkept);
        noise_sort_u64(s->kept, s->nkept);
        median = s->kept[s->nkept / 2];
        p99 = s->kept[i < s->nkept ? i : s->nkept - 1];
    }

    noise_buf_init(&b, buf, size);
    noise_put_str(&b, "{\"cpu\": ");
    noise_put_u64(&b, run->cpu);
    key(&b, "method");
    noise_put_json_str(&b, run->method);
    if (run->clock) {
        key(&b, "clock");
        noise_put_json_str(&b, run->clock);
    }
    key_fixed(&b, "tsc_hz", run->tsc_hz, 0);
    key_fixed(&b, "duration_s", elapsed, 3);
    key_u64(&b, "samples", s->samples);
    key_u64(&b, "floor_cycles", floor);
    key_u64(&b, "threshold_cycles", run->threshold);
    key_u64(&b, "events", s->events);
    key_fixed(&b, "events_per_s",
              elapsed > 0 ? (double)s->events / elapsed : 0.0, 2);
    key_fixed(&b, "lost_share", run->cycles
              ? (lost > 0 ? lost : 0) / (double)run->cycles : 0.0, 6);
    key_u64(&b, "largest_cycles", s->largest);
    key_u64(&b, "median_cycles", median);
    key_u64(&b, "p99_cycles", p99);
    key_fixed(&b, "mean_cycles", s->mean, 1);
    key_fixed(&b, "stddev_cycles", stddev, 1);
    key(&b, "ci90_cycles");
    noise_put_char(&b, '[');
    noise_put_fixed(&b, s->mean - half, 1);
    noise_put_str(&b, ", ");
    noise_put_fixed(&b, s->mean + half, 1);
    noise_put_char(&b, ']');
    key(&b, "buckets");
    noise_put_char(&b, '{');
    for (int i = 0; i < NOISE_BUCKETS; i++) {
        if (i)
            noise_put_str(&b, ", ");
        noise_put_json_str(&b, noise_bucket_names[i]);
        noise_put_str(&b, ": ");
        noise_put_u64(&b, s->buckets[i]);
    }
    noise_put_char(&b, '}');
    key(&b, "histogram");
    noise_put_char(&b, '[');
    int first = 1;
    for (int k = 0; k < NOISE_HIST_BINS; k++) {
        if (!s->hist[k])
            continue;
        if (!first)
            noise_put_str(&b, ", ");
        noise_put_char(&b, '[');
        noise_put_u64(&b, (uint64_t)1 << k);
        noise_put_str(&b, ", ");
        noise_put_u64(&b, s->hist[k]);
        noise_put_char(&b, ']');
        first = 0;
    }
    noise_put_str(&b, "]}");
    return b.len;
}
