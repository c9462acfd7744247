#!/usr/bin/env bash
# Start, stop or inspect the sim host container that `inventory/sim` targets.
#   scripts/simhost.sh up      start it (builds the image if missing); idempotent
#   scripts/simhost.sh down    remove it
#   scripts/simhost.sh status  print its state
# The container runs real systemd as PID 1; Ansible reaches it with the podman connection.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$("$root/scripts/podman-env.sh")}"
name="${SGLBENCH_SIMHOST_NAME:-sglbench-simhost}"
cmd="${1:-status}"

case "$cmd" in
  up)
    image="${SGLBENCH_SIMHOST_IMAGE:-$("$root/scripts/simhost-image.sh" | tail -n 1)}"
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
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
esac
