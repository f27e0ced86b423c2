"""Two local namespaces and the replication Functions app, for the replication integration tests and
bench/replicate.py: messages with sessions, partition keys and typed application properties, and the
checks that compare every property of a replica with what the producer sent."""

from __future__ import annotations

import datetime as dt
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
)

from patterns.drills.broker import BrokerNamespace
from replicators.host.host import FunctionsHost
from replicators.host.hostjson import ServiceBusHostOptions
from replicators.message import CONTENT_FIELDS, decode_application_properties

REPO = Path(__file__).resolve().parents[2]
RECEIVE_AND_DELETE = ServiceBusReceiveMode.RECEIVE_AND_DELETE
APP = REPO / "function_app.py"
SESSIONS = 20
PARTITION_KEYS = 16


def topology(
    *,
    lock_duration: str = "PT30S",
    max_delivery_count: int = 10,
    transform: str | None = None,
    audit: str | None = None,
) -> dict[str, Any]:
    """primary/sessions (session queue) and primary/events (topic) replicate to the same names on
    secondary, whose entities deduplicate; secondary/events has a `check` and an `audit` subscription."""
    source_queue = {
        "requires_session": True,
        "lock_duration": lock_duration,
        "max_delivery_count": max_delivery_count,
    }
    target = {"requires_duplicate_detection": True, "duplicate_detection_history_time_window": "PT10M"}
    options: dict[str, Any] = {"batch_size": 100, "concurrency": 2}
    if transform:
        options["transform"] = transform
    tasks: list[dict[str, Any]] = [
        {
            "name": "sessions-to-secondary",
            "source": {"connection": "PRIMARY", "queue": "sessions"},
            "target": {"connection": "SECONDARY", "queue": "sessions"},
            "options": options,
        },
        {
            "name": "events-to-secondary",
            "source": {"connection": "PRIMARY", "topic": "events", "subscription": "to-secondary"},
            "target": {"connection": "SECONDARY", "topic": "events"},
            "options": options,
        },
    ]
    raw: dict[str, Any] = {
        "namespaces": {
            "primary": {
                "queues": {"sessions": source_queue},
                "topics": {
                    "events": {
                        "subscriptions": {
                            "to-secondary": {
                                "lock_duration": lock_duration,
                                "max_delivery_count": max_delivery_count,
                            }
                        }
                    }
                },
            },
            "secondary": {
                "queues": {"sessions": {**target, "requires_session": True}, "quarantine": {}},
                "topics": {"events": {**target, "subscriptions": {"check": {}, "audit": {}}}},
            },
        },
        "connections": {"PRIMARY": "primary", "SECONDARY": "secondary"},
        "tasks": tasks,
    }
    if audit:
        tasks.append(
            {
                "name": "audit-secondary-events",
                "kind": "audit",
                "source": {"connection": "SECONDARY", "topic": "events", "subscription": "audit"},
            }
        )
        raw["audit"] = {"sink": audit}
    return raw


def settings_for(namespaces: Mapping[str, BrokerNamespace], topology_path: Path) -> dict[str, str]:
    return {
        "PRIMARY": namespaces["primary"].connection_string,
        "SECONDARY": namespaces["secondary"].connection_string,
        "SBFED_TOPOLOGY": str(topology_path),
    }


HOST_OPTIONS = ServiceBusHostOptions(
    prefetch_count=200,
    max_concurrent_calls=2,
    max_concurrent_sessions=4,
    max_message_batch_size=100,
    session_idle_timeout=dt.timedelta(milliseconds=500),
)


@contextmanager
def functions_host(
    settings: Mapping[str, str], options: ServiceBusHostOptions = HOST_OPTIONS, **kwargs: Any
) -> Iterator[FunctionsHost]:
    """The repository's function_app.py run by the local host in this process (settings exported first,
    as the host's CLI does)."""
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    host = FunctionsHost(APP, options, os.environ, **kwargs)
    host.start()
    try:
        yield host
    finally:
        host.shutdown()
        sys.modules["function_app"].runtime.close()  # while the brokers still answer
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass(frozen=True)
class Sent:
    message_id: str
    fields: dict[str, Any]
    properties: dict[str, Any]
    body: bytes
    ttl: dt.timedelta


def session_message(i: int, sessions: int = SESSIONS) -> tuple[ServiceBusMessage, Sent]:
    session = f"session-{i % sessions}"
    return _message(i, session_id=session, partition_key=session if i % 2 else None)


def keyed_message(i: int) -> tuple[ServiceBusMessage, Sent]:
    return _message(i, session_id=None, partition_key=f"key-{i % PARTITION_KEYS}")


