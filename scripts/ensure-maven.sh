#!/usr/bin/env bash
# The Java SDK compatibility suite (tests/compat/java) is built by Maven with a JDK; install Debian's maven
# and the JDK (javac) when they are missing.
set -euo pipefail
missing=()
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "${missing[*]} not found; installing with apt-get" >&2
bash "$(dirname "$0")/apt-install.sh" "${missing[@]}"
mvn -v | head -1
