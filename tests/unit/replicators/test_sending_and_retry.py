"""Batching keeps order per session and partition key and respects the size limit; transient failures are
retried with backoff (fake sleep), permanent ones are not."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusMessageBatch
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthorizationError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusServerBusyError,
)

from replicators.errors import SendRetryPolicy, is_transient
from replicators.message import AmqpBody, Replica
from replicators.sending import group_for_sending, pack


def replica(n: int, *, session: str | None = None, key: str | None = None, entity: str = "q", size: int = 10):
    return Replica(
        entity=entity,
        body=AmqpBody.data(b"x" * size),
        message_id=f"m{n}",
        session_id=session,
        partition_key=key,
    )


def test_groups_keep_input_order_per_session():
    items = [replica(i, session=f"s{i % 3}") for i in range(9)]
    (group,) = group_for_sending(items, split_by_partition_key=False)
    assert [r.message_id for r in group.replicas] == [f"m{i}" for i in range(9)]


def test_partitioned_targets_get_one_group_per_key_in_first_seen_order():
    items = [
        replica(0, key="b"),
        replica(1, key="a"),
        replica(2, key="b"),
        replica(3),
        replica(4, session="a"),
    ]
    groups = group_for_sending(items, split_by_partition_key=True)
    assert [[r.message_id for r in g.replicas] for g in groups] == [["m0", "m2"], ["m1", "m4"], ["m3"]]


def test_rerouted_replicas_go_to_their_own_entity():
    groups = group_for_sending(
        [replica(0), replica(1, entity="quarantine"), replica(2)], split_by_partition_key=False
    )
    assert [(g.entity, len(g.replicas)) for g in groups] == [("q", 2), ("quarantine", 1)]


def test_pack_fills_batches_in_order_up_to_the_limit():
    messages = [replica(i, size=100).to_amqp() for i in range(20)]
    batches = pack(messages, lambda: ServiceBusMessageBatch(max_size_in_bytes=1000))
    counts = [count for _, count in batches]
    assert sum(counts) == 20 and len(batches) > 1
    assert all(batch.size_in_bytes <= 1000 for batch, _ in batches)
    assert [len(batch) for batch, _ in batches] == counts


def test_a_message_larger_than_an_empty_batch_is_permanent():
    with pytest.raises(MessageSizeExceededError, match="MessageId m0"):
        pack([replica(0, size=5000).to_amqp()], lambda: ServiceBusMessageBatch(max_size_in_bytes=1000))
    assert pack([], lambda: ServiceBusMessageBatch(max_size_in_bytes=1000)) == []


@pytest.mark.parametrize(
    "exc",
    [
        ServiceBusServerBusyError(message="busy"),
        ServiceBusConnectionError(message="lost"),
        OperationTimeoutError(message="t"),
        ServiceBusCommunicationError(message="c"),
    ],
)
def test_transient_errors(exc):
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        MessageSizeExceededError(message="big"),
        ServiceBusAuthorizationError(message="no"),
        MessagingEntityNotFoundError(message="nf"),
        MessagingEntityDisabledError(message="off"),
        ValueError("bug"),
    ],
)
def test_permanent_errors(exc):
    assert not is_transient(exc)


def run_with_policy(failures: list[BaseException], policy: SendRetryPolicy = SendRetryPolicy()):
    sleeps: list[float] = []
    attempts = 0
    for attempt in policy.retrying(sleep=sleeps.append):
        with attempt:
            attempts += 1
            if failures:
                raise failures.pop(0)
    return attempts, sleeps


def test_transient_failures_back_off_exponentially():
    attempts, sleeps = run_with_policy([ServiceBusServerBusyError(message="busy") for _ in range(4)])
    assert attempts == 5 and len(sleeps) == 4
    assert all(s >= 0.2 for s in sleeps) and sleeps[-1] > sleeps[0]
    assert max(sleeps) <= 10.2


def test_permanent_failure_is_raised_at_once():
    sleeps: list[float] = []
    with pytest.raises(MessagingEntityNotFoundError):
        for attempt in SendRetryPolicy().retrying(sleep=sleeps.append):
            with attempt:
                raise MessagingEntityNotFoundError(message="gone")
    assert sleeps == []
