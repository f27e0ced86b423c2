#!/usr/bin/env bash
# Apache Kafka's own broker for the stream-to-queue tests and drill: the jars scripts/kafka/pom.xml pins
# (kafka_2.13 and its runtime dependencies, from Maven Central) copied into the cache, once per pom.xml.
# tests/kafka_broker.py and `sbfed drill stream-to-queue` run it with `java -cp <libs>/* kafka.Kafka`.
set -euo pipefail
cd "$(dirname "$0")/.."
POM=scripts/kafka/pom.xml
CACHE="${SBFED_KAFKA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/sbfed/kafka}"
STAMP="$CACHE/.installed-stamp"
WANT="$(sha256sum "$POM" | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -d "$CACHE/libs" ]; then
  exit 0
fi
echo "resolving Apache Kafka ($POM) into $CACHE/libs" >&2
rm -rf "$CACHE/libs"
mkdir -p "$CACHE"
mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$CACHE/libs"
echo "$WANT" > "$STAMP"
ls "$CACHE/libs" | grep -E '^kafka_2\.13-' >&2
