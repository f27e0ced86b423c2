"""The applications of a drill: a paced producer, region-local consumers (all-active, spillover), and a
recording wrapper around receivers that logs every delivery, so a drill can check what the failover consumer
reports against what the broker actually handed it."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from azure.servicebus import ServiceBusMessage

from patterns.failover import NamespacesUnavailableError
from patterns.regions import Region, is_outage, message_record, settle
from replicators.audit import AuditSink

log = logging.getLogger(__name__)
RECONNECT_DELAY_SECONDS = 0.5
REMEMBER = 100_000  # MessageIds a local consumer keeps to recognise a repeated delivery


class PoisonMessage(Exception):
    """The drill's handlers refuse messages chosen as poison, so they fail everywhere (spillover)."""


@dataclass(frozen=True)
class Delivery:
    """One message as a receiver got it: from which namespace, enqueued there when, locked until when."""

    message_id: str
    namespace: str
    enqueued: dt.datetime  # EnqueuedTimeUtc in `namespace`
    locked_until: dt.datetime  # set by the broker when it delivered the message: that time + lock duration

    def delivered(self, lock_duration: dt.timedelta) -> dt.datetime:
        """When the broker handed the message over (its clock, like `enqueued`)."""
        return self.locked_until - lock_duration


@dataclass
class DeliveryLog:
    deliveries: list[Delivery] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, namespace: str, messages: Iterable[Any]) -> None:
        entries = [Delivery(str(m.message_id), namespace, m.enqueued_time_utc, m.locked_until_utc)
                   for m in messages]
        with self._lock:
            self.deliveries.extend(entries)

    def snapshot(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)


class RecordingReceiver:
    """A receiver link that logs each message `receive_messages` returns; everything else is the SDK's."""

    def __init__(self, link: Any, namespace: str, deliveries: DeliveryLog) -> None:
        self._link, self._namespace, self._deliveries = link, namespace, deliveries

    def receive_messages(self, **kwargs: Any) -> list[Any]:
        batch = self._link.receive_messages(**kwargs)
        self._deliveries.add(self._namespace, batch)
        return batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._link, name)


def recorded(region: Region, deliveries: DeliveryLog) -> Region:
    """The same region, its receivers wrapped in `RecordingReceiver`."""
    connect = region.connect
    return Region(region.name, lambda: RecordingReceiver(connect(), region.name, deliveries))


class Worker:
    """A daemon thread running `body(stop_event)`; an exception is kept and raised again by `join`."""

    def __init__(self, name: str, body: Callable[[threading.Event], None]) -> None:
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.name = name
        self._body = body
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Worker:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._body(self.stop_event)
        except BaseException as error:  # reported to the drill by join()
            log.exception("%s failed", self.name)
            self.error = error

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        self.join(timeout)

    def join(self, timeout: float = 30.0) -> None:
        self._thread.join(timeout)
        if self.error is not None:
            raise RuntimeError(f"{self.name} failed: {self.error}") from self.error


def numbered(index: int, message_id: str) -> ServiceBusMessage:
    """The patterns' drill message: a small JSON document."""
    return ServiceBusMessage(f'{{"n": {index}}}', message_id=message_id)


class Producer(Protocol):
    def send(self, message: Any) -> str: ...


@dataclass
class PacedProducer:
    """Sends `count` messages (MessageIds `<prefix>-000000`, ...; bodies and properties by `compose`) through
    a producer at `rate` messages per second; a message no namespace accepted is counted, never retried by
    hand."""

    producer: Producer
    prefix: str
    count: int
    rate: float
    compose: Callable[[int, str], ServiceBusMessage] = numbered
    sent: int = 0
    unsent: list[str] = field(default_factory=list)

    def message_id(self, index: int) -> str:
        return f"{self.prefix}-{index:06d}"

    def run(self, stop: threading.Event) -> None:
        started = time.monotonic()
        for index in range(self.count):
            delay = started + index / self.rate - time.monotonic()
            if delay > 0 and stop.wait(delay):
                return
            message_id = self.message_id(index)
            try:
                self.producer.send(self.compose(index, message_id))
            except NamespacesUnavailableError as error:
                log.error("%s", error)
                self.unsent.append(message_id)
                continue
            self.sent += 1


@dataclass
class RegionProducer:
    """A producer with one namespace and nowhere to fail over to (a recipe's source, which a drill keeps up):
    a send it refuses is reported as unsent; an accepted one gets a `sent` audit record."""

    region: Region
    entity: str
    audit: AuditSink

    def send(self, message: Any) -> str:
        try:
            self.region.link.send_messages(message)
        except Exception as error:
            if not is_outage(error):
                raise
            self.region.drop()
            raise NamespacesUnavailableError(
                f"MessageId {message.message_id} was not sent: {self.region.name}: {error}") from error
        now = dt.datetime.now(dt.UTC)
        self.audit.write([message_record("sent", message, namespace=self.region.name, entity=self.entity,
                                         enqueued=now, observed=now)])
        return self.region.name


