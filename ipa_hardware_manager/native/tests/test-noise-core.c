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
 * The measurement core's own routines against libc and libm, on the host
 * (ipa_hardware_manager/tests/test_noise.py builds and runs it): the
 * formatter writes what printf writes, the square root, the division and
 * the sort agree with sqrt, / and qsort.  Prints "N passed, N failed".
 */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "noise-core.h"  /* -I ipa_hardware_manager/native */

static unsigned long passed, failed;

static uint64_t rng = 88172645463325252ULL;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check(int ok, const char *what, const char *got,
                  const char *want)
{
    if (ok) {
        passed++;
        return;
    }
    if (failed++ < 20)
        fprintf(stderr, "FAIL %s: got %s, want %s\n", what, got, want);
}

static void fixed(double v, int decimals)
{
    char got[64], want[64];
    struct noise_buf b;
    noise_buf_init(&b, got, sizeof(got));
    noise_put_fixed(&b, v, decimals);
    snprintf(want, sizeof(want), "%.*f", decimals, v);
    check(!strcmp(got, want), "fixed", got, want);
}

static void u64(uint64_t v)
{
    char got[32], want[32];
    struct noise_buf b;
    noise_buf_init(&b, got, sizeof(got));
    noise_put_u64(&b, v);
    snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
    check(!strcmp(got, want), "u64", got, want);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    static const double exact[] = {
        0, 0.5, 1.5, 2.5, 0.125, 0.375, 1e-7, 0.05, 0.0049999, 12.25,
        -0.01, -3.75, -1234.5678, 2596108038.4, 2596108038.5,
        2596108039.5, 7211.25, 7211.35, 3986.645, 0.011034499,
        1e15 + 0.5, 9.1e18, 3.5, -2.5, 18446744073709549568.0};
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        for (int d = 0; d <= 9; d++)
            fixed(exact[i], d);
    /* Any finite double below 2^64, any number of decimals. */
    for (int i = 0; i < 200000; i++) {
        union {
            uint64_t u;
            double d;
        } r = {next()};
        if ((r.u >> 52 & 0x7ff) < 1023 + 64)
            fixed(r.d, (int)(next() % 10));
    }
    /* Values of the report's sizes: rates, shares, means, durations. */
    for (int i = 0; i < 200000; i++) {
        double unit = (double)(next() >> 11) / 9007199254740992.0;
        double v = unit * pow(10, (int)(next() % 13) - 3);
        int d = (int[]){0, 1, 2, 3, 6}[next() % 5];
        fixed(v, d);
        /* Cycle counts divided as the report divides them. */
        fixed((double)(next() % 100000000) / (double)(1 + next() % 99999),
              (int)(next() % 7));
    }
    u64(0);
    u64(UINT64_MAX);
    for (int i = 0; i < 10000; i++)
        u64(next() >> (next() % 64));

    for (int i = 0; i < 100000; i++) {
        uint64_t n = next(), d = next() >> (1 + next() % 63), rem;
        if (!d)
            d = 1;
        uint64_t q = noise_udivmod64(n, d, &rem);
        char got[64], want[64];
        snprintf(got, sizeof(got), "%llu r %llu", (unsigned long long)q,
                 (unsigned long long)rem);
        snprintf(want, sizeof(want), "%llu r %llu",
                 (unsigned long long)(n / d), (unsigned long long)(n % d));
        check(q == n / d && rem == n % d, "udivmod64", got, want);
    }

    for (int i = 0; i < 100000; i++) {
        double x = (double)(next() >> 11) * pow(2, (int)(next() % 120) - 80);
        double got = noise_sqrt(x), want = sqrt(x);
        char g[64], w[64];
        snprintf(g, sizeof(g), "%.17g", got);
        snprintf(w, sizeof(w), "%.17g", want);
        check(fabs(got - want) <= want * 4e-16, "sqrt", g, w);
    }

    static uint64_t a[20000], b[20000];
    for (size_t n = 0; n < 20000; n = n * 3 + 1) {
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] = next() % (n / 2 + 1);
        noise_sort_u64(a, n);
        qsort(b, n, sizeof(b[0]), cmp_u64);
        check(!memcmp(a, b, n * sizeof(a[0])), "sort", "unsorted",
              "sorted");
    }

    /* A cut report stays terminated and says its whole length. */
    struct noise_stats s;
    static uint64_t kept[16];
    noise_init(&s, kept, 16);
    for (uint64_t d = 20; d < 100000; d = d * 3 / 2)
        noise_account(&s, d, 150);
    struct noise_run run = {0, "rdtscp", "pit", 150, 1000000, 2e9, 0.5};
    char full[NOISE_JSON_MAX], cut[40];
    size_t len = noise_report(&s, &run, full, sizeof(full));
    check(len == strlen(full), "report length", "other", "strlen");
    check(noise_report(&s, &run, cut, sizeof(cut)) == len
          && strlen(cut) == sizeof(cut) - 1
          && !strncmp(cut, full, sizeof(cut) - 1), "cut report", cut, full);
    puts(full);

    printf("%lu passed, %lu failed\n", passed, failed);
    return failed != 0;
}
