#!/bin/bash
# Prepare a Debian 12 machine for the lab and the tests: Debian packages,
# the small libvirt configuration that lets libvirtd run without systemd,
# and MariaDB and RabbitMQ on 127.0.0.1 (installed and started, without
# systemd, only if nothing listens on their ports).  Idempotent and quick
# when everything is in place.  Needs root.
set -euo pipefail

PACKAGES=(
    qemu-system-x86 qemu-utils ipxe-qemu
    libvirt-daemon-system libvirt-clients libvirt-dev pkg-config
    ipmitool nginx-light docker-registry
    linux-image-amd64 busybox-static cpio kmod
    debootstrap umoci skopeo erofs-utils squashfs-tools zstd lz4
    nfs-ganesha nfs-ganesha-vfs libnfs-utils cryptsetup-bin
    curl socat gcc python3-dev python3-venv
    chromium chromium-driver
    syslinux syslinux-common mtools dosfstools e2fsprogs
    genisoimage
)
# Kernel builds (the kernel_build vendor method, bmc-lab bench --pgo):
# Debian's patched Linux source and what building it needs.
if [ "${BMC_HOST_KERNEL_BUILD:-0}" = 1 ]; then
    PACKAGES+=(linux-source-6.1 flex bison libelf-dev bc)
fi

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

# --- MariaDB and RabbitMQ on 127.0.0.1 (the scaled lab profile) -------------
# The lab expects them on the machine: MariaDB on 127.0.0.1:3306 with root
# and an empty password over TCP, RabbitMQ on 127.0.0.1:5672 with
# guest/guest.  If one is not there, install and start it, without
# systemd (this may be a container or a chroot).
listening() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_listening() {  # PORT WHAT LOG SECONDS
    local i
    for ((i = 0; i < $4 * 2; i++)); do
        listening "$1" && return 0
        sleep 0.5
    done
    echo "host-setup: $2 did not listen on 127.0.0.1:$1 within $4 s;" \
        "see $3" >&2
    [ -f "$3" ] && tail -n 20 "$3" >&2
    exit 1
}

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"
}

install_pkgs() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "$@" </dev/null \
        || { apt-get update -q && apt-get install -y -q \
                --no-install-recommends "$@" </dev/null; }
}

mariadb_tcp_root_ok() {
    mariadb --connect-timeout=5 -uroot --password= -h127.0.0.1 -P3306 \
        -e 'SELECT 1' >/dev/null 2>&1
}

# Debian's root@localhost logs in through the unix socket only; the lab
# connects over TCP as root with an empty password.
mariadb_open_root() {
    mariadb_tcp_root_ok && return 0
    mariadb -uroot -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'
        IDENTIFIED BY ''; GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1'
        WITH GRANT OPTION; FLUSH PRIVILEGES;" || return 1
    mariadb_tcp_root_ok && return 0
    # Without skip-name-resolve, 127.0.0.1 is seen as localhost.
    mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA
        unix_socket OR mysql_native_password USING PASSWORD('');
        FLUSH PRIVILEGES;" || return 1
    mariadb_tcp_root_ok
}

if ! listening 3306; then
    did="MariaDB was not running on 127.0.0.1:3306;"
    if ! installed mariadb-server; then
        echo "host-setup: installing mariadb-server"
        install_pkgs mariadb-server
        did="$did installed mariadb-server and"
    fi
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    install -d -o mysql -g adm -m 2750 /var/log/mysql
    if [ ! -d /var/lib/mysql/mysql ]; then
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql \
            >/var/log/mysql/install-db.log 2>&1 || {
            tail -n 20 /var/log/mysql/install-db.log >&2
            echo "host-setup: mariadb-install-db failed" >&2
            exit 1
        }
    fi
    start-stop-daemon --start --oknodo --background --quiet \
        --exec /usr/sbin/mariadbd -- --user=mysql \
        --bind-address=127.0.0.1 --port=3306 \
        --log-error=/var/log/mysql/error.log
    wait_listening 3306 MariaDB /var/log/mysql/error.log 60
    echo "host-setup: $did started it (mariadbd, log" \
        "/var/log/mysql/error.log)"
    if ! mariadb_tcp_root_ok; then
        if ! mariadb_open_root; then
            echo "host-setup: MariaDB refuses root with an empty password" \
                "on 127.0.0.1:3306, and this could not be changed" >&2
            exit 1
        fi
        echo "host-setup: MariaDB: root may now log in from 127.0.0.1" \
            "with an empty password (as the lab expects)"
    fi
elif command -v mariadb >/dev/null && ! mariadb_tcp_root_ok; then
    # A server this script did not start: say what the lab needs, change
    # nothing.
    echo "host-setup: WARNING: MariaDB on 127.0.0.1:3306 refuses root" \
        "with an empty password; the scaled lab profile (the functional" \
        "and e2e tests) needs it.  This script allows it only on a server" \
        "it starts itself (see mariadb_open_root in $0)." >&2
fi

if ! listening 5672; then
    did="RabbitMQ was not running on 127.0.0.1:5672;"
    if ! installed rabbitmq-server; then
        echo "host-setup: installing rabbitmq-server"
        install_pkgs rabbitmq-server
        did="$did installed rabbitmq-server and"
    fi
    # rabbitmq-server switches to the rabbitmq user itself.
    rabbitmq-server -detached
    wait_listening 5672 RabbitMQ "/var/log/rabbitmq/rabbit@$(hostname -s).log" 120
    echo "host-setup: $did started it (rabbitmq-server -detached, logs" \
        "in /var/log/rabbitmq)"
fi
echo "host-setup: ok"
