#!/usr/bin/env bash
# The console's browser test drives Debian's chromium through chromedriver; install both when missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
echo "chromium or chromedriver not found; installing chromium and chromium-driver with apt-get" >&2
bash "$(dirname "$0")/apt-install.sh" chromium chromium-driver
chromium --version
