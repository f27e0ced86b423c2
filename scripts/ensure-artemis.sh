#!/usr/bin/env bash
# bench/amqp_compare.py measures Apache ActiveMQ Artemis (its AMQP 1.0 acceptor, a durable queue on its
# journal) next to sbfed's broker. Only the bench needs it, so `make setup` does not call this; the bench runs it
# the first time. Fetches the pinned binary distribution from Maven Central with Maven, checks its SHA-512,
# unpacks it under $SBFED_CACHE (default ~/.cache/sbfed) and prints the Artemis home. When it cannot, one line
# says why and the exit status is 1: the bench then skips only that comparison.
set -euo pipefail
VERSION=2.40.0
SHA512=270a00dc3028fb3b93c6aa09aa3e40fbe76015029e5308e0aac241589299a72dac9bb50a10e7e86ad66185e2d8bc7224626810df12f1ee05694322054ad32700
CACHE="${SBFED_CACHE:-$HOME/.cache/sbfed}"
HOME_DIR="$CACHE/apache-artemis-$VERSION"
if [ -x "$HOME_DIR/bin/artemis" ]; then
  echo "$HOME_DIR"
  exit 0
fi
fail() {
  echo "Artemis comparison skipped: $1" >&2
  exit 1
}
HERE="$(cd "$(dirname "$0")" && pwd)"
bash "$HERE/ensure-java.sh" >&2 || fail "no Java 17 (scripts/ensure-java.sh)"
bash "$HERE/ensure-maven.sh" >&2 || fail "no Maven (scripts/ensure-maven.sh)"
mkdir -p "$CACHE"
WORK="$(mktemp -d "$CACHE/artemis-download.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "fetching Apache ActiveMQ Artemis $VERSION from Maven Central" >&2
if ! mvn -q -B org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
  -Dartifact="org.apache.activemq:apache-artemis:$VERSION:tar.gz:bin" -DoutputDirectory="$WORK" \
  >"$WORK/mvn.log" 2>&1; then
  cat "$WORK/mvn.log" >&2
  fail "Maven could not fetch org.apache.activemq:apache-artemis:$VERSION:tar.gz:bin"
fi
ARCHIVE="$WORK/apache-artemis-$VERSION-bin.tar.gz"
echo "$SHA512  $ARCHIVE" | sha512sum -c --quiet - >&2 || fail "$ARCHIVE does not have the pinned SHA-512"
tar -xzf "$ARCHIVE" -C "$WORK"
mv "$WORK/apache-artemis-$VERSION" "$HOME_DIR"
echo "$HOME_DIR"
