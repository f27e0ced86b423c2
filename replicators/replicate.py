"""One invocation of a replication task: copy each message of the batch, run the task's transform, send
the replicas. It returns only when every replica was accepted by the target, so the host completes the
source messages after their copies exist (at-least-once); any failure leaves them to be redelivered."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from replicators.copy import copy_message
from replicators.message import Replica, SourceMessage
from replicators.sending import ReplicaSender, TargetSenders
from replicators.tasks import ReplicationTask, Transform
from replicators.telemetry import copy_span, replication_metrics

log = logging.getLogger(__name__)


class PoisonMessageError(Exception):
    """The transform raised for some messages of a batch; every other message of the batch was replicated.

    `failures` maps each failed message's SequenceNumber to the exception, so a host that settles per
    message completes the rest and abandons only these; on a message's last delivery it dead-letters it
    with `DEAD_LETTER_REASON` and the exception as description, so the dead-letter queue says why."""

    DEAD_LETTER_REASON = "ReplicationTransformFailed"

    def __init__(self, task: str, failures: dict[int, BaseException], *, max_delivery_count: int) -> None:
        self.task = task
        self.failures = failures
        self.max_delivery_count = max_delivery_count
        first = next(iter(failures.values()))
        super().__init__(
            f"task '{task}': the transform rejected {len(failures)} message(s) "
            f"(sequence numbers {sorted(failures)}); first error: {type(first).__name__}: {first}"
        )

    def description(self, sequence_number: int) -> str:
        exc = self.failures[sequence_number]
        return f"task '{self.task}': {type(exc).__name__}: {exc}"[:1024]

    def is_last_delivery(self, delivery_count: int | None) -> bool:
        """The SDK's delivery count is the number of earlier deliveries (0 on the first)."""
        return (delivery_count or 0) + 1 >= self.max_delivery_count


@dataclass(frozen=True)
class ReplicationOutcome:
    sent: int
    dropped: int


class Replicator:
    """Runs one `replicate` task; shares the host's cached senders with every other task."""

    def __init__(
        self, task: ReplicationTask, senders: TargetSenders, transform: Transform | None = None
    ) -> None:
        if task.target is None:
            raise ValueError(f"task '{task.name}' has no target")
        self.task = task
        self._transform = transform
        self._sender = ReplicaSender(
            senders, task.target.connection, split_by_partition_key=task.target.facts.enable_partitioning,
            task=task.name,
        )

    def replicate(self, messages: Sequence[SourceMessage]) -> ReplicationOutcome:
        replicas: list[Replica] = []
        failures: dict[int, BaseException] = {}
        enqueued: list[dt.datetime] = []  # the sources of the replicas, for the lag
        target = self.task.target.entity if self.task.target else ""
        for message in messages:
            try:
                replica = self._copy(message, target)
            except Exception as exc:
                log.warning("task %s: transform failed for MessageId %s: %s", self.task.name,
                            message.message_id, exc)
                failures[message.sequence_number] = exc
                continue
            if replica is not None:
                replicas.append(replica)
                enqueued.append(message.enqueued_time_utc)
        self._sender.send(replicas)
        dropped = len(messages) - len(replicas) - len(failures)
        replication_metrics().replicated(self.task.name, self.task.source.entity, target, enqueued, dropped,
                                         dt.datetime.now(dt.UTC))
        if failures:
            raise PoisonMessageError(
                self.task.name, failures, max_delivery_count=self.task.source.facts.max_delivery_count
            )
        return ReplicationOutcome(sent=len(replicas), dropped=dropped)

    def _copy(self, message: SourceMessage, target: str) -> Replica | None:
        """The replica (None when the transform drops it), made inside the copy's span: its trace
        properties say that span, so the target's consumer continues the source's trace."""
        replica = copy_message(message, target_entity=target, options=self.task.options.copy)
        with copy_span(self.task.name, message.application_properties, replica.application_properties):
            if self._transform is None:
                return replica
            transformed = self._transform(replica)
            if transformed is not None and not isinstance(transformed, Replica):
                raise TypeError(f"a transform returns a Replica or None, not {type(transformed).__name__}")
            return transformed
