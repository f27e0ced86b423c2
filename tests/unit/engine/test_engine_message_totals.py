"""Each entity's totals of messages enqueued, completed, dead-lettered, delivered and abandoned (the
console's throughput, the broker's /metrics): every way a message arrives or leaves counts once, on the
entity where it happens."""

from __future__ import annotations

from datetime import timedelta

import pytest

from local_broker.engine import (
    FakeClock,
    Namespace,
    NotAllowedError,
    QueueProperties,
    ReceiveMode,
    SubscriptionProperties,
    TopicProperties,
)
from tests.unit.engine.helpers import msg


def test_a_queue_counts_sends_completions_and_dead_letters(ns: Namespace, queue: str) -> None:
    ns.send(queue, [msg(f"m{i}") for i in range(5)])
    assert ns.message_totals(queue)[:3] == (5, 0, 0)
    first, second, third = ns.receive(queue, 3)
    ns.complete(queue, [first.lock_token, second.lock_token])
    ns.dead_letter(queue, [third.lock_token], reason="Bad")
    ns.receive(queue, 1, ReceiveMode.RECEIVE_AND_DELETE)
    [deferred] = ns.receive(queue, 1)
    ns.defer(queue, [deferred.lock_token])
    ns.receive_deferred(queue, [deferred.sequence_number], ReceiveMode.RECEIVE_AND_DELETE)
    assert ns.message_totals(queue)[:3] == (5, 4, 1)
    [dead] = ns.receive(f"{queue}/$DeadLetterQueue", 1)
    ns.complete(f"{queue}/$DeadLetterQueue", [dead.lock_token])  # its dead-letter queue is the queue's
    assert ns.message_totals(queue)[:3] == (5, 5, 1)
    assert ns.message_totals(queue).delivered == 7  # 3 + 1 + 1 + the deferred one + the dead letter


def test_abandon_release_and_peek_complete_nothing(ns: Namespace, queue: str) -> None:
    ns.send(queue, msg())
    [m] = ns.receive(queue, 1)
    ns.abandon(queue, [m.lock_token])
    [m] = ns.receive(queue, 1)
    ns.release(queue, [m.lock_token])
    ns.peek(queue, 0, 10)
    assert ns.message_totals(queue) == (1, 0, 0, 2, 1)  # delivered twice, abandoned once (release is not)


def test_max_delivery_count_and_expiry_dead_letter(ns: Namespace, clock: FakeClock) -> None:
    ns.create_queue(QueueProperties("tired", max_delivery_count=1, dead_lettering_on_message_expiration=True,
                                    lock_duration=timedelta(seconds=30)))
    ns.send("tired", [msg("once"), msg("short", time_to_live=5.0)])
    [m] = ns.receive("tired", 1)
    ns.abandon("tired", [m.lock_token])
    clock.advance(10)
    ns.tick()
    assert ns.message_totals("tired")[:3] == (2, 0, 2)


def test_a_scheduled_message_is_enqueued_when_its_time_comes(ns: Namespace, clock: FakeClock,
                                                             queue: str) -> None:
    ns.schedule(queue, msg(scheduled_enqueue_time=clock.now() + 60))
    assert ns.message_totals(queue)[:3] == (0, 0, 0)
    clock.advance(61)
    ns.tick()
    assert ns.message_totals(queue)[:3] == (1, 0, 0)


def test_topics_subscriptions_and_forwards_count_their_own(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("audit"))
    ns.create_topic(TopicProperties("events"))
    ns.create_subscription("events", SubscriptionProperties("all", forward_to="audit"))
    ns.create_subscription("events", SubscriptionProperties("kept"))
    ns.create_subscription("events", SubscriptionProperties("dead",
                                                            forward_dead_lettered_messages_to="audit"))
    ns.send("events", [msg("a"), msg("b")])
    assert ns.message_totals("events")[:3] == (2, 0, 0)
    assert ns.message_totals("events/subscriptions/all")[:3] == (2, 0, 0)  # forwarded on arrival
    assert ns.message_totals("audit")[:3] == (2, 0, 0)
    [m, _] = ns.receive("events/subscriptions/dead", 2)
    ns.dead_letter("events/subscriptions/dead", [m.lock_token])
    assert ns.message_totals("events/subscriptions/dead")[:3] == (2, 0, 1)
    assert ns.message_totals("audit")[:3] == (3, 0, 0)  # the dead letter forwarded there
    assert ns.message_totals("events/subscriptions/kept")[:3] == (2, 0, 0)
    with pytest.raises(NotAllowedError, match="sub-queue"):
        ns.message_totals("audit/$DeadLetterQueue")
