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
# Build the Bare-Metal Container agent ramdisk (ironic-python-agent + the
# container hardware manager) offline: only PyPI and the Debian mirror are
# used, no git.
#
#   elements/build-agent-ramdisk.sh [-o OUT] [-w WORKDIR] [-f]
#
# writes OUT.kernel and OUT.initramfs (default OUT: /var/tmp/bmc-agent/
# bmc-agent) and OUT.inputs, the hash of everything the build depends on.
# A second run with the same inputs returns at once (-f forces a rebuild).
#
# Environment (all optional): DIB_RELEASE (bookworm),
# DIB_DISTRIBUTION_MIRROR (http://deb.debian.org/debian),
# DIB_DEBIAN_SECURITY_MIRROR (http://deb.debian.org/debian-security),
# BMC_IPA_REQUIREMENT (ironic-python-agent>=13.0.0,<14.0.0),
# BMC_DIB_REQUIREMENT (diskimage-builder), BMC_AGENT_EXTRA_ELEMENTS,
# BMC_CONSTRAINTS (upper-constraints.txt of the checkout).
# Must run as root (diskimage-builder chroots and mounts).

set -eu
set -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=/var/tmp/bmc-agent/bmc-agent
WORK=${BMC_AGENT_BUILD_DIR:-/var/tmp/bmc-agent-build}
FORCE=0

usage() {
    sed -n '14,30p' "$0" | sed 's/^# \{0,1\}//'
}

while getopts "o:w:fh" opt; do
    case $opt in
        o) OUT=$OPTARG ;;
        w) WORK=$OPTARG ;;
        f) FORCE=1 ;;
        h) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

if [ "$(id -u)" != 0 ]; then
    echo "build-agent-ramdisk: diskimage-builder needs root" >&2
    exit 1
fi

# The constraints are passed explicitly below.  A PIP_CONSTRAINT from the
# caller (tox sets one) names a host path, which diskimage-builder would
# carry into the image's chroot, where it does not exist.
unset PIP_CONSTRAINT

