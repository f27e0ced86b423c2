#!/usr/bin/env bash
# What every ensure-*.sh does when its tool is missing: install Debian packages with apt-get (through sudo
# when not root), quietly. Usage: apt-install.sh [--no-install-recommends] PACKAGE...
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing Debian's $(printf '%s ' "$@" | sed 's/--[a-z-]* //g')with apt-get" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
