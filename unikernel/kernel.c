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
 * bmc-noise-unikernel: the OS-noise probe of bmc-noise on bare metal.
 *
 * Started by a multiboot loader (iPXE's "kernel URL ARGS", GRUB, QEMU's
 * -kernel) on the boot CPU, in 32-bit protected mode with interrupts
 * off, it says so on COM1 (115200 8n1), reads its arguments from the
 * multiboot command line (duration=SECONDS, threshold=CYCLES, repeat=N),
 * measures the time-stamp counter's rate against the PIT (channel 2,
 * gated; the ACPI PM timer where there is no PIT; the median of three
 * windows of about 55 ms), runs bmc-noise's loop
 * (noise-core.h) REPEAT times, prints each result as bmc-noise's JSON on
 * one line, and powers the machine off (ACPI S5).  Nothing interrupts
 * the loop but what the OS cannot mask: SMIs, NMIs, a hypervisor's
 * exits.  The lines, in order (README.rst):
 *
 *   bmc-unikernel: booted
 *   bmc-unikernel: error TEXT             (bad arguments, no TSC, ...)
 *   bmc-unikernel: result {JSON}          (one per measurement)
 *   bmc-unikernel: end rc=0|1
 *   bmc-unikernel: poweroff failed: TEXT  (then it halts)
 */

#include <cpuid.h>

#include "noise-core.h"
#include "unikernel.h"

#define MB_BOOT_MAGIC 0x2badb002u
#define MB_INFO_CMDLINE (1u << 2)

#define COM1 0x3f8
#define PIT_HZ 1193182u
#define PM_TIMER_HZ 3579545u
#define MAX_DURATION_MS 30000u
#define MAX_REPEAT 100u
#define MAX_THRESHOLD 4294967295ull
/* A calibration gives up after 2^32 cycles (about a second or two). */
#define CALIBRATION_LIMIT (1ull << 32)

struct mb_info {
    uint32_t flags, mem_lower, mem_upper, boot_device, cmdline;
};

struct args {
    uint32_t duration_ms;
    uint64_t threshold;
    uint32_t repeat;
};

static uint64_t kept[NOISE_MAX_KEPT];
static char line[NOISE_JSON_MAX + 256];
static int serial_present;
static uint64_t tsc_hz;

/* --- COM1 ---------------------------------------------------------------- */

static void serial_init(void)
{
    /* What the loader wrote last may still be in the FIFO, which the
     * reset below would drop. */
    for (uint32_t i = 0; i < 1000000 && !(inb(COM1 + 5) & 0x40); i++)
        ;
    outb(COM1 + 1, 0x00);       /* no interrupts */
    outb(COM1 + 3, 0x80);       /* DLAB: the divisor follows */
    outb(COM1 + 0, 0x01);       /* 115200 baud */
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x03);       /* 8 bits, no parity, 1 stop bit */
    outb(COM1 + 2, 0xc7);       /* FIFOs on and cleared */
    outb(COM1 + 4, 0x03);       /* DTR, RTS */
    serial_present = inb(COM1 + 5) != 0xff;
}

static void serial_putc(char c)
{
    if (!serial_present)
        return;
    for (uint32_t i = 0; i < 1000000 && !(inb(COM1 + 5) & 0x20); i++)
        ;
    outb(COM1, (uint8_t)c);
}

/* Until the last bit has left (before the power goes). */
static void serial_drain(void)
{
    for (uint32_t i = 0; serial_present && i < 1000000
            && !(inb(COM1 + 5) & 0x40); i++)
        ;
}

/* --- lines ---------------------------------------------------------------- */

static void line_start(struct noise_buf *b)
{
    noise_buf_init(b, line, sizeof(line));
    noise_put_str(b, "bmc-unikernel: ");
}

static void line_end(struct noise_buf *b)
{
    (void)b;
    for (const char *p = line; *p; p++)
        serial_putc(*p);
    serial_putc('\r');
    serial_putc('\n');
}

