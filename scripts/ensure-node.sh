#!/usr/bin/env bash
# The compatibility tests drive the broker with the official JavaScript SDK (tests/compat/js), which needs
# Node.js 18 or newer and npm; install Debian's nodejs and npm when they are missing.
set -euo pipefail
major() { node --version 2>/dev/null | sed -n 's/^v\([0-9]*\).*/\1/p'; }
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && [ "$(major)" -ge 18 ] 2>/dev/null; then
  exit 0
fi
echo "Node.js 18+ with npm not found; installing nodejs and npm with apt-get" >&2
bash "$(dirname "$0")/apt-install.sh" nodejs npm
node --version
