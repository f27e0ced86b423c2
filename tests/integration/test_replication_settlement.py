"""The local host completes a batch in ranged dispositions (replicators/host/settlement.py), driven by the
real SDK against the broker: a batch from the prefetch buffer is one run of delivery ids, a gap splits it,
exactly the completed messages leave the queue, and a message whose lock expired goes through the SDK's
own `complete_message` and reports its lost lock."""

from __future__ import annotations

import time

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessageLockLostError

from replicators.host.settlement import complete_messages, delivery_runs


def send(client: ServiceBusClient, count: int) -> None:
    with client.get_queue_sender("work") as sender:
        sender.send_messages([ServiceBusMessage(b"x", message_id=f"m-{i}") for i in range(count)])


def receive(receiver, count: int) -> list:
    batch = []
    deadline = time.monotonic() + 30
    while len(batch) < count and time.monotonic() < deadline:
        batch += receiver.receive_messages(max_message_count=count - len(batch), max_wait_time=1)
    assert len(batch) == count
    return batch


def test_a_batch_completes_in_ranges_and_only_its_messages_leave(start_broker):
    server = start_broker({"namespaces": {"ns": {"queues": {"work": {}}}}})
    with ServiceBusClient.from_connection_string(server.namespaces["ns"].connection_string) as client:
        send(client, 10)
        with client.get_queue_receiver("work", prefetch_count=20) as receiver:
            batch = receive(receiver, 10)
            kept = batch[4]
            chosen = batch[:4] + batch[5:]
            assert [[m.message_id for m in run] for run in delivery_runs(chosen)] == [
                [f"m-{i}" for i in range(4)],
                [f"m-{i}" for i in range(5, 10)],
            ]
            results = list(complete_messages(receiver, chosen))
            assert [(m.message_id, exc) for m, exc in results] == [(m.message_id, None) for m in chosen]
            assert all(m.locked_until_utc is None for m in chosen)  # settled: nothing left to renew
            assert [m.message_id for m in receiver.peek_messages(20, sequence_number=1)] == [kept.message_id]
            assert list(complete_messages(receiver, [kept])) == [(kept, None)]
            assert receiver.peek_messages(20, sequence_number=1) == []


def test_messages_whose_lock_expired_report_it_and_come_back(start_broker):
    queue = {"work": {"lock_duration": "PT5S"}}
    server = start_broker({"namespaces": {"ns": {"queues": queue}}})
    with ServiceBusClient.from_connection_string(server.namespaces["ns"].connection_string) as client:
        send(client, 3)
        with client.get_queue_receiver("work", prefetch_count=10) as receiver:
            batch = receive(receiver, 3)
            time.sleep(5.5)  # the locks expire (5 s is the shortest lock duration)
            results = list(complete_messages(receiver, batch))
            assert [m.message_id for m, _ in results] == ["m-0", "m-1", "m-2"]
            assert all(isinstance(exc, MessageLockLostError) for _, exc in results)
            again = receive(receiver, 3)
            assert sorted(m.message_id for m in again) == ["m-0", "m-1", "m-2"]
            assert all(exc is None for _, exc in complete_messages(receiver, again))
