#!/usr/bin/env bash
# Spark 4 needs Java 17 or newer; install Debian's headless JRE when it is missing.
set -euo pipefail
major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if command -v java >/dev/null 2>&1 && [ "$(major)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
echo "Java 17+ not found; installing openjdk-17-jre-headless with apt-get" >&2
bash "$(dirname "$0")/apt-install.sh" openjdk-17-jre-headless
java -version