static void say(const char *text)
{
    struct noise_buf b;
    line_start(&b);
    noise_put_str(&b, text);
    line_end(&b);
}

static void put_hex(struct noise_buf *b, uint32_t v)
{
    noise_put_str(b, "0x");
    for (int shift = 28; shift >= 0; shift -= 4)
        noise_put_char(b, "0123456789abcdef"[(v >> shift) & 15]);
}

/* An argument as the user wrote it, quoted, made printable and short. */
static void put_token(struct noise_buf *b, const char *p, size_t n)
{
    noise_put_char(b, '"');
    for (size_t i = 0; i < n && i < 64; i++)
        noise_put_char(b, p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?');
    if (n > 64)
        noise_put_str(b, "...");
    noise_put_char(b, '"');
}

/* --- end ------------------------------------------------------------------ */

static __attribute__((noreturn)) void finish(int rc)
{
    struct noise_buf b;
    line_start(&b);
    noise_put_str(&b, "end rc=");
    noise_put_u64(&b, (uint64_t)rc);
    line_end(&b);
    serial_drain();
    const char *why = acpi_poweroff(tsc_hz);
    line_start(&b);
    noise_put_str(&b, "poweroff failed: ");
    noise_put_str(&b, why);
    line_end(&b);
    serial_drain();
    for (;;)
        __asm__ volatile("cli\n\thlt");
}

/* Called by boot.S for any exception but an NMI. */
void trap(uint32_t vector, uint32_t error, uint32_t eip);
void trap(uint32_t vector, uint32_t error, uint32_t eip)
{
    static int trapped;
    struct noise_buf b;
    if (trapped++)
        for (;;)
            __asm__ volatile("cli\n\thlt");
    line_start(&b);
    noise_put_str(&b, "error CPU exception ");
    noise_put_u64(&b, vector);
    noise_put_str(&b, " (error code ");
    put_hex(&b, error);
    noise_put_str(&b, ") at eip ");
    put_hex(&b, eip);
    line_end(&b);
    finish(1);
}

/* --- exceptions ------------------------------------------------------------ */

extern const uint32_t trap_entries[32];

static struct __attribute__((packed)) {
    uint16_t offset_lo, selector;
    uint8_t zero, type;
    uint16_t offset_hi;
} idt[32];

static void idt_init(void)
{
    struct __attribute__((packed)) {
        uint16_t limit;
        uint32_t base;
    } desc = {sizeof(idt) - 1, (uint32_t)(uintptr_t)idt};
    for (int i = 0; i < 32; i++) {
        idt[i].offset_lo = (uint16_t)trap_entries[i];
        idt[i].selector = 0x08;
        idt[i].zero = 0;
        idt[i].type = 0x8e;     /* present, ring 0, 32-bit interrupt gate */
        idt[i].offset_hi = (uint16_t)(trap_entries[i] >> 16);
    }
    __asm__ volatile("lidt %0" : : "m"(desc));
}

/* --- arguments ------------------------------------------------------------- */

static int parse_uint(const char *p, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

/* SECONDS[.FFF] as milliseconds. */
static int parse_ms(const char *p, size_t n, uint32_t *out)
{
    size_t dot = 0;
    uint64_t whole, frac = 0;
    while (dot < n && p[dot] != '.')
        dot++;
    if (parse_uint(p, dot, MAX_DURATION_MS / 1000, &whole))
        return -1;
    if (dot < n) {
        size_t digits = n - dot - 1;
        if (digits < 1 || digits > 3
                || parse_uint(p + dot + 1, digits, 999, &frac))
            return -1;
        for (; digits < 3; digits++)
            frac *= 10;
    }
    uint64_t ms = whole * 1000 + frac;
    if (!ms || ms > MAX_DURATION_MS)
        return -1;
    *out = (uint32_t)ms;
    return 0;
}

static int bad_value(const char *key, const char *p, size_t n,
                     const char *want)
{
    struct noise_buf b;
    line_start(&b);
    noise_put_str(&b, "error bad ");
    noise_put_str(&b, key);
    noise_put_char(&b, ' ');
    put_token(&b, p, n);
    noise_put_str(&b, ": ");
    noise_put_str(&b, want);
    line_end(&b);
    return 1;
}

static int unknown_arg(const char *word, size_t n)
{
    struct noise_buf b;
    line_start(&b);
    noise_put_str(&b, "error unknown argument ");
    put_token(&b, word, n);
    noise_put_str(&b, " (known: duration=SECONDS threshold=CYCLES "
                  "repeat=N)");
    line_end(&b);
    return 1;
}

static int key_is(const char *p, size_t n, const char *key)
{
    size_t i = 0;
    for (; i < n && key[i]; i++)
        if (p[i] != key[i])
            return 0;
    return i == n && !key[i];
}

/* The multiboot command line: the loader's name of the image first (a
 * word without "="; iPXE, GRUB and QEMU put it there), then KEY=VALUE
 * words.  Every bad word is reported; the number of them. */
static int parse_args(const char *cmdline, struct args *a)
{
    int errors = 0, first = 1;
    const char *p = cmdline;

    a->duration_ms = 5000;
    a->threshold = noise_edges[0];
    a->repeat = 1;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *word = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        size_t n = (size_t)(p - word), k = 0;
        while (k < n && word[k] != '=')
            k++;
        if (first && k == n) {
            first = 0;
            continue;
        }
        first = 0;
        const char *v = word + k + 1;
        size_t vn = k < n ? n - k - 1 : 0;
        uint64_t u;
        if (k == n) {
            errors += unknown_arg(word, n);
        } else if (key_is(word, k, "duration")) {
            if (parse_ms(v, vn, &a->duration_ms))
                errors += bad_value("duration", v, vn, "seconds, more "
                                    "than 0 and at most 30, at most 3 "
                                    "decimals");
        } else if (key_is(word, k, "threshold")) {
            if (parse_uint(v, vn, MAX_THRESHOLD, &u) || !u)
                errors += bad_value("threshold", v, vn,
                                    "cycles, 1 to 4294967295");
            else
                a->threshold = u;
        } else if (key_is(word, k, "repeat")) {
            if (parse_uint(v, vn, MAX_REPEAT, &u) || !u)
                errors += bad_value("repeat", v, vn, "1 to 100");
            else
                a->repeat = (uint32_t)u;
        } else {
            errors += unknown_arg(word, n);
        }
    }
    return errors;
}

/* --- the counter's rate ------------------------------------------------------ */

/* PIT channel 2, gated, in mode 0 (interrupt on terminal count) from
 * 0xffff: its output (port 0x61 bit 5) rises 65535.5 +- 0.5 ticks of
 * 1193182 Hz (54.9 ms) after the count is written. */
static uint64_t pit_calibrate(void)
{
    uint8_t saved = inb(0x61);
    outb(0x61, (uint8_t)((saved & ~0x02) | 0x01));  /* gate on, no sound */
    outb(0x43, 0xb0);           /* channel 2, lo/hi byte, mode 0, binary */
    outb(0x42, 0xff);
    outb(0x42, 0xff);
    uint64_t t0 = read_fenced(), t1 = t0;
    int low = !(inb(0x61) & 0x20), high = 0;
    while (low && (t1 = read_fenced()) - t0 < CALIBRATION_LIMIT) {
        if (inb(0x61) & 0x20) {
            high = 1;
            break;
        }
    }
    outb(0x61, saved);
    if (!high)
        return 0;
    return noise_udivmod64((t1 - t0) * 2 * PIT_HZ, 2 * 0xffff + 1, NULL);
}

/* The ACPI PM timer (3.579545 MHz) over about 50 ms. */
static uint64_t pm_timer_calibrate(void)
{
    int bits;
    uint16_t port = acpi_pm_timer(&bits);
    if (!port)
        return 0;
    uint32_t mask = bits == 32 ? 0xffffffffu : 0xffffffu, ticks = 0;
    uint32_t p0 = inl(port) & mask;
    uint64_t t0 = read_fenced(), t1 = t0;
    while ((t1 = read_fenced()) - t0 < CALIBRATION_LIMIT) {
        ticks = ((inl(port) & mask) - p0) & mask;
        if (ticks >= PM_TIMER_HZ / 20)
            break;
    }
    if (ticks < PM_TIMER_HZ / 20)
        return 0;
    return noise_udivmod64((t1 - t0) * PM_TIMER_HZ, ticks, NULL);
}

/* A rate a real counter may have: 100 MHz to 20 GHz. */
static int plausible(uint64_t hz)
{
    return hz >= 100000000ull && hz <= 20000000000ull;
}

/* The median of three calibrations: one delayed at its end (an SMI, or
 * the host descheduling an emulated CPU) does not count. 0 if any
 * fails. */
static uint64_t calibrate(uint64_t (*once)(void))
{
    uint64_t v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = once();
        if (!plausible(v[i]))
            return 0;
    }
    noise_sort_u64(v, 3);
    return v[1];
}

