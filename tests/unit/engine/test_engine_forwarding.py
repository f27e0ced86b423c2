"""Auto-forwarding: ForwardTo, ForwardDeadLetteredMessagesTo, hop limit, transfer DLQ, chains."""

from __future__ import annotations

import pytest

from local_broker.engine import (
    EntityStatus,
    Namespace,
    NotAllowedError,
    QueueProperties,
    ReceiveMode,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    SubscriptionProperties,
    TopicProperties,
)

from .helpers import ids, msg

RAD = ReceiveMode.RECEIVE_AND_DELETE


def test_queue_forwards_in_order_with_new_numbers(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("dest"))
    ns.create_queue(QueueProperties("src", forward_to="dest"))
    ns.send("dest", msg(message_id="direct"))
    ns.send("src", [msg(message_id=str(i)) for i in range(5)])
    got = ns.receive("dest", 10)
    assert ids(got) == ["direct", "0", "1", "2", "3", "4"]
    assert [m.sequence_number for m in got] == [1, 2, 3, 4, 5, 6]
    assert [m.enqueued_sequence_number for m in got[1:]] == [1, 2, 3, 4, 5]  # the source's numbers
    rt = ns.get_queue_runtime_properties("src")
    assert rt.total_message_count == 0
    with pytest.raises(NotAllowedError) as err:
        ns.check_receiver("src")
    assert "auto-forwards" in err.value.description


def test_hop_limit_dead_letters_on_the_fifth_hop(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("q5"))
    for i in (4, 3, 2, 1, 0):
        ns.create_queue(QueueProperties(f"q{i}", forward_to=f"q{i + 1}"))
    ns.send("q0", msg(message_id="m"))  # q0->q1->q2->q3->q4 is 4 hops, q4->q5 would be the 5th
    assert ns.peek("q5", 0, 5) == []
    (dead,) = ns.receive("q4/$DeadLetterQueue", 5)
    assert dead.dead_letter_reason == "MaxTransferHopCountExceeded"
    assert "This value is set to 4." in dead.dead_letter_error_description
    ns.send("q1", msg(message_id="short"))  # 4 hops: arrives
    assert ids(ns.receive("q5", 5)) == ["short"]


@pytest.mark.parametrize("status", [EntityStatus.DISABLED, EntityStatus.SEND_DISABLED])
def test_disabled_destination_goes_to_transfer_dead_letter_and_stays(
    ns: Namespace, status: EntityStatus
) -> None:
    ns.create_queue(QueueProperties("dest"))
    ns.create_queue(QueueProperties("src", forward_to="dest"))
    props = ns.get_queue("dest")
    props.status = status
    ns.update_queue(props)
    ns.send("src", msg(message_id="m"))
    rt = ns.get_queue_runtime_properties("src")
    assert rt.transfer_dead_letter_message_count == 1 and rt.dead_letter_message_count == 0
    (m,) = ns.receive("src/$Transfer/$DeadLetterQueue", 5)
    assert m.message_id == "m" and m.dead_letter_reason == "MessagingEntityDisabled"


def test_destination_over_quota_goes_to_transfer_dead_letter(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("dest", max_size_in_megabytes=1))
    ns.create_queue(QueueProperties("src", forward_to="dest"))
    body = b"x" * (200 * 1024)
    for _ in range(6):
        ns.send("src", msg(body))
    assert ns.get_queue_runtime_properties("dest").active_message_count == 5
    assert ns.get_queue_runtime_properties("src").transfer_dead_letter_message_count == 1


def test_deleted_destination_goes_to_transfer_dead_letter(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("dest"))
    ns.create_queue(QueueProperties("src", forward_to="dest"))
    ns.delete_queue("dest")
    ns.send("src", msg(message_id="m"))
    assert ids(ns.peek("src/$Transfer/$DeadLetterQueue", 0, 5)) == ["m"]


def test_forward_dead_lettered_messages(ns: Namespace) -> None:
    ns.create_queue(QueueProperties("dlq-sink"))
    ns.create_queue(
        QueueProperties("work", forward_dead_lettered_messages_to="dlq-sink", max_delivery_count=1)
    )
    ns.send("work", [msg(message_id="a"), msg(message_id="b")])
    a, b = ns.receive("work", 2)
    ns.dead_letter("work", [a.lock_token], "bad", "desc")
    ns.abandon("work", [b.lock_token])  # max delivery count 1 -> dead-lettered -> forwarded
    got = ns.receive("dlq-sink", 5)
    assert ids(got) == ["a", "b"]
    assert all(m.dead_letter_source == "work" for m in got)
    assert got[0].dead_letter_reason == "bad" and got[1].dead_letter_reason == "MaxDeliveryCountExceeded"
    with pytest.raises(NotAllowedError):
        ns.receive("work/$DeadLetterQueue", 1)


def test_topic_to_topic_chain_20_by_10(ns: Namespace) -> None:
    ns.create_topic(TopicProperties("root"))
    for i in range(20):
        ns.create_topic(TopicProperties(f"level{i}"))
        ns.create_subscription("root", SubscriptionProperties(f"to{i}", forward_to=f"level{i}"))
        for j in range(10):
            ns.create_subscription(f"level{i}", SubscriptionProperties(f"s{j}"))
    ns.send("root", [msg(message_id=str(k)) for k in range(5)])
    for i in range(20):
        for j in range(10):
            got = ns.receive(f"level{i}/Subscriptions/s{j}", 100, RAD)
            assert ids(got) == ["0", "1", "2", "3", "4"], (i, j)
    assert all(
        ns.get_subscription_runtime_properties("root", f"to{i}").total_message_count == 0 for i in range(20)
    )


def test_rule_action_scheduled_time_is_honoured_when_a_subscription_forwards(ns: Namespace, clock) -> None:
    ns.create_queue(QueueProperties("later"))
    ns.create_topic(TopicProperties("t"))
    when = "2023-11-14T22:15:00Z"  # two minutes after the fake clock's start
    ns.create_subscription(
        "t",
        SubscriptionProperties("s", forward_to="later"),
        RuleProperties("r", SqlFilter("1=1"), SqlRuleAction(f"SET sys.ScheduledEnqueueTimeUtc = '{when}'")),
    )
    ns.send("t", msg(message_id="m"))
    assert ns.receive("later", 5) == []
    assert ns.get_queue_runtime_properties("later").scheduled_message_count == 1
    clock.advance(100)
    ns.tick()
    assert ids(ns.receive("later", 5)) == ["m"]
