# Creates one schema and one MySQL user per service, each user allowed only its own schema: one for
# every <SERVICE>_DB_PASSWORD in the environment, which each service's deployment files provide
# (<service>-service/deploy/mysql.env under Compose, its dev component's key of the mysql Secret in
# k8s). The mysql image's entrypoint sources this file once, when it initialises an empty data directory.
# k8s/overlays/dev/mysql.yaml carries a copy of this file; the deploy tests keep the two identical.

# A string literal: backslashes and quotes escaped, so any password reaches the server unchanged
# (the server's default sql_mode, without NO_BACKSLASH_ESCAPES). Replacements are quoted: taken
# literally by every bash.
sql_string() {
  local backslash='\' quote="'" value="$1"
  value="${value//"$backslash"/"$backslash$backslash"}"
  printf "'%s'" "${value//"$quote"/"$quote$quote"}"
}

# A quoted identifier: backquotes doubled.
sql_identifier() {
  printf '`%s`' "${1//'`'/'``'}"
}

# A schema name as GRANT reads it: `_` and `%` are wildcards there, escaped to name this schema only.
grant_schema() {
  local backslash='\' value="$1"
  value="${value//"$backslash"/"$backslash$backslash"}"
  value="${value//_/"${backslash}_"}"
  sql_identifier "${value//%/"${backslash}%"}"
}

create_service_user() {
  local service="$1"
  local password_variable="${service^^}_DB_PASSWORD"
  local password="${!password_variable:?$password_variable must be set}"
  docker_process_sql --database=mysql <<SQL
CREATE DATABASE IF NOT EXISTS $(sql_identifier "$service") CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE USER IF NOT EXISTS $(sql_string "$service")@'%' IDENTIFIED BY $(sql_string "$password");
GRANT ALL PRIVILEGES ON $(grant_schema "$service").* TO $(sql_string "$service")@'%';
SQL
}

for password_variable in $(compgen -v | grep -E '^[A-Z][A-Z0-9_]*_DB_PASSWORD$'); do
  create_service_user "$(tr '[:upper:]' '[:lower:]' <<<"${password_variable%_DB_PASSWORD}")"
done
