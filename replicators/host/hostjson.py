"""host.json's `extensions.serviceBus` settings, in the extension 5.x shape (flat keys) or the legacy 2.x-4.x
shape (`messageHandlerOptions`, `sessionHandlerOptions`, `batchOptions`)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from topology.durations import parse_timespan


@dataclass(frozen=True)
class ServiceBusHostOptions:
    """Defaults are the extension's own (prefetch 0, auto-complete, 5 min lock renewal, 16 calls, 8 sessions,
    batches of up to 1000 handed over as soon as one message arrived; with a larger `minMessageBatchSize`,
    at most 30 s of waiting for it)."""

    prefetch_count: int = 0
    auto_complete_messages: bool = True
    max_auto_lock_renewal_duration: dt.timedelta = dt.timedelta(minutes=5)
    max_concurrent_calls: int = 16
    max_concurrent_sessions: int = 8
    max_message_batch_size: int = 1000
    min_message_batch_size: int = 1
    max_batch_wait_time: dt.timedelta = dt.timedelta(seconds=30)
    session_idle_timeout: dt.timedelta = dt.timedelta(seconds=5)


_FLAT = {
    "prefetchCount": ("prefetch_count", int),
    "autoCompleteMessages": ("auto_complete_messages", bool),
    "maxAutoLockRenewalDuration": ("max_auto_lock_renewal_duration", parse_timespan),
    "maxConcurrentCalls": ("max_concurrent_calls", int),
    "maxConcurrentSessions": ("max_concurrent_sessions", int),
    "maxMessageBatchSize": ("max_message_batch_size", int),
    "minMessageBatchSize": ("min_message_batch_size", int),
    "maxBatchWaitTime": ("max_batch_wait_time", parse_timespan),
    "sessionIdleTimeout": ("session_idle_timeout", parse_timespan),
}
_LEGACY = {
    "messageHandlerOptions": {
        "autoComplete": "autoCompleteMessages",
        "maxConcurrentCalls": "maxConcurrentCalls",
        "maxAutoRenewDuration": "maxAutoLockRenewalDuration",
    },
    "sessionHandlerOptions": {
        "autoComplete": "autoCompleteMessages",
        "maxConcurrentSessions": "maxConcurrentSessions",
        "maxAutoRenewDuration": "maxAutoLockRenewalDuration",
        "messageWaitTimeout": "sessionIdleTimeout",
    },
    "batchOptions": {"maxMessageCount": "maxMessageBatchSize", "autoComplete": "autoCompleteMessages"},
}


def service_bus_options(host_json: dict[str, Any]) -> ServiceBusHostOptions:
    section = ((host_json or {}).get("extensions") or {}).get("serviceBus") or {}
    flat: dict[str, Any] = {}
    for group, keys in _LEGACY.items():
        for old, new in keys.items():
            if old in (section.get(group) or {}):
                flat[new] = section[group][old]
    flat.update({k: v for k, v in section.items() if k in _FLAT})
    values = {}
    for key, raw in flat.items():
        name, parse = _FLAT[key]
        try:
            values[name] = parse(raw)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"host.json extensions.serviceBus.{key}: {exc}") from exc
    options = replace(ServiceBusHostOptions(), **values)
    if (
        options.max_concurrent_calls < 1
        or options.max_concurrent_sessions < 1
        or options.max_message_batch_size < 1
        or options.min_message_batch_size < 1
    ):
        raise ValueError("host.json extensions.serviceBus: concurrency and batch size must be at least 1")
    return options


def load_host_json(path: str | Path) -> ServiceBusHostOptions:
    path = Path(path)
    if not path.exists():
        return ServiceBusHostOptions()
    return service_bus_options(json.loads(path.read_text(encoding="utf-8")))
