#!/usr/bin/env bash
# Makes a local stand-in for `node:24-slim` where no container registry can be reached, so the
# Dockerfiles build unchanged: a Debian bookworm rootfs (debootstrap, minbase), Node 24 from the
# project's `node` devDependency (the npm package ships the official binary), npm from the npm
# registry, the host's CA bundle (so `npm ci` in the build stage trusts what the host trusts), and a
# `node` user with uid/gid 1000, as in the real image. It is tagged docker.io/library/node:24-slim.
#
#   scripts/stand-in-node-image.sh            # unless an image of that name exists or a registry
#                                             # serves it, builds it (npm run image-smoke does this)
#   scripts/stand-in-node-image.sh --force    # rebuilds it
#
# Needs root, podman and debootstrap (Debian packages), and `npm ci` done in the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stand-in/debian-rootfs.sh

IMAGE=docker.io/library/node:24-slim
NODE_BIN=node_modules/node/bin/node

if [ "${1:-}" != "--force" ] && { podman image exists "$IMAGE" || podman pull -q "$IMAGE" >/dev/null 2>&1; }; then
  echo "$IMAGE exists: $(podman image inspect --format '{{.Id}}' "$IMAGE" | cut -c1-12)"
  exit 0
fi
echo "no registry serves $IMAGE: building a local stand-in"
[ -x "$NODE_BIN" ] || { echo "$NODE_BIN is missing: run npm ci first" >&2; exit 1; }
node_version="$("$NODE_BIN" --version)"
case "$node_version" in v24.*) ;; *) echo "$NODE_BIN is $node_version, not Node 24" >&2; exit 1 ;; esac

work="$(mktemp -d /var/tmp/stand-in-node.XXXXXX)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

debootstrap_minbase "$rootfs" ca-certificates

# Node and npm where the official image has them.
install -m 0755 "$NODE_BIN" "$rootfs/usr/local/bin/node"
npm_tarball="$(cd "$work" && npm pack --silent npm@11 2>/dev/null | tail -1)"
npm_version="${npm_tarball#npm-}"
npm_version="${npm_version%.tgz}"
install -d "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/$npm_tarball" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"

# The host's trust store: where a TLS-inspecting proxy's CA is, npm in the build stage needs it too
# (npm's global config points at it, as on the host; Node alone reads only its own CA list).
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
install -d "$rootfs/usr/local/etc"
echo 'cafile=/etc/ssl/certs/ca-certificates.crt' >"$rootfs/usr/local/etc/npmrc"

# The node user of the official image.
chroot "$rootfs" groupadd --gid 1000 node
chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node

slim_rootfs "$rootfs"
import_rootfs "$rootfs" "$IMAGE" "stand-in for node:24-slim: Debian bookworm minbase, Node $node_version, npm $npm_version" \
  --change 'ENV NODE_VERSION='"${node_version#v}" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["node"]'
