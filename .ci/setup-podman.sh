#!/usr/bin/env bash
# The container tests (tests/system/test_containers*.py): podman, runc and mmdebstrap from Debian, and the base
# image the tests build the gateway's image from. No container registry is needed: the base is made from Debian
# packages (python3, python3-venv, ca-certificates) by mmdebstrap from this machine's own apt mirror, and
# imported once; a later run finds it (`podman image exists`) and skips the build. Users elsewhere build
# FROM python:3.12-slim (deploy/Containerfile's default) instead.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF="$here/../tests/support/containers.conf"
base=localhost/mcp-safety-gateway-base:bookworm
missing=()
for tool in podman runc mmdebstrap catatonit netavark; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/lib/podman/$tool" ] || [ -x "/usr/libexec/podman/$tool" ] \
        || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    # catatonit: the pod's pause image is built from it; netavark, aardvark-dns, iptables: networks, names, ports.
    "$here/apt-install" setup-podman podman runc conmon catatonit netavark aardvark-dns iptables uidmap mmdebstrap
fi
podman --version
if podman image exists "$base"; then
    echo "setup-podman: $base is there already"
    exit 0
fi
# The Debian mirrors apt uses here (one-line or deb822 sources alike), as `apt-cache policy` names them.
mirror_of() {
    apt-cache policy | awk -v suite="$1/main" '$3 == suite && $2 ~ /^https?:/ { print $2; exit }'
}
mirror=$(mirror_of bookworm)
security=$(mirror_of bookworm-security)
if [ -z "$mirror" ]; then
    apt-get update >/dev/null
    mirror=$(mirror_of bookworm)
    security=$(mirror_of bookworm-security)
fi
if [ -z "$mirror" ]; then
    echo "setup-podman: no Debian bookworm mirror in apt's sources, so the base image cannot be made" >&2
    exit 1
fi
sources=("deb $mirror bookworm main" "deb $mirror bookworm-updates main")
[ -n "$security" ] && sources+=("deb $security bookworm-security main")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    bookworm "$work/rootfs.tar" "${sources[@]}"
podman import "$work/rootfs.tar" "$base"
podman run --rm --network none "$base" python3 -c 'import sys, venv, ssl; print("base python", sys.version.split()[0])'