def _message(i: int, *, session_id: str | None, partition_key: str | None) -> tuple[ServiceBusMessage, Sent]:
    fields = {
        "message_id": f"msg-{i:06d}-{'s' if session_id else 'k'}",
        "session_id": session_id,
        "partition_key": partition_key,
        "correlation_id": f"corr-{i}",
        "subject": "order-created" if i % 3 else "order-updated",
        "to": "orders-eu",
        "reply_to": "replies",
        "reply_to_session_id": f"reply-{i % 5}",
        "content_type": "application/json",
    }
    properties = {
        "seq": i,
        "tenant": f"tenant-{i % 7}",
        "ratio": i / 8,
        "urgent": i % 2 == 0,
        "note": "ünïcode",
    }
    body = f'{{"order": {i}, "pad": "{"x" * (i % 50)}"}}'.encode()
    ttl = dt.timedelta(minutes=30 + i % 30)
    message = ServiceBusMessage(
        body,
        application_properties=dict(properties),
        time_to_live=ttl,
        **{k: v for k, v in fields.items() if v is not None},
    )
    return message, Sent(fields["message_id"], fields, properties, body, ttl)


def send_all(
    connection_string: str, entity: str, messages: list[ServiceBusMessage], batch: int = 200
) -> None:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_sender(entity) as sender,
    ):
        for start in range(0, len(messages), batch):
            sender.send_messages(messages[start : start + batch])


def drain_queue_sessions(
    connection_string: str, queue: str, expected: Mapping[str, int], timeout: float, workers: int = 4
) -> list[ServiceBusReceivedMessage]:
    """Every message of a session queue, `expected` per session id, each session taken by name (so no
    receiver waits for "the next available session") by a few receivers side by side."""
    received: list[ServiceBusReceivedMessage] = []
    pending = list(expected)
    deadline = time.monotonic() + timeout
    lock = threading.Lock()

    def take_sessions(client: ServiceBusClient) -> None:
        while time.monotonic() < deadline:
            with lock:
                if not pending:
                    return
                session_id = pending.pop()
            taken: list[ServiceBusReceivedMessage] = []
            # Receive-and-delete: the check reads content and holds no lock a slow, loaded run could outlive.
            mode = RECEIVE_AND_DELETE
            with client.get_queue_receiver(queue, session_id=session_id, receive_mode=mode) as rx:
                while len(taken) < expected[session_id] and time.monotonic() < deadline:
                    taken.extend(rx.receive_messages(max_message_count=200, max_wait_time=0.5))
            with lock:
                received.extend(taken)

    with ServiceBusClient.from_connection_string(connection_string) as client:
        threads = [threading.Thread(target=take_sessions, args=(client,)) for _ in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return received


def drain_subscription(
    connection_string: str, topic: str, subscription: str, expected: int, timeout: float
) -> list[ServiceBusReceivedMessage]:
    received: list[ServiceBusReceivedMessage] = []
    deadline = time.monotonic() + timeout
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_subscription_receiver(topic, subscription, receive_mode=RECEIVE_AND_DELETE) as rx,
    ):
        while len(received) < expected and time.monotonic() < deadline:
            received.extend(rx.receive_messages(max_message_count=200, max_wait_time=1))
        # anything beyond `expected` would be a duplicate: give it a moment to show up
        received.extend(rx.receive_messages(max_message_count=200, max_wait_time=1))
    return received


def mismatches(sent: Mapping[str, Sent], replica: ServiceBusReceivedMessage, *, source: str) -> list[str]:
    """Every difference between a replica and what the producer sent, plus the stamps' presence."""
    original = sent[replica.message_id]
    problems = []
    for name in (n for n in CONTENT_FIELDS if n != "time_to_live"):  # compared below, with its own type
        if getattr(replica, name) != original.fields[name]:
            problems.append(f"{name}: {getattr(replica, name)!r} != {original.fields[name]!r}")
    if list(replica.body) != [original.body]:
        problems.append("body differs")
    if replica.time_to_live != original.ttl:
        problems.append(f"time_to_live: {replica.time_to_live} != {original.ttl}")
    props = decode_application_properties(replica.application_properties)
    for name, value in original.properties.items():
        if props.get(name) != value or type(props.get(name)) is not type(value):
            problems.append(f"property {name}: {props.get(name)!r} != {value!r}")
    if props.get("repl-source") != source:
        problems.append(f"repl-source {props.get('repl-source')!r} != {source!r}")
    if not str(props.get("repl-sequence", "")).isdigit() or not props.get("repl-enqueued-time"):
        problems.append("repl-* stamps missing")
    return problems
