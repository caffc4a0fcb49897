#!/bin/sh
# Installs and starts what the test suite needs, where this runs as root:
# Debian's docker.io, bubblewrap and debootstrap; a running dockerd; the
# local base image debian:bookworm-slim (no registry is needed: debootstrap
# builds it from Debian's package mirror); Docker's compose and buildx plugins
# (scripts/install-docker-plugins.sh); the programs of a desktop (Xvfb,
# openbox, chromium, xdotool, ImageMagick, x11vnc, noVNC) for GUI tasks on the
# local sandbox and for --watch; and the desktop base image of GUI tasks,
# helios-desktop:bookworm (examples/gui/desktop-base). As non-root it only reports.
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

# Docker's v2 plugins: `docker compose` (compose environments) and `docker buildx`
# (BuildKit for the docker clients from 23.0 on). Debian 12 packages neither; the
# script fetches Debian 13's static builds, pinned by sha256 (or Docker's own
# packages, where apt has them).
if ! docker compose version >/dev/null 2>&1 || ! docker buildx version >/dev/null 2>&1; then
    # Not fatal: compose tasks then say the plugin is missing, and builds fall back.
    "$(dirname "$0")/install-docker-plugins.sh" || log "docker's compose and buildx plugins are not installed"
fi

# A desktop on the host: the local sandbox runs the host's programs for a GUI task
# (its /usr is the host's), and --watch serves the host's noVNC. Checked by path:
# another `convert` or `import` earlier on the PATH is not ImageMagick's.
desktop=""
need() { [ -e "$1" ] || desktop="$desktop $2"; }
need /usr/bin/Xvfb xvfb
need /usr/bin/xdpyinfo x11-utils
need /usr/bin/xdotool xdotool
need /usr/bin/wmctrl wmctrl
need /usr/bin/openbox openbox
# the other window managers Helios can start, tried after openbox (tests/test_desktop_focus.py
# checks the browser has the keyboard under each); xfwm4 is left out: tried first, it
# would replace openbox as the host desktops' window manager
need /usr/bin/fluxbox fluxbox
need /usr/bin/icewm icewm
need /usr/bin/matchbox-window-manager matchbox-window-manager
need /usr/bin/import imagemagick
need /usr/bin/scrot scrot
need /usr/bin/xwd x11-apps
need /usr/bin/chromium chromium
need /usr/bin/x11vnc x11vnc
need /usr/share/novnc/vnc.html novnc
need /usr/bin/websockify websockify
need /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf fonts-dejavu-core
if [ -n "$desktop" ]; then
    log "installing the desktop's programs:$desktop"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $desktop
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
# The desktop base image of GUI tasks (examples/gui/*/environment/Dockerfile start
# FROM it): Debian's packages, so the build needs Debian's archive (the host
# network where the daemon has no bridge) and nothing else. Built once.
desktop_image=helios-desktop:bookworm
if ! docker image inspect "$desktop_image" >/dev/null 2>&1; then
    context="$(dirname "$0")/../examples/gui/desktop-base"
    log "building $desktop_image from $context (Debian's chromium, Xvfb, openbox...; once)"
    started=$(date +%s)
    if DOCKER_BUILDKIT=0 docker build -q --network "${HELIOS_DOCKER_BUILD_NETWORK:-host}" \
        -t "$desktop_image" "$context" >/var/log/helios-desktop-build.log 2>&1; then
        log "$desktop_image built in $(($(date +%s) - started)) s"
    else
        # Not fatal: the GUI tests say what is missing (and fail under HELIOS_REQUIRE_DOCKER=1).
        log "building $desktop_image failed; see /var/log/helios-desktop-build.log"
        tail -n 5 /var/log/helios-desktop-build.log || true
    fi
fi
log "docker $(docker info --format '{{.ServerVersion}}'), bwrap $(bwrap --version | cut -d' ' -f2), base images ready"
