#!/usr/bin/env bash
# scripts/container-runtime.sh IMAGE: the podman options that start containers on this machine,
# on one line, e.g. `--runtime runc --ulimit nofile=20000:20000 --ulimit nproc=4096:4096`.
# npm run test:containers and npm run image-smoke both take theirs from here.
#
# The runtime is found by trying: each of crun and runc (or the names in CONTAINER_RUNTIMES) runs
# `true` in IMAGE, an image already present; the first that starts it is the one. crun cannot on
# a host with cgroup v1 and v2 mounted side by side ("cgroups in hybrid mode not supported"), runc
# may not elsewhere. Where none starts a container, it fails with each one's error.
#
# The limits stay within the host's hard limits, which a root without CAP_SYS_RESOURCE cannot
# raise and podman's defaults exceed: the hard limit of open files, and 4096 processes at most.
set -euo pipefail

image="${1:?usage: scripts/container-runtime.sh IMAGE (an image already present)}"
if ! podman image exists "$image"; then
  echo "container-runtime.sh: no image $image here to try the runtimes with" >&2
  exit 1
fi

nofile="$(ulimit -Hn)"
nproc="$(ulimit -Hu)"
if [ "$nproc" = unlimited ] || [ "$nproc" -gt 4096 ]; then nproc=4096; fi
limits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")

failures=()
for runtime in ${CONTAINER_RUNTIMES:-crun runc}; do
  probe="container-runtime-probe-$$-${runtime//[^a-zA-Z0-9_.-]/_}"
  if error="$(timeout 60 podman --runtime "$runtime" run --rm --name "$probe" --pull never --network none \
    "${limits[@]}" --entrypoint true "$image" 2>&1 >/dev/null)"; then
    for failure in "${failures[@]}"; do echo "container-runtime.sh: $failure" >&2; done
    echo "--runtime $runtime ${limits[*]}"
    exit 0
  fi
  podman rm --force --ignore "$probe" >/dev/null 2>&1 || true
  failures+=("$runtime cannot start a container: $(tail -1 <<<"${error:-timed out after 60 s}")")
done

echo "container-runtime.sh: no container runtime starts a container from $image here (podman run --rm --network none ${limits[*]}):" >&2
printf '  %s\n' "${failures[@]}" >&2
exit 1
