#!/usr/bin/env bash
# Start, stop or inspect the sim host container that `inventory/sim` targets.
#   scripts/simhost.sh up      start it (builds the image if missing); idempotent
#   scripts/simhost.sh down    remove it
#   scripts/simhost.sh status  print its state and how to reach it
# The container runs real systemd as PID 1 and sshd; Ansible reaches it over SSH, as a real GPU host.
#
# SSH: the container's port 22 is published on a free loopback port (podman picks it; `podman port` reads
# it back), so any number of sim hosts run at once. `up` makes the controller's key pair once per checkout
# (build/ssh/id_ed25519, 0600, never committed: build/ is ignored), installs its public key as root's only
# authorized key (podman exec), and writes what it resolved to build/ssh/<container>/:
#   config       the ssh_config of this container: Host <container> -> 127.0.0.1:<port>, user root, our
#                key, our known_hosts, StrictHostKeyChecking yes. The inventories pass it with `ssh -F`
#                (ansible_ssh_common_args), so these facts live here only; by hand: ssh -F <config> <container>
#   known_hosts  the container's own host key (made at its first boot), read through podman exec: the
#                key is trusted because podman says it is that container's, never on first use
# `down` removes the container and that directory.
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

ssh_root="$root/build/ssh"
ssh_dir="$ssh_root/$name"
ssh_key="$ssh_root/id_ed25519"

# The controller's key pair, made once per checkout; concurrent `up`s of several containers make one.
ensure_key() {
  mkdir -p "$ssh_root"
  chmod 0700 "$ssh_root"
  (
    flock 9
    if [ ! -s "$ssh_key" ]; then
      rm -f "$ssh_key" "$ssh_key.pub"
      ssh-keygen -q -t ed25519 -N "" -C "sglbench controller key ($root)" -f "$ssh_key"
    fi
    chmod 0600 "$ssh_key"
  ) 9>"$ssh_root/.keygen.lock"
}

# The loopback port podman published for the container's port 22 (empty when none).
ssh_port() {
  podman port "$name" 22/tcp 2>/dev/null | sed -n 's/^127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' | head -n 1
}

# Authorize our key for root, record the container's host key and write its ssh_config; then log in once.
ssh_setup() {
  local port hostkey out
  ensure_key
  port="$(ssh_port)"
  [ -n "$port" ] || { echo "$name: port 22 is not published on 127.0.0.1 (podman port $name 22/tcp)" >&2; return 1; }
  for _ in $(seq 1 100); do
    podman exec "$name" systemctl is-active --quiet ssh.service && break
    sleep 0.1
  done
  podman exec "$name" systemctl is-active --quiet ssh.service \
    || { echo "$name: sshd is not running: $(podman exec "$name" systemctl status --no-pager ssh.service 2>&1 | tail -n 5)" >&2; return 1; }
  podman exec -i "$name" sh -c 'umask 077 && mkdir -p /root/.ssh && cat > /root/.ssh/authorized_keys' <"$ssh_key.pub"
  hostkey="$(podman exec "$name" cat /etc/ssh/ssh_host_ed25519_key.pub | cut -d" " -f1,2)"
  case "$hostkey" in ssh-ed25519\ *) ;; *) echo "$name: no ed25519 host key in the container" >&2; return 1 ;; esac
  mkdir -p "$ssh_dir"
  echo "$name $hostkey" >"$ssh_dir/known_hosts.tmp"
  mv "$ssh_dir/known_hosts.tmp" "$ssh_dir/known_hosts"
  cat >"$ssh_dir/config.tmp" <<CONFIG
# The sim host container $name, as scripts/simhost.sh up resolved it. Rewritten by every \`up\`.
Host $name
  HostName 127.0.0.1
  Port $port
  User root
  IdentityFile $ssh_key
  IdentitiesOnly yes
  UserKnownHostsFile $ssh_dir/known_hosts
  HostKeyAlias $name
  StrictHostKeyChecking yes
  BatchMode yes
CONFIG
  mv "$ssh_dir/config.tmp" "$ssh_dir/config"
  out="$(ssh -F "$ssh_dir/config" -o ConnectTimeout=10 "$name" true 2>&1)" \
    || { echo "$name: ssh -F $ssh_dir/config $name fails: $out" >&2; return 1; }
}

# Whether the container runs the wanted image with port 22 published (then `up` keeps it).
keep_running() {
  [ "$1" = "$2 true" ] && [ -n "$(ssh_port)" ]
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
  if keep_running "$current" "$want"; then
    ssh_setup
    echo "$name: running ($image, real SGLang $version from $env_root; ssh -F $ssh_dir/config $name)"
    return 0
  fi
  podman rm -f "$name" >/dev/null 2>&1 || true
  podman run -d --name "$name" --hostname "$name" --systemd=always -p 127.0.0.1::22 \
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
  ssh_setup
  echo "$name: up ($image, systemd $state, real SGLang $version from $env_root as $opt/bin/python;" \
    "ssh -F $ssh_dir/config $name)"
}

case "$cmd" in
  up)
    image="${SGLBENCH_SIMHOST_IMAGE:-$("$root/scripts/simhost-image.sh" | tail -n 1)}"
    if ((real)); then
      up_real "$image"
      exit 0
    fi
    current="$(podman inspect -f '{{.ImageName}} {{.State.Running}}' "$name" 2>/dev/null || true)"
    if keep_running "$current" "$image"; then
      ssh_setup
      echo "$name: running ($image; ssh -F $ssh_dir/config $name)"
      exit 0
    fi
    podman rm -f "$name" >/dev/null 2>&1 || true
    podman run -d --name "$name" --hostname "$name" --systemd=always -p 127.0.0.1::22 \
      "$image" /lib/systemd/systemd >/dev/null
    state="$(wait_systemd)"
    ssh_setup
    echo "$name: up ($image, systemd $state; ssh -F $ssh_dir/config $name)"
    ;;
  down)
    podman rm -f "$name" >/dev/null 2>&1 || true
    rm -rf "$ssh_dir"
    echo "$name: removed"
    ;;
  status)
    podman inspect -f '{{.Name}} {{.State.Status}} {{.ImageName}}' "$name" 2>/dev/null || echo "$name: absent"
    [ ! -f "$ssh_dir/config" ] || echo "ssh -F $ssh_dir/config $name   (127.0.0.1:$(ssh_port))"
    ;;
  *)
    echo "usage: $0 up|down|status [--real-sglang]" >&2
    exit 2
    ;;
esac
