"""Filters: SQL filters compiled from text, and correlation filters (equality on named properties)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from local_broker.rules.codegen import Node
from local_broker.rules.compiler import Compiler, check_length
from local_broker.rules.grammar import parse
from local_broker.rules.target import MISSING, RuleTarget, find_user_key
from local_broker.rules.values import type_name


@dataclass(frozen=True)
class SqlFilter:
    """A compiled SQL filter.

    `matches(message)` is True only when the condition is TRUE (not FALSE, not UNKNOWN) and raises
    FilterEvaluationError when it cannot be evaluated on the message. It is the generated function
    itself (no wrapper: it runs once per message and subscription). `condition(message)` gives the
    three-valued outcome: True, False or None (UNKNOWN). `node`, `namespace` and `memo_reads` are its
    generated code, for a `selector` to inline.
    """

    sql_expression: str
    parameters: Mapping[str, Any]
    condition: Callable[[RuleTarget], bool | None] = field(repr=False, compare=False)
    matches: Callable[[RuleTarget], bool] = field(repr=False, compare=False)
    node: Node = field(repr=False, compare=False)
    namespace: Mapping[str, Any] = field(repr=False, compare=False)
    memo_reads: Mapping[str, tuple[str, str]] = field(repr=False, compare=False)


def compile_filter(sql_expression: str, parameters: Mapping[str, Any] | None = None) -> SqlFilter:
    """Compile a SQL filter once; RuleSyntaxError (with a position) for anything Service Bus refuses."""
    check_length(sql_expression, "filter expression")
    compiler = Compiler(sql_expression, parameters)
    condition = compiler.condition(parse(sql_expression, "filter").children[0])
    return SqlFilter(
        sql_expression,
        dict(parameters or {}),
        compiler.function(condition),
        compiler.function(condition, truth=True),
        condition,
        compiler.program.namespace,
        compiler.program.memo_reads,
    )


# CorrelationFilter field -> canonical system property.
CORRELATION_FIELDS: dict[str, str] = {
    "correlation_id": "CorrelationId",
    "message_id": "MessageId",
    "to": "To",
    "reply_to": "ReplyTo",
    "label": "Label",
    "session_id": "SessionId",
    "reply_to_session_id": "ReplyToSessionId",
    "content_type": "ContentType",
}


@dataclass(frozen=True)
class CorrelationFilter:
    """Every set field must equal the message's: strings case-sensitively, typed properties by type and value.

    A filter with no field set matches every message.
    """

    system_properties: tuple[tuple[str, Any], ...]
    properties: tuple[tuple[str, Any], ...]

    def matches(self, message: RuleTarget) -> bool:
        for name, expected in self.system_properties:
            if message.get_system_property(name) != expected:
                return False
        application_properties = message.application_properties
        for name, expected in self.properties:
            key = find_user_key(application_properties, name, name.lower())
            if key is MISSING:
                return False
            actual = application_properties[key]
            if type_name(actual) != type_name(expected) or actual != expected:
                return False
        return True


def compile_correlation_filter(
    correlation_id: str | None = None,
    message_id: str | None = None,
    to: str | None = None,
    reply_to: str | None = None,
    label: str | None = None,
    session_id: str | None = None,
    reply_to_session_id: str | None = None,
    content_type: str | None = None,
    properties: Mapping[str, Any] | None = None,
) -> CorrelationFilter:
    fields = {
        "correlation_id": correlation_id,
        "message_id": message_id,
        "to": to,
        "reply_to": reply_to,
        "label": label,
        "session_id": session_id,
        "reply_to_session_id": reply_to_session_id,
        "content_type": content_type,
    }
    system = tuple((CORRELATION_FIELDS[key], value) for key, value in fields.items() if value is not None)
    return CorrelationFilter(system, tuple((properties or {}).items()))
