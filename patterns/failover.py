"""Failover clients for active-passive: a producer that moves to the secondary when the primary keeps failing
and back when a probe succeeds, and a consumer that follows it without handling a message twice.

Both are synchronous state machines over two `Region`s and a `Clock`, so the policy is unit-tested with
plain fake senders/receivers and a fake clock; `sdk_regions` builds the real ones. Both log every message
they sent or processed in the audit format (docs/audit-log.md) when given a sink.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from patterns.regions import (
    PRIMARY,
    SECONDARY,
    Clock,
    Region,
    SystemClock,
    is_outage,
    message_record,
    settle,
)
from replicators.audit import AuditSink
from replicators.message import decode_application_properties
from replicators.stamps import origin_enqueued_time

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FailoverPolicy:
    attempts: int = 3  # failed attempts in a row on the active namespace before failing over
    retry_delay: float = 0.5  # seconds between those attempts
    probe_interval: float = 5.0  # seconds between probes of the primary while failed over

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.retry_delay < 0 or self.probe_interval <= 0:
            raise ValueError(f"invalid {self}: needs attempts >= 1, retry_delay >= 0, probe_interval > 0")


@dataclass(frozen=True)
class FailoverEvent:
    time: dt.datetime
    kind: str  # failover | failback-started | failback
    reason: str


class NamespacesUnavailableError(Exception):
    """Neither namespace accepted the operation; the message says what each one answered."""


class _Switching:
    """The part both clients share: which region is active, when to probe the primary, the event log."""

    def __init__(self, primary: Region, secondary: Region, policy: FailoverPolicy, clock: Clock,
                 audit: AuditSink | None) -> None:
        self.primary, self.secondary = primary, secondary
        self.policy, self.clock, self.audit = policy, clock, audit
        self.active = PRIMARY
        self.events: list[FailoverEvent] = []
        self._next_probe = clock.now()

    @property
    def on_primary(self) -> bool:
        return self.active == PRIMARY

    def _switch(self, active: str, kind: str, reason: str) -> None:
        self.active = active
        self.events.append(FailoverEvent(self.clock.now(), kind, reason))
        log.warning("%s: %s (%s)", type(self).__name__, kind, reason)
        self._schedule_probe()

    def _schedule_probe(self) -> None:
        self._next_probe = self.clock.now() + dt.timedelta(seconds=self.policy.probe_interval)

    def _probe_due(self) -> bool:
        return self.clock.now() >= self._next_probe

    def _write(self, record: dict[str, Any]) -> None:
        if self.audit is not None:
            self.audit.write([record])


class FailoverProducer(_Switching):
    """Publishes to the primary; after `policy.attempts` failed sends in a row, to the secondary. While failed
    over, every `probe_interval` the next message is offered to the primary first: if it is accepted, the
    producer is back on the primary. A send that failed may still have arrived, so a message can exist in
    both namespaces: it keeps its MessageId (one is assigned if missing), which consumers deduplicate by."""

    def __init__(self, primary: Region, secondary: Region, *, entity: str,
                 policy: FailoverPolicy = FailoverPolicy(), clock: Clock | None = None,
                 audit: AuditSink | None = None) -> None:
        super().__init__(primary, secondary, policy, clock or SystemClock(), audit)
        self.entity = entity

    def send(self, message: Any) -> str:
        """Send one message (an SDK `ServiceBusMessage`); returns the namespace that accepted it."""
        if message.message_id is None:
            message.message_id = uuid.uuid4().hex
        errors: dict[str, BaseException] = {}
        if not self.on_primary and self._probe_due():
            if self._try(self.primary, message, errors):
                self._switch(PRIMARY, "failback", "the primary accepted a probe send")
                return PRIMARY
            self._schedule_probe()
        if self.on_primary:
            if self._attempts(self.primary, message, errors):
                return PRIMARY
            failure = errors[self.primary.name]
            self._switch(SECONDARY, "failover", f"{self.policy.attempts} failed sends: {failure}")
        if self._attempts(self.secondary, message, errors):
            return SECONDARY
        raise NamespacesUnavailableError(
            f"MessageId {message.message_id} was not sent: "
            + "; ".join(f"{name}: {type(err).__name__}: {err}" for name, err in errors.items()))

    def _attempts(self, region: Region, message: Any, errors: dict[str, BaseException]) -> bool:
        for attempt in range(self.policy.attempts):
            if attempt:
                self.clock.sleep(self.policy.retry_delay)
            if self._try(region, message, errors):
                return True
        return False

    def _try(self, region: Region, message: Any, errors: dict[str, BaseException]) -> bool:
        try:
            region.link.send_messages(message)
        except Exception as err:
            if not is_outage(err):
                raise
            errors[region.name] = err
            region.drop()
            return False
        now = self.clock.now()
        self._write(message_record("sent", message, namespace=region.name, entity=self.entity,
                                   enqueued=now, observed=now))
        return True


@dataclass(frozen=True)
class DuplicateDelivery:
    """A message delivered again after it was processed: skipped (caught by MessageId or by the watermark),
    or processed a second time when deduplication is off."""

    message_id: str
    namespace: str
    first_processed_in: str | None  # None when only the watermark recognised it
    caught_by: str  # message-id | watermark
    processed_again: bool


@dataclass
class ConsumerOptions:
    clock_skew: dt.timedelta = dt.timedelta(seconds=5)  # watermark allowance (clock drift, processing order)
    batch_size: int = 10
    max_wait_time: float = 1.0  # seconds a receive waits; an empty receive while draining ends the drain
    remember: int = 100_000  # processed MessageIds kept for deduplication
    deduplicate: bool = True  # False: handle duplicates again (and report them), to measure them
    processor: str = "consumer"  # written to the audit records' `processor`
    publishers_on_primary: Callable[[], bool] = field(default=lambda: True)


class FailoverConsumer(_Switching):
    """Consumes the primary; fails over to the secondary after `policy.attempts` failed receives in a row.

    On the secondary it skips what it already processed: by MessageId, and by a watermark — the latest
    EnqueuedTimeUtc it processed on the primary — against each replica's `repl-enqueued-time` (the primary's
    clock), minus `clock_skew`. The watermark only moves on the primary, so a replica that expired unprocessed
    cannot hide a primary message from a later failback.

    Failback follows the seed's order: once a probe (peek, which takes nothing) finds the primary healthy and
    `publishers_on_primary()` confirms the producers are back there, the consumer drains the secondary until
    a receive comes back empty or brings a replica of a message published after the drain began, then
    consumes the primary again (skipping by MessageId what it handled on the
    secondary). Every repeated delivery is reported in `duplicates`."""

    def __init__(self, primary: Region, secondary: Region, handler: Callable[[Any], None], *, entity: str,
                 policy: FailoverPolicy = FailoverPolicy(), options: ConsumerOptions | None = None,
                 clock: Clock | None = None, audit: AuditSink | None = None) -> None:
        super().__init__(primary, secondary, policy, clock or SystemClock(), audit)
        self.handler = handler
        self.entity = entity
        self.options = options or ConsumerOptions()
        self.draining = False
        self.watermark: dt.datetime | None = None
        self.processed: OrderedDict[str, str] = OrderedDict()  # MessageId -> namespace that processed it
        self.duplicates: list[DuplicateDelivery] = []
        self._failures = 0
        self._drain_started = self.clock.now()

    def poll(self) -> int:
        """Receive and handle one batch from the active namespace, switching namespaces as the policy says.
        Returns how many messages were handled (skipped duplicates not counted)."""
        if not self.on_primary and not self.draining and self._probe_due():
            self._probe()
        region = self.primary if self.on_primary else self.secondary
        try:
            batch = region.link.receive_messages(max_message_count=self.options.batch_size,
                                                 max_wait_time=self.options.max_wait_time)
        except Exception as err:
            if not is_outage(err):
                raise
            region.drop()
            self._receive_failed(region, err)
            return 0
        self._failures = 0
        if self.draining and not batch:
            self.draining = False
            self._switch(PRIMARY, "failback", "the secondary is drained")
            return 0
        handled = sum(self._handle(region, message) for message in batch)
        if self.draining and any(self._published_since_drain(message) for message in batch):
            self.draining = False
            self._switch(PRIMARY, "failback", "the secondary is drained up to replicas of new messages")
        return handled

    def run(self, until: Callable[[], bool]) -> int:
        handled = 0
        while not until():
            handled += self.poll()
        return handled

    def _receive_failed(self, region: Region, err: BaseException) -> None:
        if region is self.secondary:
            if self.draining:  # what is left on the secondary waits there for the next failover
                self.draining = False
                self._switch(PRIMARY, "failback", f"the secondary failed while draining: {err}")
            else:
                self.clock.sleep(self.policy.retry_delay)
            return
        self._failures += 1
        if self._failures >= self.policy.attempts:
            self._failures = 0
            self._switch(SECONDARY, "failover", f"{self.policy.attempts} failed receives: {err}")
        else:
            self.clock.sleep(self.policy.retry_delay)

    def _probe(self) -> None:
        self._schedule_probe()
        if not self.options.publishers_on_primary():
            return
        try:
            self.primary.link.peek_messages(max_message_count=1)
        except Exception as err:
            if not is_outage(err):
                raise
            self.primary.drop()
            return
        self.draining = True
        self._drain_started = self.clock.now()
        self.events.append(FailoverEvent(self.clock.now(), "failback-started", "the primary answered a peek"))

    def _published_since_drain(self, message: Any) -> bool:
        """A replica of a message the primary took after the drain began. Replication keeps feeding the
        secondary while the publishers are back on the primary, so a drain may never see an empty receive;
        but the secondary's own messages were all enqueued before the drain began (the publishers had left),
        so once such a replica arrives, everything queued ahead of it — those messages — has been received."""
        properties = decode_application_properties(message.application_properties)
        origin = origin_enqueued_time(properties)
        return origin is not None and origin > self._drain_started + self.options.clock_skew

    def _handle(self, region: Region, message: Any) -> int:
        message_id = str(message.message_id)
        caught_by = self._already_processed(region, message, message_id)
        if caught_by and self.options.deduplicate:
            self.duplicates.append(DuplicateDelivery(message_id, region.name, self.processed.get(message_id),
                                                     caught_by, processed_again=False))
            settle(region, message)
            return 0
        try:
            self.handler(message)
        except Exception:
            log.exception("handler failed for MessageId %s; abandoning it", message_id)
            settle(region, message, abandon=True)
            return 0
        if caught_by:
            self.duplicates.append(DuplicateDelivery(message_id, region.name, self.processed.get(message_id),
                                                     caught_by, processed_again=True))
        self._remember(message_id, region.name)
        if region is self.primary:
            enqueued = message.enqueued_time_utc
            self.watermark = enqueued if self.watermark is None else max(self.watermark, enqueued)
        now = self.clock.now()
        self._write(message_record("processed", message, namespace=region.name, entity=self.entity,
                                   enqueued=message.enqueued_time_utc, observed=now,
                                   processor=self.options.processor))
        settle(region, message)
        return 1

    def _already_processed(self, region: Region, message: Any, message_id: str) -> str | None:
        if message_id in self.processed:
            return "message-id"
        if region is self.secondary and self.watermark is not None:
            properties = decode_application_properties(message.application_properties)
            origin = origin_enqueued_time(properties) or message.enqueued_time_utc
            if origin < self.watermark - self.options.clock_skew:
                return "watermark"
        return None

    def _remember(self, message_id: str, namespace: str) -> None:
        self.processed[message_id] = namespace
        self.processed.move_to_end(message_id)
        while len(self.processed) > self.options.remember:
            self.processed.popitem(last=False)
