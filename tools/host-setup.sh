#!/bin/bash
# Prepare a Debian 12 machine for the lab and the tests: Debian packages
# and the small libvirt configuration that lets libvirtd run without
# systemd.  Idempotent and quick when everything is in place.  Needs root.
set -euo pipefail

PACKAGES=(
    qemu-system-x86 qemu-utils ipxe-qemu
    libvirt-daemon-system libvirt-clients libvirt-dev pkg-config
    ipmitool nginx-light docker-registry
    linux-image-amd64 busybox-static cpio kmod
    debootstrap umoci skopeo erofs-utils squashfs-tools zstd
    curl socat gcc python3-dev python3-venv
    syslinux syslinux-common mtools dosfstools e2fsprogs
)

if [ "$(id -u)" != 0 ]; then
    echo "host-setup: run as root (libvirtd and QEMU run as root)" >&2
    exit 2
fi

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
        || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "host-setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# QEMU must read the lab state directory, which may be private to root.
conf=/etc/libvirt/qemu.conf
for key in user group; do
    if ! grep -qE "^${key} = \"root\"" "$conf"; then
        sed -i -E "/^#?${key} = /d" "$conf"
        echo "${key} = \"root\"" >> "$conf"
    fi
done
# Lab nodes reach the host through QEMU "guestfwd=...-cmd:socat", which
# spawns a process per connection: QEMU's seccomp sandbox forbids that.
if ! grep -qE '^seccomp_sandbox = 0' "$conf"; then
    sed -i -E '/^#?seccomp_sandbox = /d' "$conf"
    echo 'seccomp_sandbox = 0' >> "$conf"
fi
getent passwd libvirt-qemu >/dev/null || \
    useradd --system --no-create-home libvirt-qemu
# Lab nodes see the host as 10.0.2.100 (QEMU user-mode networking).  The
# host itself must never send to that address: anything that tries (for
# example a conductor checking a URL meant for the nodes) fails here
# instead of leaving the machine.
ip route replace blackhole 10.0.2.100/32
echo "host-setup: ok"
