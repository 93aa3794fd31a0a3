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
 * bmc-noise-unikernel: what its parts share (kernel.c, acpi.c, lib.c),
 * and the x86 instructions C has no word for.
 */

#ifndef BMC_UNIKERNEL_H
#define BMC_UNIKERNEL_H

#include <stddef.h>
#include <stdint.h>

static inline void outb(uint16_t port, uint8_t v)
{
    __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outw(uint16_t port, uint16_t v)
{
    __asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
    uint8_t v;
    __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static inline uint16_t inw(uint16_t port)
{
    uint16_t v;
    __asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static inline uint32_t inl(uint16_t port)
{
    uint32_t v;
    __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

/* The time-stamp counter as bmc-noise reads it: lfence;rdtsc;lfence, or
 * rdtscp. */
static inline uint64_t read_fenced(void)
{
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t read_rdtscp(void)
{
    uint32_t lo, hi, aux;
    __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
    (void)aux;
    return ((uint64_t)hi << 32) | lo;
}

/* Physical memory (no paging: an address is itself), hidden from gcc's
 * idea that the first 4 KiB hold no object (-Warray-bounds). */
static inline const uint8_t *phys(uint32_t addr)
{
    const uint8_t *p = (const uint8_t *)(uintptr_t)addr;
    __asm__("" : "+r"(p));
    return p;
}

static inline uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
        | (uint32_t)p[3] << 24;
}

static inline uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* lib.c: what gcc may call even in a freestanding program. */
void *memset(void *dst, int c, size_t n);
void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
int memcmp(const void *a, const void *b, size_t n);

/* acpi.c */
/* Finds the FADT and the DSDT's \_S5 (for acpi_poweroff) and the PM
 * timer (for acpi_pm_timer); NULL, or what is missing for a poweroff. */
const char *acpi_init(void);
/* The ACPI PM timer's I/O port (0: none) and its width (24 or 32). */
uint16_t acpi_pm_timer(int *bits);
/* ACPI S5: returns only when the machine is still on, saying why.
 * TSC_HZ (0: unknown) times the wait for the power to go. */
const char *acpi_poweroff(uint64_t tsc_hz);

#endif
