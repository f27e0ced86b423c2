"""Engine-level transactions: sends and settlements that take effect together or not at all (semantics 16).

A `Transaction` only records operations; `Namespace.commit_transaction` validates every one of
them first (locks, sizes, quotas, partition-key rules) and then applies them in order, so a failure
leaves nothing half done. Receive is not transactional (receive in peek-lock, settle in the transaction).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from local_broker.engine.entities import Queue, SubQueue, Subscription, Topic
from local_broker.engine.errors import NotAllowedError, OperationTimeoutError
from local_broker.engine.message import Message

MAX_MESSAGES_PER_TRANSACTION = 100
TRANSACTION_TIMEOUT_SECONDS = 120.0


@dataclass(slots=True)
class _Send:
    path: str
    messages: list[Message]
    via: str | None


@dataclass(slots=True)
class _Settle:
    kind: str  # complete, abandon, defer, dead_letter
    path: str
    lock_tokens: list[uuid.UUID]
    session_id: str | None
    properties_to_modify: dict[str, Any] | None = None
    reason: str | None = None
    description: str | None = None


@dataclass(slots=True)
class Transaction:
    """Operations to apply atomically with `Namespace.commit_transaction`; drop it to roll back."""

    started: float
    operations: list[_Send | _Settle] = field(default_factory=list)

    def send(self, path: str, messages: Message | list[Message], *, via: str | None = None) -> None:
        """Send to `path`; with `via`, through that transfer entity (send-via), raising the hop count."""
        batch = [messages] if isinstance(messages, Message) else list(messages)
        self.operations.append(_Send(path, batch, via))

    def complete(self, path: str, lock_tokens: Iterable[uuid.UUID], *, session_id: str | None = None) -> None:
        self.operations.append(_Settle("complete", path, list(lock_tokens), session_id))

    def abandon(
        self,
        path: str,
        lock_tokens: Iterable[uuid.UUID],
        properties_to_modify: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> None:
        self.operations.append(_Settle("abandon", path, list(lock_tokens), session_id, properties_to_modify))

    def defer(
        self,
        path: str,
        lock_tokens: Iterable[uuid.UUID],
        properties_to_modify: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> None:
        self.operations.append(_Settle("defer", path, list(lock_tokens), session_id, properties_to_modify))

    def dead_letter(
        self,
        path: str,
        lock_tokens: Iterable[uuid.UUID],
        reason: str | None = None,
        description: str | None = None,
        properties_to_modify: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> None:
        self.operations.append(
            _Settle(
                "dead_letter", path, list(lock_tokens), session_id, properties_to_modify, reason, description
            )
        )


class Transactions:
    """The namespace side of transactions (a mixin of `Namespace`)."""

    clock: Any

    def transaction(self) -> Transaction:
        return Transaction(self.clock.now())

    def commit_transaction(self, txn: Transaction) -> None:
        """Validate every operation, then apply them all; raises (and applies nothing) on any problem."""
        ns: Any = self
        now = self.clock.now()
        if now - txn.started > TRANSACTION_TIMEOUT_SECONDS:
            raise OperationTimeoutError(
                "The transaction timed out: it must be committed within 2 minutes of its first operation."
            )
        sends = [op for op in txn.operations if isinstance(op, _Send)]
        if sum(len(op.messages) for op in sends) > MAX_MESSAGES_PER_TRANSACTION:
            raise NotAllowedError("Can't send more than 100 messages in a single transaction.")
        plans = self._check_sends(ns, sends)
        settled: set[int] = set()
        for op in txn.operations:
            if isinstance(op, _Settle):
                for m in ns._locked(op.path, op.lock_tokens, op.session_id):
                    if id(m) in settled:
                        raise NotAllowedError("A message cannot be settled twice in one transaction.")
                    settled.add(id(m))
                    if op.kind == "dead_letter" and m.entity.kind.name != "MAIN":
                        raise NotAllowedError(
                            "A message in a dead-letter queue cannot be dead-lettered again."
                        )
        for op in txn.operations:
            if isinstance(op, _Send):
                target, via = plans[id(op)]
                target.accessed = now
                for m in op.messages:
                    if via is None:
                        ns._accept(target, m, now, False)
                    else:
                        ns._transfer(via, m, target.path, now)
            elif op.kind == "complete":
                ns.complete(op.path, op.lock_tokens, session_id=op.session_id)
            elif op.kind == "abandon":
                ns.abandon(op.path, op.lock_tokens, op.properties_to_modify, session_id=op.session_id)
            elif op.kind == "defer":
                ns.defer(op.path, op.lock_tokens, op.properties_to_modify, session_id=op.session_id)
            else:
                ns.dead_letter(
                    op.path,
                    op.lock_tokens,
                    op.reason,
                    op.description,
                    op.properties_to_modify,
                    session_id=op.session_id,
                )
        txn.operations.clear()
        ns._flush_available()

    @staticmethod
    def _check_sends(
        ns: Any, sends: list[_Send]
    ) -> dict[int, tuple[Queue | Topic, Queue | Subscription | None]]:
        plans: dict[int, tuple[Queue | Topic, Queue | Subscription | None]] = {}
        by_target: dict[int, tuple[Queue | Topic, list[Message], bool]] = {}
        for op in sends:
            via_entity = None
            if op.via is None:
                target = ns._send_target(op.path)
            else:
                via = ns._lookup(op.via)
                via_entity = via.entity if isinstance(via, SubQueue) else via
                if not isinstance(via_entity, Queue | Subscription):
                    raise NotAllowedError(
                        f"'{op.via}' cannot be a transfer entity: send-via goes through a queue or "
                        "subscription."
                    )
                target = ns._lookup(op.path)
                if not isinstance(target, Queue | Topic):
                    raise NotAllowedError(
                        f"Cannot send to '{target.path}': only queues and topics accept messages."
                    )
            plans[id(op)] = (target, via_entity)
            entry = by_target.setdefault(id(target), (target, [], via_entity is None))
            entry[1].extend(op.messages)
        for target, messages, direct in by_target.values():
            # Over-quota or disabled destinations of a send-via end on the via's transfer DLQ instead.
            ns._validate_batch(target, messages, check_quota=direct)
            if target.partitioned:
                keys = {ns._partition_key(target, m) for m in messages}
                if None in keys:
                    raise NotAllowedError(
                        f"Messages sent to the partitioned entity '{target.path}' in a transaction need a "
                        "partition key (SessionId or PartitionKey)."
                    )
                if len(keys) > 1:
                    raise NotAllowedError(
                        f"All messages sent to the partitioned entity '{target.path}' in one transaction "
                        "must share one partition key, and may not span sessions."
                    )
        return plans
