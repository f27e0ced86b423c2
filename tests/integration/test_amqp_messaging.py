"""Messaging through the real azure-servicebus SDK (sync and async) against the local broker's AMQP endpoint.

One broker (in memory) serves the whole module; each test uses its own entities so tests do not interfere.
Each SDK sender/receiver open+close costs about a second client-side, so tests reuse them.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from local_broker.server import BrokerServer
from tests.integration.tls_clients import SDK_STACKS, sdk_client
from topology import parse

TOPOLOGY = {"namespaces": {"msg": {
    "local": {"max_message_size_kb": 1024},
    "queues": {
        "basic": {}, "batch": {}, "settle": {"max_delivery_count": 5}, "deadletter": {}, "renew": {},
        "scheduled": {}, "partitioned": {"enable_partitioning": True}, "large": {}, "async": {},
        "async-sessions": {"requires_session": True},
    },
    "topics": {"orders": {"subscriptions": {
        "all": {},
        "red": {"rules": {"only-red": {"filter": {"sql": "color = 'red'"}}}},
    }}},
}}}


@pytest.fixture(scope="module")
def broker():
    with BrokerServer(parse(TOPOLOGY)) as server:
        yield server


@pytest.fixture(scope="module", params=SDK_STACKS)
def client(broker, request):
    with sdk_client(broker, request.param, "msg") as sb:
        yield sb


def test_send_receive_complete_keeps_every_property(client) -> None:
    sent = ServiceBusMessage(
        "hello", application_properties={"k": "v", "n": 7}, subject="subj", message_id="m1",
        correlation_id="c1", content_type="text/plain", to="dest", reply_to="back",
        time_to_live=datetime.timedelta(minutes=5))
    with client.get_queue_sender("basic") as sender:
        sender.send_messages(sent)
    with client.get_queue_receiver("basic", max_wait_time=5) as receiver:
        [msg] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(msg) == "hello"
        assert msg.application_properties == {b"k": b"v", b"n": 7}
        assert (msg.subject, msg.message_id, msg.correlation_id, msg.content_type) == ("subj", "m1", "c1",
                                                                                       "text/plain")
        assert (msg.to, msg.reply_to) == ("dest", "back")
        assert msg.time_to_live == datetime.timedelta(minutes=5)
        assert msg.delivery_count == 0
        assert msg.sequence_number >= 1
        assert isinstance(msg.lock_token, uuid.UUID | str)
        assert msg.locked_until_utc > msg.enqueued_time_utc
        receiver.complete_message(msg)
        assert receiver.peek_messages(max_message_count=5) == []


def test_batch_send_then_receive_and_delete_with_prefetch(client) -> None:
    with client.get_queue_sender("batch") as sender:
        batch = sender.create_message_batch()
        for i in range(20):
            batch.add_message(ServiceBusMessage(f"b{i}"))
        sender.send_messages(batch)
        sender.send_messages([ServiceBusMessage(f"l{i}") for i in range(5)])
    received = []
    with client.get_queue_receiver("batch", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                   prefetch_count=10, max_wait_time=2) as receiver:
        while len(received) < 25:
            chunk = receiver.receive_messages(max_message_count=25, max_wait_time=2)
            if not chunk:
                break
            received.extend(chunk)
    assert [str(m) for m in received] == [f"b{i}" for i in range(20)] + [f"l{i}" for i in range(5)]
    assert all(m.lock_token is None for m in received)
    assert len({m.sequence_number for m in received}) == 25


def test_abandon_defer_and_receive_deferred(client) -> None:
    with client.get_queue_sender("settle") as sender:
        sender.send_messages([ServiceBusMessage("again"), ServiceBusMessage("later")])
    with client.get_queue_receiver("settle", max_wait_time=5) as receiver:
        first, second = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        receiver.abandon_message(first)
        receiver.defer_message(second)
        [redelivered] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(redelivered) == "again" and redelivered.delivery_count == 1
        receiver.complete_message(redelivered)
        [deferred] = receiver.receive_deferred_messages([second.sequence_number])
        assert str(deferred) == "later"
        receiver.complete_message(deferred)  # settles through $management update-disposition
        assert receiver.peek_messages(max_message_count=5) == []


def test_dead_letter_with_reason_lands_in_the_dead_letter_queue(client) -> None:
    with client.get_queue_sender("deadletter") as sender:
        sender.send_messages(ServiceBusMessage("bad"))
    with client.get_queue_receiver("deadletter", max_wait_time=5) as receiver:
        [msg] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(msg, reason="poison", error_description="cannot parse")
    with client.get_queue_receiver("deadletter", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                   max_wait_time=5) as dlq:
        [dead] = dlq.receive_messages(max_message_count=1, max_wait_time=5)
        assert str(dead) == "bad"
        assert (dead.dead_letter_reason, dead.dead_letter_error_description) == ("poison", "cannot parse")
        dlq.complete_message(dead)
    with client.get_queue_receiver("deadletter", sub_queue=ServiceBusSubQueue.TRANSFER_DEAD_LETTER,
                                   max_wait_time=1) as tdlq:
        assert tdlq.receive_messages(max_message_count=1, max_wait_time=1) == []


def test_renew_lock_extends_it(client) -> None:
    with client.get_queue_sender("renew") as sender:
        sender.send_messages(ServiceBusMessage("hold"))
    with client.get_queue_receiver("renew", max_wait_time=5) as receiver:
        [msg] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        before = msg.locked_until_utc
        after = receiver.renew_message_lock(msg)
        assert after >= before
        receiver.complete_message(msg)


def test_schedule_peek_and_cancel(client) -> None:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    with client.get_queue_sender("scheduled") as sender:
        numbers = sender.schedule_messages([ServiceBusMessage("s1"), ServiceBusMessage("s2")], when)
        assert len(numbers) == 2
        with client.get_queue_receiver("scheduled", max_wait_time=1) as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            assert [str(m) for m in peeked] == ["s1", "s2"]
            assert all(m.scheduled_enqueue_time_utc is not None for m in peeked)
            assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
            sender.cancel_scheduled_messages(numbers)
            assert receiver.peek_messages(max_message_count=10) == []


def test_topic_fans_out_through_subscription_rules(client) -> None:
    with client.get_topic_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage("r", application_properties={"color": "red"}),
                              ServiceBusMessage("b", application_properties={"color": "blue"})])
    with client.get_subscription_receiver("orders", "all", max_wait_time=5) as receiver:
        got = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        assert sorted(str(m) for m in got) == ["b", "r"]
        for m in got:
            receiver.complete_message(m)
    with client.get_subscription_receiver("orders", "red", max_wait_time=5) as receiver:
        got = receiver.receive_messages(max_message_count=2, max_wait_time=2)
        assert [str(m) for m in got] == ["r"]
        receiver.complete_message(got[0])


def test_partitioned_queue_keeps_partition_keys(client) -> None:
    with client.get_queue_sender("partitioned") as sender:
        sender.send_messages([ServiceBusMessage(f"p{i}", partition_key=f"key{i % 3}") for i in range(6)])
    with client.get_queue_receiver("partitioned", max_wait_time=5) as receiver:
        got = []
        while len(got) < 6:
            chunk = receiver.receive_messages(max_message_count=6, max_wait_time=5)
            assert chunk
            got.extend(chunk)
        assert sorted(m.partition_key for m in got) == sorted(f"key{i % 3}" for i in range(6))
        for m in got:
            receiver.complete_message(m)


def test_large_messages_travel_in_several_frames(client) -> None:
    payload = bytes(range(256)) * 3600  # 900 KB
    with client.get_queue_sender("large") as sender:
        sender.send_messages(ServiceBusMessage(payload))
    with client.get_queue_receiver("large", max_wait_time=5) as receiver:
        [msg] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert b"".join(msg.body) == payload
        receiver.complete_message(msg)


def test_async_client_every_settlement_peek_schedule_sessions_and_errors(broker) -> None:
    async def scenario() -> None:
        conn = broker.namespaces["msg"].connection_string
        async with AsyncServiceBusClient.from_connection_string(conn, retry_total=0) as sb:
            when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
            async with sb.get_queue_sender("async") as sender:
                batch = await sender.create_message_batch()
                for body in ("complete", "abandon", "defer", "dead"):
                    batch.add_message(ServiceBusMessage(body))
                await sender.send_messages(batch)
                [scheduled] = await sender.schedule_messages(ServiceBusMessage("later"), when)
                await sender.cancel_scheduled_messages(scheduled)
            async with sb.get_queue_receiver("async", max_wait_time=5, prefetch_count=10) as receiver:
                got = {str(m): m for m in await receiver.receive_messages(max_message_count=4,
                                                                            max_wait_time=5)}
                assert set(got) == {"complete", "abandon", "defer", "dead"}
                assert await receiver.renew_message_lock(got["abandon"]) >= got["complete"].locked_until_utc
                await receiver.complete_message(got["complete"])
                await receiver.abandon_message(got["abandon"])
                await receiver.defer_message(got["defer"])
                await receiver.dead_letter_message(got["dead"], reason="r", error_description="d")
                [again] = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                assert (str(again), again.delivery_count) == ("abandon", 1)
                await receiver.complete_message(again)
                [deferred] = await receiver.receive_deferred_messages([got["defer"].sequence_number])
                await receiver.complete_message(deferred)
                assert await receiver.peek_messages(max_message_count=5) == []
            async with sb.get_queue_receiver("async", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                             max_wait_time=5) as dlq:
                [dead] = await dlq.receive_messages(max_message_count=1, max_wait_time=5)
                assert dead.dead_letter_reason == "r"
                await dlq.complete_message(dead)
            async with sb.get_queue_sender("async-sessions") as sender:
                await sender.send_messages(ServiceBusMessage("s", session_id="A"))
            assert [sid async for sid in sb.list_queue_sessions("async-sessions")] == ["A"]
            async with sb.get_queue_receiver("async-sessions", session_id=NEXT_AVAILABLE_SESSION,
                                             max_wait_time=5) as receiver:
                await receiver.session.set_state(b"state")
                assert await receiver.session.get_state() == b"state"
                await receiver.session.renew_lock()
                [msg] = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                await receiver.complete_message(msg)
            with pytest.raises(ServiceBusAuthenticationError):  # CBS: 404 for a token naming no entity
                async with sb.get_queue_sender("missing") as sender:
                    await sender.send_messages(ServiceBusMessage("x"))

    asyncio.run(scenario())
