#!/usr/bin/env bash
# bench/costs.py (and its guard, tests/bench/test_costs.py) counts instructions with valgrind's callgrind;
# install Debian's valgrind when it is missing.
set -euo pipefail
if command -v valgrind >/dev/null 2>&1; then
  exit 0
fi
echo "valgrind not found; installing Debian's valgrind with apt-get" >&2
bash "$(dirname "$0")/apt-install.sh" --no-install-recommends valgrind
valgrind --version
