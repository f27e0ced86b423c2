#!/usr/bin/env bash
# bench/costs.py (and its guard, tests/bench/test_costs.py) counts instructions with valgrind's callgrind;
# install Debian's valgrind when it is missing.
set -euo pipefail
if command -v valgrind >/dev/null 2>&1; then
  exit 0
fi
echo "valgrind not found; installing Debian's valgrind with apt-get" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends valgrind >/dev/null
valgrind --version
