#!/usr/bin/env bash
# Makes local stand-ins for the images the tests start with testcontainers where no container
# registry can be reached: `mysql:8.4` (MariaDB from Debian, behind an entrypoint that keeps the
# official image's MYSQL_* contract) and `redis:7` (Redis 7 from Debian), each a Debian bookworm
# rootfs (debootstrap, minbase) tagged with the name the tests use, so testcontainers finds it
# locally and pulls nothing.
#
#   scripts/stand-in-test-images.sh            # builds those of them that do not exist
#   scripts/stand-in-test-images.sh --force    # rebuilds both
#
# Needs root, podman and debootstrap (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/stand-in/debian-rootfs.sh

MYSQL_IMAGE=docker.io/library/mysql:8.4
REDIS_IMAGE=docker.io/library/redis:7
force="${1:-}"

work="$(mktemp -d /var/tmp/stand-in-test-images.XXXXXX)"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Both rootfs share the packages of the base system: fetched once.
install -d "$work/debs"

wanted() { [ "$force" = --force ] || ! podman image exists "$1"; }

if wanted "$MYSQL_IMAGE"; then
  rootfs="$work/mysql/rootfs"
  debootstrap_minbase "$rootfs" mariadb-server,mariadb-client --cache-dir="$work/debs"
  rm -rf "$rootfs"/var/lib/mysql/*
  cat >"$rootfs/etc/mysql/mariadb.conf.d/99-container.cnf" <<'CNF'
# As the official image: reachable on the container's address, no DNS lookups of clients.
[mariadbd]
user = mysql
bind-address = 0.0.0.0
skip-name-resolve
CNF
  install -m 0755 scripts/stand-in/mysql-entrypoint.sh "$rootfs/usr/local/bin/docker-entrypoint.sh"
  install -d "$rootfs/docker-entrypoint-initdb.d"
  slim_rootfs "$rootfs"
  import_rootfs "$rootfs" "$MYSQL_IMAGE" \
    "stand-in for mysql:8.4: Debian bookworm minbase, $(chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}' mariadb-server)" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'EXPOSE 3306' \
    --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
    --change 'CMD ["mysqld"]'
fi

if wanted "$REDIS_IMAGE"; then
  rootfs="$work/redis/rootfs"
  debootstrap_minbase "$rootfs" redis-server --cache-dir="$work/debs"
  install -d -o 0 -g 0 "$rootfs/data"
  chroot "$rootfs" chown redis:redis /data
  install -m 0755 scripts/stand-in/redis-entrypoint.sh "$rootfs/usr/local/bin/docker-entrypoint.sh"
  slim_rootfs "$rootfs"
  import_rootfs "$rootfs" "$REDIS_IMAGE" \
    "stand-in for redis:7: Debian bookworm minbase, $(chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}' redis-server)" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'EXPOSE 6379' \
    --change 'WORKDIR /data' \
    --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
    --change 'CMD ["redis-server"]'
fi
