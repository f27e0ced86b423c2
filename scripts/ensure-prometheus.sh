#!/usr/bin/env bash
# The observability test scrapes the broker and the Functions host with Debian's Prometheus server (run by
# the test itself on a free port, not as a service); install it when missing.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
echo "prometheus not found; installing Debian's prometheus with apt-get" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# A policy-rc.d answering 101 keeps the package's service from starting (the test runs its own server with
# its own configuration); one the machine already has is left as it is.
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod +x "$POLICY"
  trap '$SUDO rm -f "$POLICY"' EXIT
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
prometheus --version 2>&1 | head -1
