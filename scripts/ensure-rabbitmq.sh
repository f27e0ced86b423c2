#!/usr/bin/env bash
# bench/amqp_compare.py measures RabbitMQ (AMQP 1.0 plugin) next to sbfed's broker; install Debian's
# rabbitmq-server when it is missing. When it cannot, print one line saying how and exit 1: the bench then
# skips only that comparison.
set -euo pipefail
installed() {
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] &&
    compgen -G "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_amqp1_0*" >/dev/null
}
installed && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "RabbitMQ not found; installing rabbitmq-server (with its AMQP 1.0 plugin) with apt-get" >&2
if command -v apt-get >/dev/null 2>&1 && $SUDO apt-get update -qq &&
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq rabbitmq-server >/dev/null && installed; then
  exit 0
fi
echo "RabbitMQ comparison skipped: install Debian's rabbitmq-server (apt-get install rabbitmq-server) to run it" >&2
exit 1
