"""Sending replicas: one cached ServiceBusSender per target entity, batches that respect the size limit,
order kept per session and partition key, transient failures retried from the first unsent message."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessageBatch, ServiceBusSender
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import MessageSizeExceededError

from replicators.connections import resolve_connection
from replicators.errors import SendRetryPolicy, is_transient
from replicators.message import Replica
from replicators.telemetry import replication_metrics


class TargetSenders:
    """Clients and senders shared by every invocation of a host: opening a link per batch would cost a
    connection, SASL, CBS and an attach each time. Thread-safe; one caller per sender at a time (`lock`).
    A sender is addressed by entity path, which is the same for a queue and a topic."""

    def __init__(self, settings: Mapping[str, str], **client_kwargs: Any) -> None:
        self._settings = settings
        self._client_kwargs = client_kwargs
        self._clients: dict[str, ServiceBusClient] = {}
        self._senders: dict[tuple[str, str], ServiceBusSender] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, connection: str, entity: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((connection, entity), threading.Lock())

    def sender(self, connection: str, entity: str) -> ServiceBusSender:
        with self._guard:
            key = (connection, entity)
            if key not in self._senders:
                if connection not in self._clients:
                    conn = resolve_connection(connection, self._settings)
                    self._clients[connection] = conn.client(**self._client_kwargs)
                self._senders[key] = self._clients[connection].get_queue_sender(entity)
            return self._senders[key]

    def discard(self, connection: str, entity: str) -> None:
        """Drop a sender after a connection fault so the next attempt opens a fresh link."""
        with self._guard:
            sender = self._senders.pop((connection, entity), None)
        if sender is not None:
            try:
                sender.close()
            except Exception:  # the link is already broken; closing is best effort
                pass

    def close(self) -> None:
        with self._guard:
            senders, clients = list(self._senders.values()), list(self._clients.values())
            self._senders.clear()
            self._clients.clear()
        for handler in [*senders, *clients]:
            handler.close()


@dataclass
class SendGroup:
    """Replicas for one target entity whose relative order must hold (same entity; on a partitioned target
    also the same partition key, because a batch lands in one partition)."""

    entity: str
    replicas: list[Replica] = field(default_factory=list)


def group_for_sending(replicas: Iterable[Replica], *, split_by_partition_key: bool) -> list[SendGroup]:
    """Groups in first-seen order; each group keeps the input order, so every session's and partition
    key's messages go out in the order they were received."""
    groups: dict[tuple[str, str | None], SendGroup] = {}
    for replica in replicas:
        key = (
            replica.entity,
            (replica.partition_key or replica.session_id) if split_by_partition_key else None,
        )
        groups.setdefault(key, SendGroup(replica.entity)).replicas.append(replica)
    return list(groups.values())


def pack(
    messages: Sequence[AmqpAnnotatedMessage], new_batch: Callable[[], ServiceBusMessageBatch]
) -> list[tuple[ServiceBusMessageBatch, int]]:
    """Fill batches in order up to the link's size limit; each with how many messages it holds. A message
    that does not fit an empty batch can never be sent: that is permanent."""
    batches: list[tuple[ServiceBusMessageBatch, int]] = []
    batch, count = new_batch(), 0
    for index, message in enumerate(messages):
        try:
            batch.add_message(message)
        except MessageSizeExceededError:
            if count == 0:
                raise MessageSizeExceededError(
                    message=f"message {index} (MessageId {message.properties.message_id}) is larger than the "
                    f"target's limit of {batch.max_size_in_bytes} bytes"
                ) from None
            batches.append((batch, count))
            batch, count = new_batch(), 0
            batch.add_message(message)
        count += 1
    if count:
        batches.append((batch, count))
    return batches


class ReplicaSender:
    """Sends replicas to one target connection; returns only once every replica was accepted."""

    def __init__(
        self,
        senders: TargetSenders,
        connection: str,
        *,
        split_by_partition_key: bool = False,
        retry: SendRetryPolicy = SendRetryPolicy(),
        sleep: Callable[[float], None] | None = None,
        task: str = "",
    ) -> None:
        """`task`: the name its retries are counted under (replication_metrics)."""
        self._senders = senders
        self._task = task
        self._connection = connection
        self._split = split_by_partition_key
        self._retry = retry
        self._sleep = sleep

    def send(self, replicas: Sequence[Replica]) -> int:
        for group in group_for_sending(replicas, split_by_partition_key=self._split):
            self._send_group(group)
        return len(replicas)

    def _send_group(self, group: SendGroup) -> None:
        messages = [replica.to_amqp() for replica in group.replicas]
        sent = 0
        retrying = self._retry.retrying(sleep=self._sleep) if self._sleep else self._retry.retrying()
        with self._senders.lock(self._connection, group.entity):
            for attempt in retrying:
                if attempt.retry_state.attempt_number > 1:
                    replication_metrics().retries.add(1, {"task": self._task, "target": group.entity})
                with attempt:
                    try:
                        sender = self._senders.sender(self._connection, group.entity)
                        for batch, count in pack(messages[sent:], sender.create_message_batch):
                            sender.send_messages(batch)
                            sent += count
                    except Exception as exc:
                        if is_transient(exc):
                            self._senders.discard(self._connection, group.entity)
                        raise
