#!/usr/bin/env bash
# Write a containers.conf that works on this machine kind and print its path.
# Use: export CONTAINERS_CONF="$(scripts/podman-env.sh)"
#  - runc: Debian's crun 1.8 fails on hybrid cgroups ("cgroups in hybrid mode not supported").
#  - ulimits at or below the hard limits: root lacks CAP_SYS_RESOURCE here, podman's defaults fail.
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
echo "$conf"
