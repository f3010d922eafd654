#!/bin/bash
# The entrypoint of the mysql:8.4 stand-in (MariaDB from Debian), keeping the official image's
# contract: on an empty data directory it initialises the server from MYSQL_ROOT_PASSWORD (or
# MYSQL_ALLOW_EMPTY_PASSWORD / MYSQL_RANDOM_ROOT_PASSWORD), MYSQL_ROOT_HOST, MYSQL_DATABASE,
# MYSQL_USER and MYSQL_PASSWORD and the files in /docker-entrypoint-initdb.d, on a server that
# listens on no port; port 3306 opens only once all of that is done, which is what clients wait for.
set -euo pipefail

if [ "${1:0:1}" = '-' ]; then set -- mariadbd "$@"; fi
case "$1" in
  mysqld | mariadbd) shift; set -- mariadbd "$@" ;;
  *) exec "$@" ;;
esac

datadir=/var/lib/mysql
socket=/run/mysqld/mysqld.sock
install -d -o mysql -g mysql /run/mysqld "$datadir"

# A string as an SQL literal, without its quotes.
sql_string() { printf '%s' "$1" | sed -e "s/\\\\/\\\\\\\\/g" -e "s/'/\\\\'/g"; }

initialise() {
  local root_password="${MYSQL_ROOT_PASSWORD:-}" root_host="${MYSQL_ROOT_HOST:-%}" pid
  if [ -z "$root_password" ] && [ -z "${MYSQL_ALLOW_EMPTY_PASSWORD:-}" ] && [ -z "${MYSQL_RANDOM_ROOT_PASSWORD:-}" ]; then
    echo 'error: database is uninitialized and password option is not specified' >&2
    echo '  You need to specify one of MYSQL_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD and MYSQL_RANDOM_ROOT_PASSWORD' >&2
    exit 1
  fi
  if [ -n "${MYSQL_RANDOM_ROOT_PASSWORD:-}" ]; then
    root_password="$(head -c 18 /dev/urandom | base64)"
    echo "GENERATED ROOT PASSWORD: $root_password"
  fi
  echo 'Initializing database files'
  mariadb-install-db --user=mysql --datadir="$datadir" --skip-test-db --auth-root-authentication-method=normal >/dev/null
  "$@" --skip-networking --socket="$socket" &
  pid=$!
  for _ in $(seq 1 60); do
    mariadb-admin --socket="$socket" -uroot ping >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { echo 'error: the temporary server stopped' >&2; exit 1; }
    sleep 0.5
  done
  local password user database
  password="$(sql_string "$root_password")"
  {
    # root only as the official image has it: root@localhost and root@MYSQL_ROOT_HOST.
    echo "DROP USER IF EXISTS 'root'@'127.0.0.1', 'root'@'::1';"
    echo "EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@''', @@hostname, '''');"
    echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$password';"
    if [ "$root_host" != localhost ]; then
      echo "CREATE USER 'root'@'$(sql_string "$root_host")' IDENTIFIED BY '$password';"
      echo "GRANT ALL ON *.* TO 'root'@'$(sql_string "$root_host")' WITH GRANT OPTION;"
    fi
    if [ -n "${MYSQL_DATABASE:-}" ]; then
      database="${MYSQL_DATABASE//\`/\`\`}"
      echo "CREATE DATABASE IF NOT EXISTS \`$database\`;"
    fi
    if [ -n "${MYSQL_USER:-}" ] && [ -n "${MYSQL_PASSWORD:-}" ]; then
      user="$(sql_string "$MYSQL_USER")"
      echo "CREATE USER '$user'@'%' IDENTIFIED BY '$(sql_string "$MYSQL_PASSWORD")';"
      [ -z "${MYSQL_DATABASE:-}" ] || echo "GRANT ALL ON \`$database\`.* TO '$user'@'%';"
    fi
  } | mariadb --socket="$socket" -uroot
  local file
  for file in /docker-entrypoint-initdb.d/*; do
    [ -e "$file" ] || continue
    echo "running $file"
    case "$file" in
      *.sh) . "$file" ;;
      *.sql) MYSQL_PWD="$root_password" mariadb --socket="$socket" -uroot ${MYSQL_DATABASE:+"$MYSQL_DATABASE"} <"$file" ;;
      *.sql.gz) gunzip -c "$file" | MYSQL_PWD="$root_password" mariadb --socket="$socket" -uroot ${MYSQL_DATABASE:+"$MYSQL_DATABASE"} ;;
      *) echo "ignoring $file" ;;
    esac
  done
  kill -TERM "$pid"
  wait "$pid"
  echo 'MySQL init process done. Ready for start up.'
}

[ -d "$datadir/mysql" ] || initialise "$@"
exec "$@"
