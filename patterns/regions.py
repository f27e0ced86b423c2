"""What the failover clients need around them: a clock, the two namespaces as sender/receiver factories
(the SDK in production, plain fakes in unit tests), and the audit records they write (docs/audit-log.md)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from azure.servicebus import ServiceBusClient
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageSizeExceededError,
    ServiceBusError,
    SessionLockLostError,
)

from replicators.message import decode_application_properties
from replicators.stamps import REPL_ENQUEUED_TIME, REPL_SEQUENCE, REPL_SOURCE, iso_utc, read_stamp

PRIMARY, SECONDARY = "primary", "secondary"
log = logging.getLogger(__name__)


class Clock(Protocol):
    def now(self) -> dt.datetime: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def is_outage(error: BaseException) -> bool:
    """An error that another namespace could avoid: Service Bus or network trouble, not a bad message."""
    return isinstance(error, ServiceBusError | OSError) and not isinstance(error, MessageSizeExceededError)


def receiver_shut_down(error: BaseException) -> bool:
    """The SDK closes a receiver after a connection error, and settling the rest of the batch it had handed
    out then raises a plain ValueError ("... the handler has already been shutdown"). Those messages' locks
    expire and they are delivered again, like after a lost lock. (A received peek-lock message raises no
    other ValueError when settled.)"""
    return isinstance(error, ValueError) and "shutdown" in str(error)


@dataclass
class Region:
    """One namespace as a failover client uses it: a name for the audit log and a factory for its link
    (a sender with `send_messages`, or a receiver with `receive_messages`, `peek_messages`,
    `complete_message`, `abandon_message`; both with `close`). The link is opened lazily and dropped after an
    outage error, so the next use reconnects."""

    name: str
    connect: Callable[[], Any]
    _link: Any = None

    @property
    def link(self) -> Any:
        if self._link is None:
            self._link = self.connect()
        return self._link

    def drop(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            try:
                link.close()
            except Exception:  # closing a broken link may fail again; the link is discarded either way
                pass


def sdk_regions(
    connection_strings: Mapping[str, str], *, topic: str | None = None, subscription: str | None = None,
    queue: str | None = None, receive: bool = False, client_options: Mapping[str, Any] | None = None,
) -> tuple[Region, Region]:
    """Primary and secondary from connection strings: senders to `topic`, receivers from its `subscription`,
    or senders to `queue` (receivers from it with `receive=True`). The SDK's own retries are cut to one, so
    the failover policy decides."""
    entity = {"topic": topic, "subscription": subscription, "queue": queue, "receive": receive,
              "client_options": client_options}
    return (sdk_region(PRIMARY, connection_strings[PRIMARY], **entity),
            sdk_region(SECONDARY, connection_strings[SECONDARY], **entity))


def sdk_region(
    name: str, connection_string: str, *, topic: str | None = None, subscription: str | None = None,
    queue: str | None = None, receive: bool = False, client_options: Mapping[str, Any] | None = None,
) -> Region:
    """One namespace's region, as `sdk_regions` builds each of its two."""
    if (topic is None) == (queue is None) or (queue is not None and subscription is not None):
        raise ValueError("name a topic (and optionally its subscription) or a queue")
    client = ServiceBusClient.from_connection_string(connection_string,
                                                     **{"retry_total": 0, **(client_options or {})})
    if queue is not None:
        return Region(name, lambda: client.get_queue_receiver(queue) if receive
                      else client.get_queue_sender(queue))
    if subscription is None:
        return Region(name, lambda: client.get_topic_sender(topic))
    return Region(name, lambda: client.get_subscription_receiver(topic, subscription))


def message_record(
    event: str, message: Any, *, namespace: str, entity: str, enqueued: dt.datetime, observed: dt.datetime,
    processor: str | None = None,
) -> dict[str, Any]:
    """An audit record for a message a client sent (`sent`) or handled (`processed`)."""
    properties = decode_application_properties(getattr(message, "application_properties", None))
    ttl = getattr(message, "time_to_live", None)
    record = {
        "event": event,
        "namespace": namespace,
        "entity": entity,
        "message_id": message.message_id,
        "enqueued_time_utc": iso_utc(enqueued),
        "sequence_number": getattr(message, "sequence_number", None),
        "partition_key": getattr(message, "partition_key", None),
        "session_id": getattr(message, "session_id", None),
        "ttl_seconds": ttl.total_seconds() if ttl else None,
        "repl_enqueued_time": read_stamp(properties, REPL_ENQUEUED_TIME),
        "repl_sequence": read_stamp(properties, REPL_SEQUENCE),
        "repl_source": read_stamp(properties, REPL_SOURCE),
        "observed_time_utc": iso_utc(observed),
        "processor": processor,
    }
    return {key: value for key, value in record.items() if value is not None}


def settle(region: Region, message: Any, *, abandon: bool = False) -> None:
    """Complete (or abandon) a message a client received from `region`. A lost lock means it comes back, and
    deduplication catches it; a failure of the namespace is noticed by the next receive."""
    try:
        if abandon:
            region.link.abandon_message(message)
        else:
            region.link.complete_message(message)
    except (MessageLockLostError, SessionLockLostError):
        log.info("lock lost for MessageId %s; it will be delivered again", message.message_id)
    except Exception as err:
        if not is_outage(err) and not receiver_shut_down(err):
            raise
        log.warning("settling MessageId %s in %s failed: %s", message.message_id, region.name, err)
