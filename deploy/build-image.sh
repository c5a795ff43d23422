#!/bin/sh
# Builds the kubeling image (deploy/Dockerfile) as $IMAGE (default kubeling:dev).
# Its base, debian:bookworm-slim, is pulled when a registry has it; where none is
# reachable it is made here from Debian's packages (mmdebstrap minbase, without
# documentation, as the slim image is) and imported under the same name.
set -eu
cd "$(dirname "$0")/.."
# Debian's client matches Debian's engine and has BuildKit built in.
DOCKER=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)}
IMAGE=${IMAGE:-kubeling:dev}
BASE=debian:bookworm-slim
CA=/etc/ssl/certs/ca-certificates.crt

if [ -z "$DOCKER" ] || ! "$DOCKER" info >/dev/null 2>&1; then
    echo "build-image: no Docker engine answers. Install Debian's (apt-get install docker.io) and start it" >&2
    echo "  (without systemd: dockerd >/var/log/dockerd.log 2>&1 &), then run this again." >&2
    exit 1
fi

if ! "$DOCKER" image inspect "$BASE" >/dev/null 2>&1 && ! "$DOCKER" pull -q "$BASE" >/dev/null 2>&1; then
    echo "making $BASE from Debian's packages (no registry has it here)"
    command -v mmdebstrap >/dev/null 2>&1 || \
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # merged /usr set up by mmdebstrap's hook, as a new Debian 12 has it: the usrmerge
    # package would pull in perl (45 MB)
    mmdebstrap --variant=minbase --quiet --aptopt='APT::Install-Recommends "false"' \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        bookworm "$tmp/rootfs.tar" >"$tmp/mmdebstrap.log" 2>&1 || { cat "$tmp/mmdebstrap.log" >&2; exit 1; }
    "$DOCKER" import "$tmp/rootfs.tar" "$BASE" >/dev/null
fi

# pip in the build trusts what this machine trusts (an intercepting proxy's CA, if any):
# the bundle is a build secret, mounted for the pip step only. The build's steps use the
# host's network, so an engine without NAT rules (dockerd --iptables=false) builds too.
secret=""
[ -s "$CA" ] && secret="--secret id=ca,src=$CA"
# shellcheck disable=SC2086 # $secret is two words or none
DOCKER_BUILDKIT=1 "$DOCKER" build -q --network host -f deploy/Dockerfile -t "$IMAGE" $secret . >/dev/null
echo "$IMAGE: $("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1 / 1e6}')"
