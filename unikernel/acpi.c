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
 * ACPI, just enough to power off (S5) and to read the PM timer: the RSDP
 * (in the EBDA's first KiB or 0xE0000-0xFFFFF), the RSDT or XSDT, the
 * FADT (PM1a/PM1b control blocks, PM timer, SMI command port) and the
 * DSDT's \_S5 package (SLP_TYPa, SLP_TYPb).  Tables above 4 GiB are out
 * of reach (32-bit, no paging) and count as missing.
 */

#include "unikernel.h"

#define SLP_EN (1u << 13)
#define SCI_EN 1u
#define FADT_HW_REDUCED (1u << 20)
#define FADT_TMR_VAL_EXT (1u << 8)
#define MAX_TABLE (16u << 20)

static struct {
    uint16_t pm1a_cnt, pm1b_cnt, pm_tmr, smi_cmd;
    uint8_t acpi_enable;
    int tmr_bits;
    int have_s5;
    uint16_t slp_typa, slp_typb;
    const char *problem;
} acpi;

static int checksum_ok(const uint8_t *p, uint32_t len)
{
    uint8_t sum = 0;
    while (len--)
        sum = (uint8_t)(sum + *p++);
    return sum == 0;
}

static const uint8_t *scan_rsdp(uint32_t start, uint32_t end)
{
    for (uint32_t a = start; a + 36 <= end; a += 16) {
        const uint8_t *p = phys(a);
        if (!memcmp(p, "RSD PTR ", 8) && checksum_ok(p, 20))
            return p;
    }
    return NULL;
}

/* A table at ADDR: its header checked (signature SIG, a sane length). */
static const uint8_t *table(uint64_t addr, const char *sig)
{
    if (!addr || addr >= 0x100000000ull)
        return NULL;
    const uint8_t *t = phys((uint32_t)addr);
    uint32_t len = rd32(t + 4);
    if (memcmp(t, sig, 4) || len < 36 || len > MAX_TABLE)
        return NULL;
    return t;
}

/* A system-I/O port: the legacy field, else the Generic Address
 * Structure of the FADT's X_ field (at GAS), when it is in I/O space. */
static uint16_t io_port(const uint8_t *fadt, uint32_t len, uint32_t legacy,
                        uint32_t gas)
{
    uint32_t port = rd32(fadt + legacy);
    if (!port && len >= gas + 12 && fadt[gas] == 1) {
        uint64_t a = rd64(fadt + gas + 4);
        port = a < 0x10000 ? (uint32_t)a : 0;
    }
    return port < 0x10000 ? (uint16_t)port : 0;
}

/* One value of the \_S5 package: ZeroOp, OneOp, or a Byte/Word/DWord. */
static const uint8_t *s5_value(const uint8_t *p, const uint8_t *end,
                               uint16_t *v)
{
    if (p >= end)
        return NULL;
    switch (*p) {
    case 0x00:
    case 0x01:
        *v = *p;
        return p + 1;
    case 0x0a:
        if (p + 2 > end)
            return NULL;
        *v = p[1];
        return p + 2;
    case 0x0b:
    case 0x0c:
        if (p + 3 > end)
            return NULL;
        *v = rd16(p + 1);
        return p + (*p == 0x0b ? 3 : 5);
    default:
        return NULL;
    }
}

/* Name(\_S5, Package() {SLP_TYPa, SLP_TYPb, ...}) in the DSDT's AML. */
static int find_s5(const uint8_t *dsdt)
{
    const uint8_t *end = dsdt + rd32(dsdt + 4);
    for (const uint8_t *p = dsdt + 36; p + 8 < end; p++) {
        if (memcmp(p, "_S5_", 4))
            continue;
        if (!(p[-1] == 0x08 || (p[-2] == 0x08 && p[-1] == '\\'))
                || p[4] != 0x12)
            continue;
        const uint8_t *q = p + 5;
        q += ((*q & 0xc0) >> 6) + 1;    /* PkgLength */
        q++;                            /* NumElements */
        q = s5_value(q, end, &acpi.slp_typa);
        if (q)
            q = s5_value(q, end, &acpi.slp_typb);
        if (q)
            return 1;
    }
    return 0;
}

const char *acpi_init(void)
{
    const uint8_t *rsdp = NULL, *fadt = NULL;
    uint32_t ebda = (uint32_t)rd16(phys(0x40e)) << 4;

    if (ebda >= 0x80000 && ebda < 0xa0000)
        rsdp = scan_rsdp(ebda, ebda + 1024);
    if (!rsdp)
        rsdp = scan_rsdp(0xe0000, 0x100000);
    if (!rsdp)
        return acpi.problem = "no ACPI RSDP";

    uint64_t xsdt_addr = rsdp[15] >= 2 ? rd64(rsdp + 24) : 0;
    const uint8_t *sdt = table(xsdt_addr, "XSDT");
    int width = 8;
    if (!sdt) {
        sdt = table(rd32(rsdp + 16), "RSDT");
        width = 4;
    }
    if (!sdt)
        return acpi.problem = "no ACPI RSDT or XSDT below 4 GiB";
    uint32_t n = (rd32(sdt + 4) - 36) / width;
    for (uint32_t i = 0; i < n && !fadt; i++) {
        const uint8_t *e = sdt + 36 + i * width;
        fadt = table(width == 8 ? rd64(e) : rd32(e), "FACP");
    }
    if (!fadt)
        return acpi.problem = "no ACPI FADT";

    uint32_t len = rd32(fadt + 4);
    if (len < 116)
        return acpi.problem = "ACPI FADT too short";
    acpi.smi_cmd = (uint16_t)rd32(fadt + 48);
    acpi.acpi_enable = fadt[52];
    acpi.pm1a_cnt = io_port(fadt, len, 64, 172);
    acpi.pm1b_cnt = io_port(fadt, len, 68, 184);
    acpi.pm_tmr = io_port(fadt, len, 76, 208);
    acpi.tmr_bits = rd32(fadt + 112) & FADT_TMR_VAL_EXT ? 32 : 24;
    if (rd32(fadt + 112) & FADT_HW_REDUCED)
        return acpi.problem = "hardware-reduced ACPI (no PM1 control "
                              "block), not supported";
    if (!acpi.pm1a_cnt)
        return acpi.problem = "no PM1a control block in the FADT";

    uint64_t dsdt_addr = len >= 148 ? rd64(fadt + 140) : 0;
    const uint8_t *dsdt = table(dsdt_addr, "DSDT");
    if (!dsdt)
        dsdt = table(rd32(fadt + 40), "DSDT");
    if (!dsdt)
        return acpi.problem = "no ACPI DSDT below 4 GiB";
    if (!find_s5(dsdt))
        return acpi.problem = "no \\_S5 package in the DSDT";
    acpi.have_s5 = 1;
    return NULL;
}

uint16_t acpi_pm_timer(int *bits)
{
    *bits = acpi.tmr_bits;
    return acpi.pm_tmr;
}

/* About a second: by the counter when its rate is known. */
static void wait_a_while(uint64_t tsc_hz, int (*done)(void))
{
    uint64_t t0 = tsc_hz ? read_fenced() : 0;
    for (uint32_t i = 0; i < 2000000; i++) {
        if (done && done())
            return;
        if (tsc_hz && read_fenced() - t0 > tsc_hz)
            return;
        inb(0x80);              /* about a microsecond on hardware */
    }
}

static int sci_enabled(void)
{
    return inw(acpi.pm1a_cnt) & SCI_EN;
}

const char *acpi_poweroff(uint64_t tsc_hz)
{
    if (!acpi.have_s5)
        return acpi.problem ? acpi.problem : "ACPI not initialised";
    /* ACPI mode first, as an OS would (firmware may ignore SLP_EN in
     * legacy mode). */
    if (!sci_enabled() && acpi.smi_cmd && acpi.acpi_enable) {
        outb(acpi.smi_cmd, acpi.acpi_enable);
        wait_a_while(tsc_hz, sci_enabled);
    }
    uint16_t a = (uint16_t)(inw(acpi.pm1a_cnt) & ~(7u << 10) & ~SLP_EN);
    uint16_t b = acpi.pm1b_cnt
        ? (uint16_t)(inw(acpi.pm1b_cnt) & ~(7u << 10) & ~SLP_EN) : 0;
    a |= (uint16_t)((acpi.slp_typa & 7) << 10);
    b |= (uint16_t)((acpi.slp_typb & 7) << 10);
    outw(acpi.pm1a_cnt, a);
    if (acpi.pm1b_cnt)
        outw(acpi.pm1b_cnt, b);
    outw(acpi.pm1a_cnt, (uint16_t)(a | SLP_EN));
    if (acpi.pm1b_cnt)
        outw(acpi.pm1b_cnt, (uint16_t)(b | SLP_EN));
    wait_a_while(tsc_hz, NULL);
    return "ACPI S5 (SLP_TYP|SLP_EN) did not power the machine off";
}
