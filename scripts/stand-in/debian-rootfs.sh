# Sourced by the stand-in image scripts: a Debian bookworm rootfs from this machine's mirror, made
# slim and imported into podman under the name the code uses. Needs root, podman and debootstrap.

# The Debian mirror this machine's apt already uses (the first one its sources name).
debian_mirror() {
  local mirror
  mirror="$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null)"
  [ -n "$mirror" ] || mirror="$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)"
  [ -n "$mirror" ] || { echo "no Debian mirror in this machine's apt sources" >&2; return 1; }
  echo "$mirror"
}

# debootstrap_minbase ROOTFS PACKAGE,... [DEBOOTSTRAP_OPTION]...: bookworm (minbase) with the
# packages given, their services never started (no init runs in a chroot or a container).
debootstrap_minbase() {
  local rootfs="$1" include="$2" mirror log
  shift 2
  mirror="$(debian_mirror)"
  log="$(dirname "$rootfs")/debootstrap.log"
  echo "debootstrap bookworm (minbase, $include) from $mirror into $rootfs"
  install -d "$rootfs/usr/sbin"
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
  debootstrap --variant=minbase --include="$include" "$@" bookworm "$rootfs" "$mirror" >"$log" 2>&1 \
    || { tail -20 "$log" >&2; return 1; }
  rm -f "$rootfs/usr/sbin/policy-rc.d"
}

# What a slim image leaves out.
slim_rootfs() {
  local rootfs="$1"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
    "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*
}

# import_rootfs ROOTFS IMAGE MESSAGE [--change INSTRUCTION]...: the rootfs becomes IMAGE; the image
# it replaces goes, unless images built on it still use it.
import_rootfs() {
  local rootfs="$1" image="$2" message="$3" previous
  shift 3
  previous="$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
  tar -C "$rootfs" -c . | podman import --quiet "$@" --message "$message" - "$image" >/dev/null
  [ -z "$previous" ] || podman rmi "$previous" >/dev/null 2>&1 || true
  echo "$image built: $message, $(podman image inspect --format '{{.Size}}' "$image" | numfmt --to=iec)"
}
