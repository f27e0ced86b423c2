"""Helpers shared by the rules tests: a message builder and the three-valued outcome of a filter."""

from __future__ import annotations

from typing import Any

from local_broker.rules import FilterEvaluationError, MessageProperties, compile_filter


def message(system: dict[str, Any] | None = None, **properties: Any) -> MessageProperties:
    return MessageProperties(dict(properties), dict(system or {}))


def truth(
    text: str, target: MessageProperties | None = None, parameters: dict[str, Any] | None = None
) -> str:
    """'T', 'F' or 'U' for a condition (UNKNOWN: neither it nor its negation matches), or the error type."""
    target = target if target is not None else message()
    try:
        if compile_filter(text, parameters).matches(target):
            return "T"
        return "F" if compile_filter(f"NOT ({text})", parameters).matches(target) else "U"
    except FilterEvaluationError as error:
        return error.type_name
