"""The official emulator's connection string with the Java SDK: `UseDevelopmentEmulator=true` (plain AMQP,
no TLS) against `sbfed broker serve`, and the same string on the management port for its administration
client (HTTPS; the JVM trusts the broker's certificate through the trust store java_runner.py makes)."""

from __future__ import annotations

from java_runner import run_java
from test_js_emulator import _emulator_string


def test_the_emulator_connection_string_sends_and_receives(serve) -> None:
    namespace = serve({"namespaces": {"sbemulatorns": {}}})["sbemulatorns"]  # no policies: SAS_KEY_VALUE
    amqp_port = int(namespace.connection_string.split(";")[0].rsplit(":", 1)[1])
    admin_port = int(namespace.admin_url.rsplit(":", 1)[1])
    seen = run_java("emulator", namespace, "queue.1",
                    env={"SB_CONNECTION_STRING": _emulator_string(amqp_port),
                         "SB_ADMIN_CONNECTION_STRING": _emulator_string(admin_port)})
    assert seen == {"body": "from the Java SDK", "messageId": "java-1", "queue": "queue.1"}
