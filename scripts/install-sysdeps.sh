#!/usr/bin/env bash
# Install the Debian packages `make demo` and `make test` need, when run as root and missing:
#   required  podman + runc + mmdebstrap + uidmap (the sim host) + openssh-client (Ansible reaches hosts
#             over SSH); without root, missing ones fail set-up
#   optional  chromium + fonts-liberation (the report's browser test, tests/python/test_report_browser.py,
#             which skips when Chromium is absent); without root, missing ones are only reported
set -euo pipefail
required=(podman runc mmdebstrap uidmap openssh-client)
optional=(chromium fonts-liberation)

missing() {
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
  done
}
mapfile -t need < <(missing "${required[@]}")
mapfile -t want < <(missing "${optional[@]}")
if [ ${#need[@]} -eq 0 ] && [ ${#want[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  if [ ${#want[@]} -gt 0 ]; then
    echo "sglbench: optional Debian packages missing: ${want[*]} (the report's browser test will skip)" >&2
  fi
  if [ ${#need[@]} -gt 0 ]; then
    echo "sglbench: missing Debian packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
    exit 1
  fi
  exit 0
fi
all=("${need[@]}" "${want[@]}")
echo "sglbench: installing Debian packages: ${all[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ${#want[@]} -gt 0 ]; then
  # A headless browser needs neither udev, upower nor a printer dialog: no recommends.
  apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
fi
