#!/usr/bin/env bash
# Install the Debian packages the sim host needs (podman + runc + mmdebstrap), when run as root
# and missing. Without root it only reports what is missing.
set -euo pipefail
need=()
for pkg in podman runc mmdebstrap uidmap; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "sglbench: missing Debian packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
  exit 1
fi
echo "sglbench: installing Debian packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