export DIB_RELEASE=${DIB_RELEASE:-bookworm}
export DIB_DISTRIBUTION_MIRROR=${DIB_DISTRIBUTION_MIRROR:-http://deb.debian.org/debian}
export DIB_DEBIAN_SECURITY_MIRROR=${DIB_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
export DIB_DEBIAN_COMPONENTS=${DIB_DEBIAN_COMPONENTS:-main}
export DIB_APT_MINIMAL_CREATE_INTERFACES=0
export DIB_DEBOOTSTRAP_CACHE=${DIB_DEBOOTSTRAP_CACHE:-1}
# (set it empty to bootstrap afresh; the cached tree is dist-upgraded anyway)
export DIB_DEBIAN_USE_DEBOOTSTRAP_CACHE=${DIB_DEBIAN_USE_DEBOOTSTRAP_CACHE-1}
export DIB_CHECKSUM=0
IPA_REQ=${BMC_IPA_REQUIREMENT:-ironic-python-agent>=13.0.0,<14.0.0}
# Every Python package of the image (and diskimage-builder) at a pinned
# version: the same file tox installs from.
CONSTRAINTS=${BMC_CONSTRAINTS:-$ROOT/upper-constraints.txt}
DIB_REQ=${BMC_DIB_REQUIREMENT:-diskimage-builder}
ELEMENTS="debian-minimal bmc-agent ${BMC_AGENT_EXTRA_ELEMENTS:-}"

OUT=$(readlink -m "$OUT")
mkdir -p "$(dirname "$OUT")" "$WORK"

# --- the inputs hash: elements, the agent-side code, the build settings ----
inputs_hash() {
    {
        echo "release=$DIB_RELEASE mirror=$DIB_DISTRIBUTION_MIRROR"
        echo "security=$DIB_DEBIAN_SECURITY_MIRROR"
        echo "components=$DIB_DEBIAN_COMPONENTS elements=$ELEMENTS"
        echo "ipa=$IPA_REQ dib=$DIB_REQ"
        # Everything the node-side Python code and the image are made of:
        # the elements, the agent and the definitions it shares with the
        # conductor (common/: protocol, tunables schema and profiles),
        # their packaging, and the pinned versions of every dependency.
        cd "$ROOT"
        find elements ipa_hardware_manager common -type f \
            ! -path '*/__pycache__/*' ! -path '*/tests/*' ! -name '*.pyc' \
            ! -path '*.egg-info/*' ! -path '*/build/*' \
            ! -name AUTHORS ! -name ChangeLog \
            -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
        sha256sum "$CONSTRAINTS"
    } | sha256sum | cut -d' ' -f1
}

HASH=$(inputs_hash)
if [ "$FORCE" = 0 ] && [ -s "$OUT.kernel" ] && [ -s "$OUT.initramfs" ] \
        && [ "$(cat "$OUT.inputs" 2>/dev/null)" = "$HASH" ]; then
    echo "build-agent-ramdisk: up to date ($HASH)"
    ls -l "$OUT.kernel" "$OUT.initramfs"
    exit 0
fi

START=$(date +%s)

# --- host tools diskimage-builder calls ------------------------------------
missing=""
for tool in sudo:sudo debootstrap:debootstrap cpio:cpio gzip:gzip zstd:zstd \
        gcc:gcc mmdebstrap:- ; do
    if [ "${tool#*:}" != - ] && ! command -v "${tool%%:*}" >/dev/null; then
        missing="$missing ${tool#*:}"
    fi
done
if [ -n "$missing" ]; then
    echo "build-agent-ramdisk: installing host packages:$missing"
    apt-get install -y --no-install-recommends $missing >/dev/null \
        || { apt-get update >/dev/null && \
             apt-get install -y --no-install-recommends $missing >/dev/null; }
fi

# --- diskimage-builder in its own venv -----------------------------------
DIBVENV=$WORK/dibvenv
if [ ! -x "$DIBVENV/bin/disk-image-create" ]; then
    python3 -m venv "$DIBVENV"
    "$DIBVENV/bin/pip" install --quiet --disable-pip-version-check \
        -c "$CONSTRAINTS" "$DIB_REQ"
fi

# --- wheelhouse: IPA + dependencies + this project, built on the host -----
WHEELS=$WORK/wheels-$HASH
if [ ! -d "$WHEELS" ]; then
    SRC=$(mktemp -d "$WORK/src.XXXXXX")
    # Copy the tree so that building the wheel leaves no build/ or
    # egg-info behind in the checkout.
    tar -C "$ROOT" --exclude=.git --exclude=.tox --exclude=build \
        --exclude='*.egg-info' --exclude=__pycache__ --exclude=.venv \
        -cf - . | tar -C "$SRC" -xf -
    COUNT=$(git -C "$ROOT" rev-list --count HEAD 2>/dev/null || echo 0)
    export PBR_VERSION=${PBR_VERSION:-0.0.1.dev$COUNT}
    rm -rf "$WHEELS.tmp"
    # Only the node side: ironic-bmc-agent and ironic-bmc-common.  The
    # conductor plugin, the lab and the tempest plugin never reach the
    # image.
    "$DIBVENV/bin/pip" wheel --quiet --disable-pip-version-check \
        -c "$CONSTRAINTS" --wheel-dir "$WHEELS.tmp" \
        "$IPA_REQ" "$SRC/common" "$SRC/ipa_hardware_manager"
    rm -rf "$SRC"
    mv "$WHEELS.tmp" "$WHEELS"
fi
export DIB_BMC_AGENT_WHEELHOUSE=$WHEELS

# --- bmc-noise, the cycle-level OS-noise probe, built on the host ----------
# (Debian's gcc and glibc, as the image's; ipa_hardware_manager/native/:
# bmc-noise.c and the measurement core it shares with the bare-metal probe
# in unikernel/, noise-core.c and .h, all under ipa_hardware_manager/ and
# so in $HASH.)
NATIVE=$WORK/native-$HASH
if [ ! -x "$NATIVE/bmc-noise" ]; then
    if [ ! -e /usr/include/stdio.h ]; then
        apt-get install -y --no-install-recommends libc6-dev >/dev/null
    fi
    rm -rf "$NATIVE.tmp"
    mkdir -p "$NATIVE.tmp"
    gcc -O2 -Wall -Wextra -Werror -o "$NATIVE.tmp/bmc-noise" \
        "$ROOT/ipa_hardware_manager/native/bmc-noise.c" \
        "$ROOT/ipa_hardware_manager/native/noise-core.c"
    mv "$NATIVE.tmp" "$NATIVE"
fi
export DIB_BMC_AGENT_NATIVE=$NATIVE

# --- the image -------------------------------------------------------------
export ELEMENTS_PATH="$HERE${ELEMENTS_PATH:+:$ELEMENTS_PATH}"
export PATH="$DIBVENV/bin:$PATH"
LOG=$OUT.build.log
echo "build-agent-ramdisk: building $OUT ($ELEMENTS), log in $LOG"
# shellcheck disable=SC2086
if ! disk-image-create -a amd64 -o "$OUT" --logfile "$LOG" \
        $ELEMENTS >/dev/null 2>&1; then
    tail -n 40 "$LOG" >&2
    echo "build-agent-ramdisk: disk-image-create failed, see $LOG" >&2
    exit 1
fi
[ -s "$OUT.kernel" ] && [ -s "$OUT.initramfs" ]
echo "$HASH" > "$OUT.inputs"
echo "build-agent-ramdisk: done in $(( $(date +%s) - START )) s"
grep -o 'bmc-agent: initramfs .*' "$LOG" | tail -n 1 || true
ls -l "$OUT.kernel" "$OUT.initramfs"
