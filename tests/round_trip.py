"""One message through a queue with the real SDK: the check, shared by the suites, that a broker serves."""

from __future__ import annotations

from azure.servicebus import ServiceBusClient, ServiceBusMessage


def round_trip_on(client: ServiceBusClient, queue: str, body: str, *, receive_from: str | None = None,
                  wait: float = 10) -> None:
    """Send `body` to `queue`, receive it (from `receive_from` when it is forwarded) and complete it."""
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage(body))
    with client.get_queue_receiver(receive_from or queue, max_wait_time=wait) as receiver:
        got = receiver.receive_messages(max_message_count=1, max_wait_time=wait)
        assert [str(m) for m in got] == [body]
        receiver.complete_message(got[0])


def round_trip(connection_string: str, queue: str, body: str, *, receive_from: str | None = None,
               wait: float = 10) -> None:
    """The same on a client of its own that does not retry (a failure shows at once)."""
    with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client:
        round_trip_on(client, queue, body, receive_from=receive_from, wait=wait)
