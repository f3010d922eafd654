#!/usr/bin/env bash
# npm run test:containers [jest arguments]: the service integration tests and the gateway's cache
# end to end (or the suites given) with MySQL and Redis in containers that testcontainers starts,
# as `npm test` does where no MySQL is installed and a Docker engine runs. TEST_SERVERS=containers
# lets no test fall back to a server of the run's own. Sets up what is missing first, and is quick
# when it is all there:
#
# - podman, runc, slirp4netns, debootstrap and redis-server (scripts/setup/needs.ts): installed as
#   root on Debian or Ubuntu, else named with the command that installs them;
# - a Docker API engine: DOCKER_HOST, else /var/run/docker.sock, else (as root) podman's Docker API
#   on a socket of this run's own, with the runtime and limits scripts/container-runtime.sh finds,
#   started here and stopped at the end;
# - on podman, images named mysql:8.4 and redis:7: pulled, or where no registry answers, built
#   from Debian packages (scripts/stand-in-test-images.sh); Ryuk, which no registry serves here
#   either, is off, and this script removes the containers of its run itself;
# - as root, the tests run in a network namespace of their own, where nothing answers on the
#   host's MySQL and Redis ports at any address, and the containers' ports are reached through the
#   host's end of a veth pair; whatever still runs in it at the end is killed.
#
# docs/testing.md explains each choice and says how long it takes.
set -euo pipefail
cd "$(dirname "$0")/.."

SUITES=(shared/test *-service/test test/e2e/cache.test.ts)
SERVICE_DIR=/run/podman/test-containers-$$
PODMAN_SOCKET=$SERVICE_DIR/podman.sock
IMAGES=(docker.io/library/mysql:8.4 docker.io/library/redis:7)
LOCAL_PORTS=(3306 6379)

step() { printf '\n==> %s\n' "$*"; }
engine_answers() {
  node -e "require('node:http').get({ socketPath: process.argv[1], path: '/_ping', timeout: 2000 }, (r) => process.exit(r.statusCode === 200 ? 0 : 1)).on('error', () => process.exit(1))" "$1"
}

# podman's Docker API on a socket of its own, so a service already running elsewhere keeps its
# settings and another run's end cannot stop this one's. Its containers get the runtime and limits
# that start a container here, tried on an image provide_images has made present.
podman_service=''
start_podman_service() {
  local options runtime='' ulimits=()
  options="$(scripts/container-runtime.sh "${IMAGES[1]}")"
  read -ra options <<<"$options"
  set -- "${options[@]}"
  while [ $# -ge 2 ]; do
    case "$1" in
      --runtime) runtime="$2" ;;
      --ulimit) ulimits+=("\"$2\"") ;;
    esac
    shift 2
  done
  step "starting podman's Docker API on $PODMAN_SOCKET (${options[*]})"
  install -d -m 0700 "$SERVICE_DIR"
  cat >"$SERVICE_DIR/containers.conf" <<EOF
[containers]
default_ulimits = [$(IFS=,; echo "${ulimits[*]}")]

[engine]
runtime = "$runtime"
EOF
  # Stopped by cleanup; should this script be killed outright (no cleanup runs), the kernel sends
  # it SIGTERM as its parent dies.
  CONTAINERS_CONF="$SERVICE_DIR/containers.conf" setpriv --pdeathsig TERM \
    podman system service --time=0 "unix://$PODMAN_SOCKET" </dev/null >"$SERVICE_DIR/service.log" 2>&1 &
  podman_service=$!
  for _ in $(seq 1 60); do engine_answers "$PODMAN_SOCKET" && return 0; sleep 0.5; done
  echo "podman's Docker API did not answer on $PODMAN_SOCKET:" >&2
  tail -20 "$SERVICE_DIR/service.log" >&2
  return 1
}

stop_podman_service() {
  kill "$podman_service" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$podman_service" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$podman_service" 2>/dev/null || true
  wait "$podman_service" 2>/dev/null || true
  rm -rf "$SERVICE_DIR"
}

# Images the engine lacks: pulled where a registry answers, else the Debian stand-ins.
provide_images() {
  local image missing=()
  for image in "${IMAGES[@]}"; do
    podman image exists "$image" || podman pull -q "$image" >/dev/null 2>&1 || missing+=("$image")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    step "no registry serves ${missing[*]}: building local stand-ins (scripts/stand-in-test-images.sh)"
    scripts/stand-in-test-images.sh
  fi
  podman image ls --format '{{.Repository}}:{{.Tag}} {{.ID}} {{.Size}}' | grep -E "^($(IFS='|'; echo "${IMAGES[*]}")) "
}

testcontainers_ids() { podman ps -aq --filter label=org.testcontainers=true | sort; }

