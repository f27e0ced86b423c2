#!/usr/bin/env bash
# The console's browser test drives Debian's chromium through chromedriver; install both when missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
echo "chromium or chromedriver not found; installing chromium and chromium-driver with apt-get" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
chromium --version
