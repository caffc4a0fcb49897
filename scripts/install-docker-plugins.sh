#!/bin/sh
# Installs Docker's v2 CLI plugins, `docker compose` (compose environments) and
# `docker buildx` (BuildKit for docker clients from 23.0 on), into DEST (default
# /usr/local/lib/docker/cli-plugins, where every docker client looks). Debian 12
# packages neither; Debian 13's docker-compose and docker-buildx packages are
# static binaries, so their .debs are fetched from Debian's archive (DEBIAN_MIRROR,
# default http://deb.debian.org/debian), checked against the pinned sha256, and
# unpacked. Where apt offers Docker's own docker-compose-plugin or
# docker-buildx-plugin, apt installs those instead (root only). A plugin already in
# DEST that answers is left alone. tests/test_setup_scripts.py covers it.
set -eu

log() { printf '[setup] %s\n' "$*"; }

dest="${1:-/usr/local/lib/docker/cli-plugins}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

# name  package  version  sha256 of the .deb (Debian 13, amd64)
PINS="compose docker-compose 2.26.1-4 47681197cb2b1ab88206b42a1a92fc75f50d9530a6322d03494a473eed0408ea
buildx docker-buildx 0.13.1+ds1-3 fcf8c48204d1603c8f209451d7827eb91bf30759578baf7704e9e1a87e5f1d7f"

present() {  # a plugin answers its metadata call
    [ -x "$dest/docker-$1" ] && "$dest/docker-$1" docker-cli-plugin-metadata >/dev/null 2>&1
}

from_apt() {  # Docker's own package, where an apt source offers it
    [ "$(id -u)" = 0 ] && [ "$dest" = /usr/local/lib/docker/cli-plugins ] || return 1
    candidate=$(apt-cache policy "docker-$1-plugin" 2>/dev/null | sed -n 's/^ *Candidate: //p')
    [ -n "$candidate" ] && [ "$candidate" != "(none)" ] || return 1
    log "installing docker-$1-plugin $candidate with apt"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "docker-$1-plugin"
}

fetch() {  # url file
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL --retry 2 -o "$2" "$1"
    else
        wget -q -O "$2" "$1"
    fi
}

from_debian() {  # name package version sha256
    arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
    if [ "$arch" != amd64 ]; then
        log "no pinned docker-$1 for $arch: install Docker's docker-$1-plugin"
        return 1
    fi
    work=$(mktemp -d)
    deb="$work/$2.deb"
    url="$mirror/pool/main/d/$2/$2_$(printf %s "$3" | sed 's/^[0-9]*://')_$arch.deb"
    log "fetching $url"
    if ! fetch "$url" "$deb"; then
        log "could not fetch $url"
        rm -rf "$work"
        return 1
    fi
    got=$(sha256sum "$deb" | cut -d' ' -f1)
    if [ "$got" != "$4" ]; then
        log "sha256 mismatch for $2 $3: got $got, want $4; not installed"
        rm -rf "$work"
        return 1
    fi
    dpkg-deb -x "$deb" "$work/root"
    mkdir -p "$dest"
    install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-$1" "$dest/docker-$1"
    rm -rf "$work"
    log "docker $1 $3 installed in $dest"
}

status=0
echo "$PINS" | while read -r name package version sha; do
    present "$name" && continue
    from_apt "$name" || from_debian "$name" "$package" "$version" "$sha" || exit 1
done || status=1
exit "$status"
