#!/usr/bin/env bash
# Apache Kafka's own broker for the stream-to-queue tests and drill: the jars scripts/kafka/pom.xml pins
# (kafka_2.13 and its runtime dependencies, from Maven Central) copied into $SBFED_CACHE/kafka (default
# ~/.cache/sbfed/kafka), once per pom.xml. patterns/drills/kafka_broker.py runs them (`java -cp libs/* kafka.Kafka`).
# Maven's output is shown only when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
POM=scripts/kafka/pom.xml
KAFKA="${SBFED_CACHE:-$HOME/.cache/sbfed}/kafka"
STAMP="$KAFKA/.installed-stamp"
WANT="$(sha256sum "$POM" | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -d "$KAFKA/libs" ]; then
  exit 0
fi
echo "resolving Apache Kafka ($POM) into $KAFKA/libs" >&2
rm -rf "$KAFKA/libs"
mkdir -p "$KAFKA"
if ! mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
  -DoutputDirectory="$KAFKA/libs" >"$KAFKA/mvn.log" 2>&1; then
  cat "$KAFKA/mvn.log" >&2
  echo "Maven could not resolve $POM; see above" >&2
  exit 1
fi
echo "$WANT" > "$STAMP"
