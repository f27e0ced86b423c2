#!/usr/bin/env bash
# The compatibility tests drive the broker with the official Go SDK (tests/compat/go), whose go.mod needs Go
# 1.26 or newer; install Debian's golang-go when `go` is missing, and say so when the Go found is too old.
set -euo pipefail
version() { go env GOVERSION 2>/dev/null | sed -n 's/^go\([0-9]*\)\.\([0-9]*\).*/\1 \2/p'; }
recent() { read -r major minor <<<"$(version)"; [ "${major:-0}" -gt 1 ] || [ "${minor:-0}" -ge 26 ]; }
if command -v go >/dev/null 2>&1 && recent; then
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "Go not found; installing golang-go with apt-get" >&2
  bash "$(dirname "$0")/apt-install.sh" golang-go
fi
if ! recent; then
  echo "tests/compat/go needs Go 1.26+, found $(go version 2>&1); put a newer go on PATH" >&2
  exit 1
fi
