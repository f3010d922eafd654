# Creates one schema and one MySQL user per service, each user allowed only its own schema.
# The mysql image's entrypoint sources this file once, when it initialises an empty data directory,
# with the passwords in its environment: compose/mysql.env under Compose, the mysql Secret in k8s.
# k8s/overlays/dev/mysql.yaml carries a copy of this file; the deploy tests keep the two identical.
create_service_user() {
  local service="$1"
  local password_variable="${service^^}_DB_PASSWORD"
  local password="${!password_variable:?$password_variable must be set}"
  docker_process_sql --database=mysql <<SQL
CREATE DATABASE IF NOT EXISTS \`${service}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE USER IF NOT EXISTS '${service}'@'%' IDENTIFIED BY '${password//\'/\'\'}';
GRANT ALL PRIVILEGES ON \`${service}\`.* TO '${service}'@'%';
SQL
}

create_service_user users
create_service_user products
