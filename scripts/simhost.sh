#!/usr/bin/env bash
# Start, stop or inspect the sim host container that `inventory/sim` targets.
#   scripts/simhost.sh up      start it (builds the image if missing); idempotent
#   scripts/simhost.sh down    remove it
#   scripts/simhost.sh status  print its state
# The container runs real systemd as PID 1; Ansible reaches it with the podman connection.
#
# With --real-sglang (after the command) the same image runs as the real-SGLang sim host that
# `inventory/realsim` targets (default name sglbench-realsim): the real SGLang environment of
# scripts/real-sglang-env.sh (set up or reused; exit 3 = cannot run on this machine) is bind-mounted
# read-only at the same path, with the base Python its venv was made from, and the container gets
#   /opt/sglang-<version>-cpu/bin/python  the venv's python with the CPU-engine environment (env.sh)
#   /opt/sglang-<version>-cpu/models      the env's tiny models
# Nothing is copied into an image; the stand-in stays installed as the system `sglang` but is unused.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$("$root/scripts/podman-env.sh")}"
cmd="${1:-status}"
real=0
case "${2:-}" in
  --real-sglang) real=1 ;;
  "") ;;
  *) echo "usage: $0 up|down|status [--real-sglang]" >&2; exit 2 ;;
esac
if ((real)); then
  name="${SGLBENCH_SIMHOST_NAME:-sglbench-realsim}"
else
  name="${SGLBENCH_SIMHOST_NAME:-sglbench-simhost}"
fi

wait_systemd() {
  local state=""
  for _ in $(seq 1 100); do
    state="$(podman exec "$name" systemctl is-system-running 2>/dev/null || true)"
    case "$state" in running|degraded) echo "$state"; return 0 ;; esac
    sleep 0.1
  done
  echo "$name: systemd did not come up within 10 s (state: ${state:-unknown})" >&2
  return 1
}

# The real-SGLang variant: mounts, then the wrapper and the models link inside the container.
up_real() {
  local image="$1" env_root version base_home base_prefix want current state
  local -a mounts
  set +e
  env_root="$("$root/scripts/real-sglang-env.sh" | tail -n 1)"
  local rc="${PIPESTATUS[0]}"
  set -e
  # 3 = this machine cannot run the real SGLang (the env script said why on stderr)
  ((rc == 0)) || exit "$rc"
  version="$(sed -n 's/^export SGLBENCH_REAL_SGLANG_VERSION="\(.*\)"$/\1/p' "$env_root/env.sh")"
  [ -n "$version" ] || { echo "$name: no SGLBENCH_REAL_SGLANG_VERSION in $env_root/env.sh" >&2; exit 1; }
  # The venv's python is a link to the interpreter it was made with (pyvenv.cfg `home`); the container
  # needs that interpreter at the same path. Debian's own (/usr/bin) is in the image already.
  base_home="$(sed -n 's/^home = //p' "$env_root/venv/pyvenv.cfg")"
  base_prefix="$(dirname "$base_home")"
  mounts=(-v "$env_root:$env_root:ro")
  case "$base_prefix" in
    /usr) ;;
    / | /usr/local | /bin | /sbin | /lib* | /etc | /opt | /var | /run | /tmp)
      echo "$name: cannot mount the venv's base Python prefix $base_prefix into the container;" \
        "make the env with a Python installed under its own prefix (SGLBENCH_REAL_SGLANG_PYTHON)" >&2
      exit 3 ;;
    *) mounts+=(-v "$base_prefix:$base_prefix:ro") ;;
  esac
  want="$image $env_root"
  current="$(podman inspect -f '{{.ImageName}} {{index .Config.Labels "sglbench.real-sglang"}} {{.State.Running}}' \
    "$name" 2>/dev/null || true)"
  if [ "$current" = "$want true" ]; then
    echo "$name: running ($image, real SGLang $version from $env_root)"
    return 0
  fi
  podman rm -f "$name" >/dev/null 2>&1 || true
  podman run -d --name "$name" --hostname "$name" --systemd=always \
    --label "sglbench.real-sglang=$env_root" "${mounts[@]}" "$image" /lib/systemd/systemd >/dev/null
  state="$(wait_systemd)"
  local opt="/opt/sglang-$version-cpu"
  podman exec -i "$name" sh -c "mkdir -p $opt/bin && cat > $opt/bin/python && chmod 0755 $opt/bin/python \
    && ln -sfn $env_root/models $opt/models" <<WRAPPER
#!/bin/sh
# SGLang $version: the real release from PyPI on its CPU engine (scripts/real-sglang-env.sh), bind-mounted
# read-only from the host's $env_root. env.sh sets SGLANG_USE_CPU_ENGINE=1, the libcuda stand-in's
# LD_LIBRARY_PATH and offline Hugging Face settings. Written by scripts/simhost.sh up --real-sglang.
. $env_root/env.sh
exec $env_root/venv/bin/python "\$@"
WRAPPER
  local got
  got="$(podman exec "$name" "$opt/bin/python" -c 'import importlib.metadata as m; print(m.version("sglang"))' 2>&1)" \
    || { echo "$name: the real SGLang does not run in the container: $got" >&2; exit 1; }
  [ "$got" = "$version" ] || { echo "$name: sglang $got in the container, wanted $version" >&2; exit 1; }
  echo "$name: up ($image, systemd $state, real SGLang $version from $env_root as $opt/bin/python)"
}

case "$cmd" in
  up)
    image="${SGLBENCH_SIMHOST_IMAGE:-$("$root/scripts/simhost-image.sh" | tail -n 1)}"
    if ((real)); then
      up_real "$image"
      exit 0
    fi
    current="$(podman inspect -f '{{.ImageName}} {{.State.Running}}' "$name" 2>/dev/null || true)"
    if [ "$current" = "$image true" ]; then
      echo "$name: running ($image)"
      exit 0
    fi
    podman rm -f "$name" >/dev/null 2>&1 || true
    podman run -d --name "$name" --hostname "$name" --systemd=always "$image" /lib/systemd/systemd >/dev/null
    for _ in $(seq 1 100); do
      state="$(podman exec "$name" systemctl is-system-running 2>/dev/null || true)"
      case "$state" in running|degraded) echo "$name: up ($image, systemd $state)"; exit 0 ;; esac
      sleep 0.1
    done
    echo "$name: systemd did not come up within 10 s (state: ${state:-unknown})" >&2
    exit 1
    ;;
  down)
    podman rm -f "$name" >/dev/null 2>&1 || true
    echo "$name: removed"
    ;;
  status)
    podman inspect -f '{{.Name}} {{.State.Status}} {{.ImageName}}' "$name" 2>/dev/null || echo "$name: absent"
    ;;
  *)
    echo "usage: $0 up|down|status [--real-sglang]" >&2
    exit 2
    ;;
esac
