"""The local Functions host with an app of its own (not the replication app): single-message triggers,
the function retry policy, complete on success and abandon after the last retry, slow-batch lock renewal."""

from __future__ import annotations

import textwrap
import time

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from replicators.host.host import FunctionsHost
from replicators.host.hostjson import ServiceBusHostOptions

APP = textwrap.dedent(
    """
    import azure.functions as func

    app = func.FunctionApp()
    calls = {}

    @app.function_name("flaky")
    @app.retry(strategy="fixed_delay", max_retry_count="2", delay_interval="00:00:00.2")
    @app.service_bus_queue_trigger(arg_name="msg", connection="NS", queue_name="work")
    def flaky(msg: func.ServiceBusMessage) -> None:
        key = msg.message_id
        calls[key] = calls.get(key, 0) + 1
        assert msg.metadata["MessageId"] == key and msg.enqueued_time_utc is not None
        if key == "always-fails" or calls[key] <= 2:
            raise RuntimeError(f"attempt {calls[key]} of {key} failed")
    """
)


def test_single_message_trigger_retries_then_completes_or_abandons(tmp_path, start_broker):
    server = start_broker({"namespaces": {"ns": {"queues": {"work": {"max_delivery_count": 10}}}}})
    connection_string = server.namespaces["ns"].connection_string
    (tmp_path / "function_app.py").write_text(APP)
    options = ServiceBusHostOptions(max_concurrent_calls=1)
    with ServiceBusClient.from_connection_string(connection_string) as client:
        with client.get_queue_sender("work") as sender:
            sender.send_messages(
                [
                    ServiceBusMessage(b"a", message_id="third-time-lucky"),
                    ServiceBusMessage(b"b", message_id="always-fails"),
                ]
            )
        host = FunctionsHost(tmp_path / "function_app.py", options, {"NS": connection_string})
        host.start()
        stats = host.runners[0].stats
        deadline = time.monotonic() + 30
        while stats.abandoned < 2 and time.monotonic() < deadline:  # two deliveries of the failing one
            time.sleep(0.1)
        host.shutdown()
        with client.get_queue_receiver("work", max_wait_time=2) as receiver:
            left = receiver.receive_messages(max_message_count=10, max_wait_time=2)
    app = __import__("function_app")
    assert app.calls["third-time-lucky"] == 3 and stats.completed == 1
    assert app.calls["always-fails"] >= 6  # each delivery: one call and two retries
    assert stats.abandoned >= 2 and stats.failed_invocations >= 8
    assert [m.message_id for m in left] == ["always-fails"] and left[0].delivery_count >= 2


def test_slow_batch_renewal_skips_messages_settled_before_it_starts(tmp_path, start_broker):
    """The renewal timer of a slow batch can fire while the batch is being settled: the messages settled
    already are skipped (the SDK's renewer raises on them), the others keep their locks."""
    queue = {"work": {"lock_duration": "PT5S"}}
    server = start_broker({"namespaces": {"ns": {"queues": queue}}})
    connection_string = server.namespaces["ns"].connection_string
    (tmp_path / "function_app.py").write_text(APP)
    host = FunctionsHost(tmp_path / "function_app.py", ServiceBusHostOptions(), {"NS": connection_string})
    runner = host.runners[0]
    with ServiceBusClient.from_connection_string(connection_string) as client:
        with client.get_queue_sender("work") as sender:
            sender.send_messages([ServiceBusMessage(b"x", message_id=f"m-{i}") for i in range(3)])
        with client.get_queue_receiver("work", max_wait_time=2) as receiver:
            batch = receiver.receive_messages(max_message_count=3, max_wait_time=2)
            assert len(batch) == 3
            receiver.complete_message(batch[0])
            first_lock = [m.locked_until_utc for m in batch[1:]]
            runner._renew_unsettled(receiver, batch, budget=30)
            deadline = time.monotonic() + 10
            while not renewed(batch[1:], first_lock) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert renewed(batch[1:], first_lock)
            for message in batch[1:]:
                receiver.complete_message(message)
    runner.join(0)


def renewed(messages, locks) -> bool:
    return all(m.locked_until_utc > lock for m, lock in zip(messages, locks, strict=True))
