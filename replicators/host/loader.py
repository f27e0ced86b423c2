"""Reads a Python v2 Functions app the way the worker does, through the azure-functions library: import
the script, find its FunctionApp, call `get_functions()` once, and read each Service Bus and Kafka trigger."""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import azure.functions as func
from azure.functions.decorators.kafka import BrokerAuthenticationMode, BrokerProtocol

from replicators.host.retry_policy import FunctionRetryPolicy
from replicators.tasks import DEAD_LETTER_SUFFIX

log = logging.getLogger(__name__)
SERVICE_BUS_TRIGGER = "serviceBusTrigger"
KAFKA_TRIGGER = "kafkaTrigger"


class FunctionAppError(ValueError):
    """The script is not a loadable Python v2 Functions app."""


@dataclass(frozen=True)
class ServiceBusTrigger:
    """One function with a Service Bus trigger, as the binding declares it."""

    function_name: str
    arg_name: str
    connection: str
    queue_name: str | None
    topic_name: str | None
    subscription_name: str | None
    dead_letter: bool
    many: bool
    sessions: bool
    auto_complete: bool | None
    max_message_batch_size: int | None
    max_concurrent_calls: int | None
    retry: FunctionRetryPolicy | None
    user_function: Callable[..., Any]

    @property
    def entity(self) -> str:
        return self.queue_name or self.topic_name or ""

    @property
    def source(self) -> str:
        path = self.queue_name or f"{self.topic_name}/Subscriptions/{self.subscription_name}"
        return f"{self.connection}:{path}{DEAD_LETTER_SUFFIX if self.dead_letter else ''}"


def import_app(path: str | Path) -> func.FunctionApp:
    """Import the script as module `function_app` with its folder on sys.path, as the worker does."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FunctionAppError(f"no Functions app at {path}")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("function_app", path)
    if spec is None or spec.loader is None:
        raise FunctionAppError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["function_app"] = module
    spec.loader.exec_module(module)
    apps = [value for value in vars(module).values() if isinstance(value, func.FunctionApp)]
    if len(apps) != 1:
        raise FunctionAppError(
            f"{path} must define exactly one azure.functions.FunctionApp (found {len(apps)})"
        )
    return apps[0]


@dataclass(frozen=True)
class KafkaTrigger:
    """One function with a Kafka trigger, as the binding declares it (`%setting%` values unresolved)."""

    function_name: str
    arg_name: str
    topic: str
    broker_list: str
    consumer_group: str
    many: bool
    max_batch_size: int | None
    username: str | None
    password: str | None
    protocol: str | None
    authentication_mode: str | None
    retry: FunctionRetryPolicy | None
    user_function: Callable[..., Any]

    @property
    def source(self) -> str:
        return f"{self.broker_list}:{self.topic} (consumer group {self.consumer_group})"


def service_bus_triggers(app: func.FunctionApp) -> list[ServiceBusTrigger]:
    """Every function whose trigger is `serviceBusTrigger`."""
    return app_triggers(app)[0]


def app_triggers(app: func.FunctionApp) -> tuple[list[ServiceBusTrigger], list[KafkaTrigger]]:
    """The functions this host runs, by trigger: Service Bus and Kafka; others are listed and skipped."""
    service_bus, kafka = [], []
    for function in _functions_of(app):
        binding = function.get_trigger()
        raw = {k: _plain(v) for k, v in binding.get_dict_repr().items()}
        if raw.get("type") == SERVICE_BUS_TRIGGER:
            service_bus.append(_trigger(function, raw))
        elif raw.get("type") == KAFKA_TRIGGER:
            kafka.append(_kafka_trigger(function, raw))
        else:
            log.warning(
                "function %s: %s triggers are not run by this host", function.get_function_name(), raw["type"]
            )
    return service_bus, kafka


def _kafka_trigger(function: Any, raw: dict[str, Any]) -> KafkaTrigger:
    def named(value: Any, kind: type[Enum]) -> str | None:
        """A protocol or mechanism by its enum name (the binding holds the number); NOTSET means none."""
        name = kind(value).name if isinstance(value, int) else str(value or "").upper()
        return None if name in ("", "NOTSET") else name

    return KafkaTrigger(
        function_name=function.get_function_name(),
        arg_name=raw["name"],
        topic=raw["topic"],
        broker_list=raw["brokerList"],
        consumer_group=raw.get("consumerGroup") or "$Default",
        many=str(raw.get("cardinality", "one")).lower() == "many",
        max_batch_size=raw.get("maxBatchSize"),
        username=raw.get("username"),
        password=raw.get("password"),
        protocol=named(raw.get("protocol"), BrokerProtocol),
        authentication_mode=named(raw.get("authenticationMode"), BrokerAuthenticationMode),
        retry=FunctionRetryPolicy.from_settings(function.get_settings_dict("retry_policy")),
        user_function=function.get_user_function(),
    )


def _functions_of(app: func.FunctionApp) -> list[Any]:
    """`get_functions()`, once per app (a second call fails on duplicate names), without its warning that
    HTTP auth levels do not apply: this host runs no HTTP functions."""
    root = logging.getLogger()
    quiet = _DropMessage("Auth level is not applied")
    root.addFilter(quiet)
    try:
        return app.get_functions()
    finally:
        root.removeFilter(quiet)


class _DropMessage(logging.Filter):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self._prefix)


def _trigger(function: Any, raw: dict[str, Any]) -> ServiceBusTrigger:
    queue, topic, subscription = raw.get("queueName"), raw.get("topicName"), raw.get("subscriptionName")
    queue, queue_dead_letter = _without_dead_letter_suffix(queue)
    subscription, subscription_dead_letter = _without_dead_letter_suffix(subscription)
    dead_letter = queue_dead_letter or subscription_dead_letter
    name = function.get_function_name()
    if not (queue or (topic and subscription)):
        raise FunctionAppError(
            f"function {name}: a Service Bus trigger needs queueName, or topicName + subscriptionName"
        )
    return ServiceBusTrigger(
        function_name=name,
        arg_name=raw["name"],
        connection=raw.get("connection") or "",
        queue_name=queue,
        topic_name=topic if not queue else None,
        subscription_name=subscription if not queue else None,
        dead_letter=dead_letter,
        many=str(raw.get("cardinality", "one")).lower() == "many",
        sessions=bool(raw.get("isSessionsEnabled", False)),
        auto_complete=raw.get("autoCompleteMessages"),
        max_message_batch_size=raw.get("maxMessageBatchSize"),
        max_concurrent_calls=raw.get("maxConcurrentCalls"),
        retry=FunctionRetryPolicy.from_settings(function.get_settings_dict("retry_policy")),
        user_function=function.get_user_function(),
    )


def _without_dead_letter_suffix(name: str | None) -> tuple[str | None, bool]:
    if name and name.lower().endswith(DEAD_LETTER_SUFFIX):
        return name[: -len(DEAD_LETTER_SUFFIX)], True
    return name, False


def _plain(value: Any) -> Any:
    """Binding enums serialise upper-case through StringifyEnum; the host compares lower-case values."""
    return value.value if hasattr(value, "value") and not isinstance(value, str | int | bool) else value
