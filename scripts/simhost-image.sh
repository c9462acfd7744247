#!/usr/bin/env bash
# Build (only if missing) the sim host image: minimal Debian + systemd + python3 + sshd, with the SGLang
# stand-in installed as the `sglang` package, an `nvidia-smi` stand-in and fixture model dirs.
# sshd (enabled under the container's systemd) takes root by key only; each container makes its own host
# key at first boot, and `scripts/simhost.sh up` installs the controller's key and records that host key.
#
# Two layers, each tagged with a hash of what defines it, so a stale image is never reused:
#   localhost/sglbench-simhost-base:<hash of suite + package list>   (mmdebstrap from the apt mirror)
#   localhost/sglbench-simhost:<hash of base tag + copied files>
# Prints the full name of the final image as its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$(scripts/podman-env.sh)}"

suite="${SGLBENCH_SIMHOST_SUITE:-bookworm}"
packages="systemd,systemd-sysv,dbus,python3,procps,openssh-server"
log() { echo "simhost-image: $*" >&2; }

hash_of() { sha256sum | cut -c1-12; }

# The Debian mirror this machine already uses (read from its apt sources, never hard-coded).
debian_mirror() {
  local uri=""
  if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
    uri="$(awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' /etc/apt/sources.list.d/*.sources \
      | grep -v -- '-security' | head -n 1)"
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri="$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list)"
  fi
  [ -n "$uri" ] || { log "no Debian mirror found in /etc/apt/sources.list{,.d}"; exit 1; }
  echo "$uri"
}

base_tag="$(printf '%s\n%s\n' "$suite" "$packages" | hash_of)"
base="localhost/sglbench-simhost-base:$base_tag"
if ! podman image exists "$base"; then
  mirror="$(debian_mirror)"
  log "building $base from $suite ($packages); takes ~1 min"
  mmdebstrap --quiet --variant=minbase --include="$packages" "$suite" - "$mirror" \
    | podman import --quiet - "$base" >/dev/null
fi

# Build context: only the stdlib parts the host needs (package root, hostlib, sim) + fixtures.
ctx="$root/build/simhost-context"
rm -rf "$ctx"
mkdir -p "$ctx/sglbench" "$ctx/models"
cp python/sglbench/__init__.py "$ctx/sglbench/"
cp -r python/sglbench/hostlib python/sglbench/sim "$ctx/sglbench/"
cp -r python/sglbench/sim/sglang_shim/sglang "$ctx/sglang"
cp python/sglbench/sim/bin/nvidia-smi "$ctx/nvidia-smi"
for model in tests/fixtures/models/*/; do
  cp -r "$model" "$ctx/models/"
done
find "$ctx" -name '__pycache__' -prune -exec rm -rf {} +
# Two SGLang installs side by side, as a real host with one venv per release has them:
# /opt/sglang-<release>/bin/python is the system Python with the stand-in impersonating <release>
# (point sglbench_sglang_python at one to run a campaign against that release).
side_by_side="0.5.13 0.5.23+ddtree"
for release in $side_by_side; do
  mkdir -p "$ctx/opt/sglang-$release/bin"
  printf '#!/bin/sh\n# SGLang %s (the sglbench stand-in impersonating it)\nexec env SGLBENCH_SIM_SGLANG_VERSION=%s /usr/bin/python3 "$@"\n' \
    "$release" "$release" > "$ctx/opt/sglang-$release/bin/python"
  chmod 0755 "$ctx/opt/sglang-$release/bin/python"
done
# sshd as a GPU host runs it: root by key only, one ed25519 host key, made by the unit on the container's
# first start (the image carries none, so two containers never share a host key).
mkdir -p "$ctx/ssh"
cat > "$ctx/ssh/sshd-sglbench.conf" <<'SSHD'
# The sim host's sshd (scripts/simhost-image.sh): root logs in by key only.
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
SSHD
cat > "$ctx/ssh/ssh-hostkey.conf" <<'UNIT'
# Each sim host container makes its own host key when sshd first starts (scripts/simhost-image.sh).
[Service]
ExecStartPre=
ExecStartPre=/bin/sh -c 'test -s /etc/ssh/ssh_host_ed25519_key || ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key'
ExecStartPre=/usr/sbin/sshd -t
UNIT
cat > "$ctx/Containerfile" <<CONTAINERFILE
FROM $base
COPY sglbench /usr/lib/python3/dist-packages/sglbench
COPY sglang /usr/lib/python3/dist-packages/sglang
COPY nvidia-smi /usr/local/bin/nvidia-smi
COPY models /models
COPY opt /opt
COPY ssh/sshd-sglbench.conf /etc/ssh/sshd_config.d/sglbench.conf
COPY ssh/ssh-hostkey.conf /etc/systemd/system/ssh.service.d/sglbench-hostkey.conf
RUN chmod 0755 /usr/local/bin/nvidia-smi \
 && rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub \
 && systemctl enable ssh.service >/dev/null 2>&1 \
 && python3 -c "import sglang.launch_server, sglang.srt.server_args, sglbench.sim" \
 && /opt/sglang-0.5.13/bin/python -c "import sglang; assert sglang.__version__ == '0.5.13'" \
 && (systemctl mask systemd-logind.service getty.target console-getty.service 2>/dev/null || true)
STOPSIGNAL SIGRTMIN+3
CMD ["/lib/systemd/systemd"]
CONTAINERFILE
tag="$( (echo "$base"; cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | hash_of)"
image="localhost/sglbench-simhost:$tag"
if ! podman image exists "$image"; then
  log "building $image"
  podman build --quiet --pull=never -t "$image" "$ctx" >/dev/null
fi
echo "$image"
