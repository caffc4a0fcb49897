#!/bin/sh
# Installs and starts what the test suite needs, where this runs as root:
# Debian's docker.io, bubblewrap and debootstrap; a running dockerd; and the
# local base image debian:bookworm-slim (no registry is needed: debootstrap
# builds it from Debian's package mirror). As non-root it only reports.
set -eu

log() { printf '[setup] %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
    log "not root: skipping system packages, dockerd and base image (tests needing them will skip)"
    exit 0
fi

missing=""
command -v dockerd >/dev/null 2>&1 || missing="$missing docker.io"
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v debootstrap >/dev/null 2>&1 || missing="$missing debootstrap"
command -v tmux >/dev/null 2>&1 || missing="$missing tmux"
# gcc: the local sandbox's compiled shell server, and the hostile-task suite's
# preloaded library for its ld.so swap (tests/security)
command -v gcc >/dev/null 2>&1 || missing="$missing gcc libc6-dev"
# espeak-ng: the tool-call tests' offline speech (helios.toolcalls.EspeakSynthesizer)
command -v espeak-ng >/dev/null 2>&1 || missing="$missing espeak-ng"
if [ -n "$missing" ]; then
    log "installing:$missing"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
fi

if ! docker info >/dev/null 2>&1; then
    here="$(dirname "$0")"
    "$here/clear-stale-pidfile.sh" /var/run/docker.pid dockerd
    "$here/clear-stale-pidfile.sh" /var/run/docker/containerd/containerd.pid containerd
    if pgrep -x dockerd >/dev/null 2>&1; then
        # A live dockerd that does not answer may still be starting up.
        log "waiting for the running dockerd"
        i=0
        until docker info >/dev/null 2>&1 || [ "$i" -gt 30 ]; do i=$((i + 1)); sleep 1; done
    fi
fi

if ! docker info >/dev/null 2>&1; then
    log "starting dockerd"
    # No iptables and no default bridge: containers get --network none or host,
    # which is all the tests need and works inside restricted VMs.
    setsid nohup dockerd --iptables=false --bridge=none >/var/log/helios-dockerd.log 2>&1 &
    i=0
    until docker info >/dev/null 2>&1; do
        i=$((i + 1))
        if [ "$i" -gt 60 ]; then
            log "dockerd did not come up; see /var/log/helios-dockerd.log"
            tail -n 20 /var/log/helios-dockerd.log || true
            exit 1
        fi
        sleep 1
    done
fi

if ! docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
    rootfs="${HELIOS_ROOTFS_CACHE:-/var/cache/helios/bookworm-rootfs}"
    if [ ! -x "$rootfs/bin/sh" ]; then
        log "building a bookworm root filesystem with debootstrap (a few minutes, once)"
        rm -rf "$rootfs"
        mkdir -p "$rootfs"
        debootstrap --variant=minbase bookworm "$rootfs" >/var/log/helios-debootstrap.log 2>&1 || {
            tail -n 20 /var/log/helios-debootstrap.log
            exit 1
        }
    fi
    log "importing debian:bookworm-slim"
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' - debian:bookworm-slim >/dev/null
fi
log "docker $(docker info --format '{{.ServerVersion}}'), bwrap $(bwrap --version | cut -d' ' -f2), base image ready"