/* --- the measurement --------------------------------------------------------- */

static void measure(const struct args *a, int rdtscp, const char *clock)
{
    struct noise_stats s;
    struct noise_buf b;
    uint64_t start, stop;

    noise_init(&s, kept, NOISE_MAX_KEPT);
    uint64_t end = read_fenced()
        + noise_udivmod64(tsc_hz * a->duration_ms, 1000, NULL);
    if (rdtscp)
        NOISE_SPIN(read_rdtscp, &s, a->threshold, end, start, stop);
    else
        NOISE_SPIN(read_fenced, &s, a->threshold, end, start, stop);
    struct noise_run run = {
        .cpu = 0,
        .method = rdtscp ? "bmc-noise-unikernel rdtscp"
                         : "bmc-noise-unikernel lfence-rdtsc",
        .clock = clock,
        .threshold = a->threshold,
        .cycles = stop - start,
        .tsc_hz = (double)tsc_hz,
        .duration_s = (double)(stop - start) / (double)tsc_hz,
    };
    line_start(&b);
    noise_put_str(&b, "result ");
    size_t at = b.len;
    noise_report(&s, &run, line + at, sizeof(line) - at);
    line_end(&b);
}

static int run(const char *cmdline)
{
    struct args a;
    unsigned eax, ebx, ecx, edx;
    const char *clock = "pit";

    if (parse_args(cmdline, &a))
        return 1;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 4))) {
        say("error this CPU has no time-stamp counter");
        return 1;
    }
    int rdtscp = __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx)
        && (edx & (1u << 27));
    tsc_hz = calibrate(pit_calibrate);
    if (!tsc_hz) {
        clock = "acpi-pm";
        tsc_hz = calibrate(pm_timer_calibrate);
    }
    if (!tsc_hz) {
        tsc_hz = 0;
        say("error no PIT and no ACPI PM timer to measure the time-stamp "
            "counter's rate against");
        return 1;
    }
    for (uint32_t i = 0; i < a.repeat; i++)
        measure(&a, rdtscp, clock);
    return 0;
}

void kmain(uint32_t magic, const struct mb_info *info);
void kmain(uint32_t magic, const struct mb_info *info)
{
    serial_init();
    /* The firmware may have left its last line open ("Booting from
     * ROM.."): ours start on a line of their own. */
    serial_putc('\r');
    serial_putc('\n');
    say("booted");
    idt_init();
    acpi_init();
    if (magic != MB_BOOT_MAGIC) {
        struct noise_buf b;
        line_start(&b);
        noise_put_str(&b, "error not started by a multiboot loader (eax ");
        put_hex(&b, magic);
        noise_put_char(&b, ')');
        line_end(&b);
        finish(1);
    }
    const char *cmdline = "";
    if ((info->flags & MB_INFO_CMDLINE) && info->cmdline)
        cmdline = (const char *)phys(info->cmdline);
    finish(run(cmdline));
}