# Without Ryuk, a run that fails or is stopped may leave its containers behind (jest's global
# teardown stops them otherwise): those created since this script started go.
netns=''
veth=''
cleanup() {
  local status=$?
  if [ -n "$netns" ]; then
    kill_namespace_processes
    ip netns delete "$netns" 2>/dev/null || true
  fi
  if [ -n "$veth" ]; then ip link delete "$veth" 2>/dev/null || true; fi
  if [ "$status" -ne 0 ] && [ -n "${containers_before+set}" ]; then
    comm -13 <(echo "$containers_before") <(testcontainers_ids) | xargs -r podman rm -f -v >/dev/null 2>&1 || true
  fi
  if [ -n "$podman_service" ]; then
    stop_podman_service
    kill_orphaned_conmons
  fi
}

# The exec sessions of testcontainers' port checks can leave their conmon running after their
# container is gone: a conmon whose container no longer exists is an orphan, and goes, named.
kill_orphaned_conmons() {
  local existing pid id
  existing="$(podman ps -aq --no-trunc 2>/dev/null)"
  for pid in $(pgrep -x conmon); do
    id="$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n '/^-c$/{n;p;q}')"
    if [ -z "$id" ] || grep -qx "$id" <<<"$existing"; then continue; fi
    echo "killing conmon $pid, left by an exec session of removed container ${id:0:12}" >&2
    kill -KILL "$pid" 2>/dev/null || true
  done
}

# A process left in the namespace (a Redis Cluster node of a global setup that failed, a server
# of a killed jest) would outlive the script there, out of reach: each one goes, named.
kill_namespace_processes() {
  local pids
  mapfile -t pids < <(ip netns pids "$netns" 2>/dev/null)
  [ ${#pids[@]} -gt 0 ] || return 0
  echo "killing what still runs in $netns:" >&2
  ps -o pid=,args= -p "$(IFS=,; echo "${pids[*]}")" >&2 || true
  kill -KILL "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do [ -z "$(ip netns pids "$netns" 2>/dev/null)" ] && break; sleep 0.1; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A namespace with loopback and one veth pair to the host: 10.231.N.2 here, 10.231.N.1 there.
make_network_namespace() {
  local n=$(($$ % 256))
  netns="test-containers-$$"
  veth="tc$$h"
  ip netns add "$netns"
  ip link add "$veth" type veth peer name "tc$$n" netns "$netns"
  ip addr add "10.231.$n.1/30" dev "$veth"
  ip link set "$veth" up
  ip netns exec "$netns" ip link set lo up
  ip netns exec "$netns" ip addr add "10.231.$n.2/30" dev "tc$$n"
  ip netns exec "$netns" ip link set "tc$$n" up
  ip netns exec "$netns" ip route add default via "10.231.$n.1"
  export TESTCONTAINERS_HOST_OVERRIDE="10.231.$n.1"
}

# From inside the namespace, the host's MySQL and Redis ports answer at none of its addresses.
assert_local_servers_unreachable() {
  local address port reached=()
  for address in 127.0.0.1 $(ip -4 -o addr show | awk '{ split($4, a, "/"); print a[1] }'); do
    for port in "${LOCAL_PORTS[@]}"; do
      if ip netns exec "$netns" timeout 2 bash -c "exec 3<>/dev/tcp/$address/$port" 2>/dev/null; then
        reached+=("$address:$port")
      fi
    done
  done
  if [ ${#reached[@]} -gt 0 ]; then
    echo "the tests' namespace reaches ${reached[*]}: a local server could stand in for a container" >&2
    return 1
  fi
  echo "from the tests' network namespace, nothing answers on ports ${LOCAL_PORTS[*]} at 127.0.0.1 or any host address"
}

# podman, its runtime and debootstrap, and redis-server for the Redis Cluster the global setup
# starts: installed first where they can be, or named before anything runs.
node scripts/setup/cli.ts containers

run_in=()
if [ -z "${DOCKER_HOST:-}" ] && ! engine_answers /var/run/docker.sock && command -v podman >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  provide_images
  start_podman_service
  export DOCKER_HOST="unix://$PODMAN_SOCKET"
  export TESTCONTAINERS_RYUK_DISABLED="${TESTCONTAINERS_RYUK_DISABLED:-true}"
  containers_before="$(testcontainers_ids)"
fi
echo "engine: ${DOCKER_HOST:-whichever testcontainers finds (~/.testcontainers.properties, /var/run/docker.sock, rootless and Docker Desktop sockets)}"

if [ "$(id -u)" = 0 ] && command -v ip >/dev/null 2>&1; then
  make_network_namespace
  assert_local_servers_unreachable
  run_in=(ip netns exec "$netns")
fi

step "tsc -b"
npx tsc -b
[ $# -gt 0 ] || set -- "${SUITES[@]}"
step "jest $* (TEST_SERVERS=containers)"
# --forceExit: jest may otherwise not exit once every test has passed, its process holding a socket
# to the MySQL container's published port half-closed (FIN-WAIT-2) after the container is stopped,
# which nothing on the other side ever closes. The verdict is in by then.
TEST_SERVERS=containers DEBUG="${DEBUG:-testcontainers}" "${run_in[@]}" \
  node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js --forceExit "$@"