class LocalConsumer:
    """The consumer of one region in a pattern where every region consumes on its own (all-active,
    spillover): receive, handle, complete, write a `processed` audit record. A handler failure abandons the
    message (its delivery count grows until the dead-letter queue takes it); an outage error drops the link
    and tries again, so the consumer resumes when the namespace is back.

    Like any application of these patterns it is idempotent by MessageId: a message handled just before its
    namespace failed cannot be completed, its lock expires and it is delivered again; the repeat is completed
    without handling and listed in `duplicates`. Competing consumers share what they handled (`seen`); a
    consumer of sessions (`sessions`) lets its session go when it has nothing more, to take the next one."""

    def __init__(
        self,
        region: Region,
        handler: Callable[[Any], None],
        *,
        entity: str,
        audit: AuditSink,
        processor: str,
        batch_size: int = 10,
        max_wait_time: float = 1.0,
        seen: OrderedDict[str, None] | None = None,
        sessions: bool = False,
    ) -> None:
        self.region, self.handler, self.entity, self.audit = region, handler, entity, audit
        self.processor, self.batch_size, self.max_wait_time = processor, batch_size, max_wait_time
        self.handled = 0
        self.duplicates: list[str] = []
        self._processed: OrderedDict[str, None] = OrderedDict() if seen is None else seen
        self._sessions = sessions

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self.poll(stop)
        finally:
            self.region.drop()

    def poll(self, stop: threading.Event) -> None:
        try:
            batch = self.region.link.receive_messages(
                max_message_count=self.batch_size, max_wait_time=self.max_wait_time
            )
        except Exception as error:
            if not is_outage(error):
                raise
            self.region.drop()
            stop.wait(RECONNECT_DELAY_SECONDS)
            return
        for message in batch:
            self._handle(message)
        if self._sessions and not batch:
            self.region.drop()

    def _handle(self, message: Any) -> None:
        message_id = str(message.message_id)
        if message_id in self._processed:
            self.duplicates.append(message_id)
            settle(self.region, message)
            return
        try:
            self.handler(message)
        except PoisonMessage:
            self._settle(message, abandon=True)
            return
        now = dt.datetime.now(dt.UTC)
        self.audit.write(
            [
                message_record(
                    "processed",
                    message,
                    namespace=self.region.name,
                    entity=self.entity,
                    enqueued=message.enqueued_time_utc,
                    observed=now,
                    processor=self.processor,
                )
            ]
        )
        self.handled += 1
        self._processed[message_id] = None
        if len(self._processed) > REMEMBER:
            self._processed.popitem(last=False)
        self._settle(message)

    def _settle(self, message: Any, *, abandon: bool = False) -> None:
        settle(self.region, message, abandon=abandon)


class TrackingSink:
    """An audit sink that also counts what passes, so a drill can show progress and tell when every sent
    message has been processed, without reading its own files back while it runs."""

    def __init__(self, inner: AuditSink, tracker: Tracker) -> None:
        self._inner, self._tracker = inner, tracker

    def write(self, records: Iterable[Any]) -> None:
        records = list(records)
        self._inner.write(records)
        self._tracker.add(records)

    def close(self) -> None:
        self._inner.close()


@dataclass
class Tracker:
    """MessageIds sent per namespace and processed per namespace, as the clients report them."""

    sent: dict[str, set[str]] = field(default_factory=dict)
    processed: dict[str, list[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, records: Iterable[Any]) -> None:
        with self._lock:
            for record in records:
                if record["event"] == "sent":
                    self.sent.setdefault(record["namespace"], set()).add(record["message_id"])
                elif record["event"] == "processed":
                    self.processed.setdefault(record["namespace"], []).append(record["message_id"])

    def sent_ids(self) -> set[str]:
        with self._lock:
            return set().union(*self.sent.values())

    def processed_ids(self) -> dict[str, set[str]]:
        """The MessageIds processed, per namespace."""
        with self._lock:
            return {namespace: set(ids) for namespace, ids in self.processed.items()}

    def counts(self) -> tuple[dict[str, int], int]:
        """Messages sent per namespace, and distinct MessageIds processed anywhere (the summary's
        `processed`)."""
        with self._lock:
            return (
                {ns: len(ids) for ns, ids in self.sent.items()},
                len(set().union(*self.processed.values())),
            )
