#!/bin/bash
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
# Build bmc-noise-unikernel: unikernel/build.sh OUTDIR writes
# OUTDIR/bmc-noise-unikernel.elf, a 32-bit multiboot (v1) ELF.
#
# Needs Debian's gcc and binutils only: gcc -m32 compiles freestanding C
# (gcc's own stddef.h, stdint.h and cpuid.h; no libc headers, so neither
# gcc-multilib nor libc6-dev-i386), and ld links it with no library (no
# libc, no libgcc).  The same sources give the same bytes: no timestamp,
# no build id, no debug information, and source paths as seen from the
# repository (-ffile-prefix-map).
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
NATIVE=$ROOT/ipa_hardware_manager/native
OUT=$1
CC=${CC:-gcc}
LD=${LD:-ld}
export LC_ALL=C

for tool in "$CC" "$LD"; do
    if ! command -v "$tool" >/dev/null; then
        echo "build.sh: $tool is missing (Debian: gcc, binutils)" >&2
        exit 1
    fi
done

CFLAGS=(
    -m32 -march=i686 -mno-sse -mno-mmx -mfpmath=387
    -ffreestanding -nostdinc -isystem "$("$CC" -print-file-name=include)"
    -fno-pic -fno-pie -fno-stack-protector -fcf-protection=none
    -fno-asynchronous-unwind-tables -fno-unwind-tables
    -fno-tree-loop-distribute-patterns
    -ffile-prefix-map="$ROOT"=.
    -O2 -Wall -Wextra -Werror
    -I "$NATIVE"
)

mkdir -p "$OUT"
TMP=$(mktemp -d "$OUT/.build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

"$CC" "${CFLAGS[@]}" -c -o "$TMP/boot.o" "$HERE/boot.S"
"$CC" "${CFLAGS[@]}" -c -o "$TMP/kernel.o" "$HERE/kernel.c"
"$CC" "${CFLAGS[@]}" -c -o "$TMP/acpi.o" "$HERE/acpi.c"
"$CC" "${CFLAGS[@]}" -c -o "$TMP/lib.o" "$HERE/lib.c"
"$CC" "${CFLAGS[@]}" -c -o "$TMP/noise-core.o" "$NATIVE/noise-core.c"
# Any libgcc helper (a 64-bit division on i386, say) would be an
# undefined symbol here: ld fails rather than link something else.
"$LD" -m elf_i386 -static -nostdlib --build-id=none -z noexecstack \
    -T "$HERE/link.ld" -o "$TMP/bmc-noise-unikernel.elf" \
    "$TMP/boot.o" "$TMP/kernel.o" "$TMP/acpi.o" "$TMP/lib.o" \
    "$TMP/noise-core.o"

if command -v grub-file >/dev/null; then
    grub-file --is-x86-multiboot "$TMP/bmc-noise-unikernel.elf" || {
        echo "build.sh: grub-file: not a multiboot image" >&2
        exit 1
    }
fi
# The multiboot header: a 4-byte aligned magic in the first 8 KiB, with
# flags and a checksum that add up to 0 (mod 2^32).
read -r -a WORDS <<< "$(od -An -v -t u4 -N 8192 "$TMP/bmc-noise-unikernel.elf" | tr -s ' \n' '  ')"
FOUND=
for ((i = 0; i + 2 < ${#WORDS[@]}; i++)); do
    if [ "${WORDS[i]}" = 464367618 ] \
            && (( (WORDS[i] + WORDS[i + 1] + WORDS[i + 2]) % 4294967296 == 0 )); then
        FOUND=$((i * 4))
        break
    fi
done
if [ -z "$FOUND" ]; then
    echo "build.sh: no multiboot header in the first 8 KiB" >&2
    exit 1
fi
mv "$TMP/bmc-noise-unikernel.elf" "$OUT/bmc-noise-unikernel.elf"
echo "$OUT/bmc-noise-unikernel.elf"
