#!/usr/bin/env bash
# Write a containers.conf that works on this machine kind and print its path.
# Use: export CONTAINERS_CONF="$(scripts/podman-env.sh)"
#  - runc: Debian's crun 1.8 fails on hybrid cgroups ("cgroups in hybrid mode not supported").
#  - ulimits at or below the hard limits: root lacks CAP_SYS_RESOURCE here, podman's defaults fail.
#  - as root on cgroup v1: the containers' CPU weight (below).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/build/podman"
mkdir -p "$dir"
nofile="$(ulimit -Hn)"
[ "$nofile" = unlimited ] && nofile=1048576
nproc="$(ulimit -Hu)"
if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
conf="$dir/containers.conf"
cat > "$conf.tmp" <<CONF
# Written by scripts/podman-env.sh; safe to delete.
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]

[engine]
runtime = "runc"
CONF
mv "$conf.tmp" "$conf"

# CPU weight of the sim hosts (cgroup v1 only). Podman's cgroupfs manager puts every container under one
# parent cgroup, libpod_parent, whose cpu.shares (1024) is the weight of ONE process, or of one login
# session's autogroup: on a busy machine every container together (the sim hosts' stand-ins, load
# generators, systemd, the real SGLang) got 33 % of one core at load 35, one container 5 %. Each sim host
# stands for a GPU host with CPUs of its own, so the parent gets the weight of SGLBENCH_SIMHOST_CPU_SHARES
# (default 4096: four sessions' worth; 0 leaves it as it is). cgroup v2 (systemd's machine.slice) is left alone.
want="${SGLBENCH_SIMHOST_CPU_SHARES:-4096}"
cpu=/sys/fs/cgroup/cpu
if [[ "$want" =~ ^[0-9]+$ ]] && ((want > 0)) && [[ -f "$cpu/cpu.shares" && -w "$cpu" ]]; then
  mkdir -p "$cpu/libpod_parent" 2>/dev/null
  have="$(cat "$cpu/libpod_parent/cpu.shares" 2>/dev/null || echo 0)"
  if ((have < want)) && echo "$want" >"$cpu/libpod_parent/cpu.shares" 2>/dev/null; then
    echo "podman-env: sim hosts' CPU weight (cgroup v1 libpod_parent cpu.shares) $have -> $want" >&2
  fi
fi
echo "$conf"
