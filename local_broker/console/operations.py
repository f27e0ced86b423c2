"""What the console asks of the engine. Each function runs on the engine's thread (`run_on_engine`) and
returns plain values, so no engine object leaves that thread.

The actions are the engine's own operations, as a client would drive them: peek, receive-and-delete
(purge), receive + send + complete (resubmit), send.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from local_broker.engine import BrokerError, Message, NotAllowedError, OperationTimeoutError, ReceiveMode
from local_broker.engine.entities import SUFFIXES, MessageTotals, SubQueueKind
from local_broker.engine.message import DEAD_LETTER_ERROR_DESCRIPTION, DEAD_LETTER_REASON
from local_broker.wire.amqp import codec
from local_broker.wire.amqp.values import encode_value

PURGE_BATCH = 500


@dataclass
class EntityRow:
    """One line of the entities page."""

    path: str
    kind: str  # "queue", "topic" or "subscription"
    status: str
    active: int
    dead_letter: int
    transfer_dead_letter: int
    scheduled: int
    deferred: int
    size: int
    partitions: int = 1
    totals: MessageTotals = field(default_factory=lambda: MessageTotals(0, 0, 0, 0, 0))
    requires_session: bool = False
    forward_to: str | None = None
    forward_dead_letters_to: str | None = None
    rules: list[str] = field(default_factory=list)

    @property
    def receivable(self) -> bool:
        return self.kind != "topic"


def entities(ns: Any) -> tuple[float, list[EntityRow]]:
    """When (the engine's clock), and every queue, topic and subscription with its counts then;
    subscriptions follow their topic."""
    rows = []
    for queue in ns.list_queues():
        rows.append(_row(ns, queue.name, "queue", queue, ns.get_queue_runtime_properties(queue.name),
                         ns.partition_count(queue.name)))
    for topic in ns.list_topics():
        rows.append(_row(ns, topic.name, "topic", topic, ns.get_topic_runtime_properties(topic.name),
                         ns.partition_count(topic.name)))
        for sub in ns.list_subscriptions(topic.name):
            path = f"{topic.name}/subscriptions/{sub.name}"
            row = _row(ns, path, "subscription", sub,
                       ns.get_subscription_runtime_properties(topic.name, sub.name), 1)
            row.rules = [_rule_text(rule) for rule in ns.list_rules(topic.name, sub.name)]
            rows.append(row)
    return ns.clock.now(), rows


def _row(ns: Any, path: str, kind: str, props: Any, runtime: Any, partitions: int) -> EntityRow:
    deferred = 0 if kind == "topic" else ns.deferred_message_count(path)
    return EntityRow(
        path=path, kind=kind, status=str(props.status.value), active=runtime.active_message_count - deferred,
        dead_letter=runtime.dead_letter_message_count,
        transfer_dead_letter=runtime.transfer_dead_letter_message_count,
        scheduled=runtime.scheduled_message_count, deferred=deferred, size=runtime.size_in_bytes,
        partitions=partitions, totals=ns.message_totals(path),
        requires_session=bool(getattr(props, "requires_session", False)),
        forward_to=getattr(props, "forward_to", None),
        forward_dead_letters_to=getattr(props, "forward_dead_lettered_messages_to", None))


def _rule_text(rule: Any) -> str:
    kind = type(rule.filter).__name__
    expression = getattr(rule.filter, "sql_expression", None)
    if expression is None:  # a correlation filter: the fields it matches
        expression = ", ".join(f"{f.name}={value!r}" for f in fields(rule.filter)
                               if (value := getattr(rule.filter, f.name)) is not None)
    text = f"{rule.name}: {kind}" + (f" ({expression})" if expression else "")
    action = getattr(rule.action, "sql_expression", None)
    return text + (f" then {action}" if action else "")


# --- messages ------------------------------------------------------------------------------------------

@dataclass
class PeekedMessage:
    sequence_number: int
    system: dict[str, Any]
    application: dict[str, Any]
    body: bytes | None  # the data sections' bytes; None when the body is an AMQP value or sequence
    body_value: str | None  # the repr of an AMQP value or sequence body


def peek(ns: Any, path: str, from_sequence_number: int, count: int) -> list[PeekedMessage]:
    return [_peeked(m) for m in ns.peek(path, from_sequence_number, count)]


def _peeked(m: Message) -> PeekedMessage:
    system = {
        "SequenceNumber": m.sequence_number, "MessageId": m.message_id, "CorrelationId": m.correlation_id,
        "SessionId": m.session_id, "PartitionKey": m.partition_key, "Subject": m.subject, "To": m.to,
        "ReplyTo": m.reply_to, "ContentType": m.content_type, "State": m.state.name.title(),
        "DeliveryCount": m.delivery_count, "EnqueuedTimeUtc": _utc(m.enqueued_time),
        "ExpiresAtUtc": _utc(m.expires_at), "ScheduledEnqueueTimeUtc": _utc(m.scheduled_enqueue_time),
        "LockedUntilUtc": _utc(m.locked_until),
        "DeadLetterSource": m.dead_letter_source, "PartitionId": m.partition_id, "Size": m.size,
    }
    data, values = codec.decode_body(m.body)
    shown = "\n".join(map(repr, values)) if values else None
    return PeekedMessage(m.sequence_number, {k: v for k, v in system.items() if v is not None},
                         dict(m.application_properties), data, shown)


def _utc(epoch_seconds: float | None) -> str | None:
    """ISO 8601, or None when unset; a time past year 9999 (the default time to live) reads as "never"."""
    if epoch_seconds is None:
        return None
    try:
        return datetime.fromtimestamp(epoch_seconds, UTC).isoformat()
    except (ValueError, OverflowError):
        return "never"


def data_body(payload: bytes) -> bytes:
    """A message body of one data section, as the SDKs send bytes and strings."""
    return codec.described(codec.DATA, encode_value(payload))


# --- actions -------------------------------------------------------------------------------------------

def send(ns: Any, path: str, message: Message) -> None:
    ns.send(path, message)
    ns.commit()


def purge(ns: Any, path: str) -> int:
    """Receive-and-delete until the (sub-)queue has nothing available; the number of messages removed.

    A session entity is received from as a session receiver would: each available session in turn (one
    that another receiver holds is left alone)."""
    try:
        ns.check_receiver(path, sessionful=True)
    except NotAllowedError:
        removed = _receive_and_delete(ns, path, None)
    else:
        removed = 0
        owner, done = object(), set()
        while True:
            try:
                lock = ns.accept_session(path, None, owner)
            except OperationTimeoutError:  # no session with messages available
                break
            try:
                removed += _receive_and_delete(ns, path, lock)
            finally:
                ns.release_session(path, lock.session_id, owner)
            if lock.session_id in done:  # its messages keep coming back (none were removable)
                break
            done.add(lock.session_id)
    ns.commit()
    return removed


def _receive_and_delete(ns: Any, path: str, session: Any) -> int:
    removed = 0
    while batch := ns.receive(path, PURGE_BATCH, ReceiveMode.RECEIVE_AND_DELETE, session=session):
        removed += len(batch)
    return removed


def resubmit_target(ns: Any, dead_letter_path: str) -> str:
    """Where a dead letter goes back to: its queue, or the topic of its subscription."""
    for kind in (SubQueueKind.TRANSFER_DEAD_LETTER, SubQueueKind.DEAD_LETTER):
        if dead_letter_path.endswith(SUFFIXES[kind]):
            return dead_letter_path.removesuffix(SUFFIXES[kind]).split("/subscriptions/")[0]
    raise NotAllowedError(f"'{dead_letter_path}' is not a dead-letter queue.")


def resubmit(ns: Any, dead_letter_path: str, sequence_numbers: set[int] | None) -> int:
    """Send copies of dead letters (all, or those numbered) to their entity and complete them; the count.

    Locked messages are left alone; the ones received but not chosen are released unchanged. Numbered ones
    are looked for among the first PURGE_BATCH available."""
    target = resubmit_target(ns, dead_letter_path)
    resent = 0
    received = ns.receive(dead_letter_path, PURGE_BATCH)
    while received:
        chosen = [m for m in received if sequence_numbers is None or m.sequence_number in sequence_numbers]
        try:
            for m in chosen:
                ns.send(target, _copy_for_resubmit(m))
        except BrokerError:
            ns.release(dead_letter_path, [m.lock_token for m in received])
            raise
        ns.complete(dead_letter_path, [m.lock_token for m in chosen])
        ns.release(dead_letter_path, [m.lock_token for m in received if m not in chosen])
        resent += len(chosen)
        if sequence_numbers is not None:  # one pass: the released ones would come back first
            break
        received = ns.receive(dead_letter_path, PURGE_BATCH)
    ns.commit()
    return resent


def _copy_for_resubmit(m: Message) -> Message:
    """The sender's message again: body, properties (without the dead-letter reason), ids."""
    properties = {k: v for k, v in m.application_properties.items()
                  if k not in (DEAD_LETTER_REASON, DEAD_LETTER_ERROR_DESCRIPTION)}
    return Message(m.body, properties, annotations=m.annotations, amqp_properties=m.amqp_properties,
                   message_id=m.message_id, correlation_id=m.correlation_id, session_id=m.session_id,
                   reply_to_session_id=m.reply_to_session_id, partition_key=m.partition_key,
                   subject=m.subject, to=m.to, reply_to=m.reply_to, content_type=m.content_type,
                   time_to_live=m.time_to_live)
