#!/bin/sh
# Builds a local image without a registry (the quickstart and the container tests use it): an
# empty Debian-shaped root (usr/ is mounted from the host read-only at run time, so python3 and
# PyTorch are the host's), with the host's /etc/alternatives (libblas.so.3 resolves through it)
# and ld.so.cache. A site's real images carry their vendor's PyTorch instead (docs/containers.md).
# Usage: make_torch_image.sh IMAGE [CONTAINERS_CONF]
set -eu
image=$1
[ $# -ge 2 ] && export CONTAINERS_CONF="$2"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr" "$root/etc" "$root/tmp" "$root/var/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/root" \
         "$root/home" "$root/run"
chmod 1777 "$root/tmp" "$root/var/tmp"
for d in bin lib lib64 sbin; do ln -s "usr/$d" "$root/$d"; done
cp -a /etc/alternatives "$root/etc/"
cp /etc/ld.so.cache "$root/etc/"
tar -C "$root" -cf "$root.tar" .
trap 'rm -rf "$root" "$root.tar"' EXIT
podman --runtime=/usr/sbin/runc import -q "$root.tar" "$image" >/dev/null
