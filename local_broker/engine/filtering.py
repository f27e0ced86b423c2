"""Rules of a subscription compiled once, and the evaluation of a message into copies (semantics 4.6, 4.7).

SQL filters, SQL actions and correlation filters come from `local_broker.rules`; True/False filters
are constants here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from local_broker.engine.errors import ArgumentError
from local_broker.engine.message import Message
from local_broker.engine.properties import (
    CorrelationFilter,
    FalseFilter,
    RuleProperties,
    SqlFilter,
    TrueFilter,
)
from local_broker.engine.validation import check_storable
from local_broker.rules import compile_action, compile_correlation_filter, compile_filter
from local_broker.rules.errors import RuleSyntaxError


@dataclass(slots=True)
class CompiledRule:
    props: RuleProperties
    matches: Callable[[Message], bool] | None  # None: always matches (TrueFilter)
    apply: Callable[[Message], None] | None  # None: no action
    never: bool = False  # FalseFilter


def compile_rule(rule: RuleProperties) -> CompiledRule:
    """Compile a rule; a syntax error in its SQL is the 400 argument error Service Bus returns."""
    try:
        f = rule.filter
        if isinstance(f, TrueFilter):
            matches, never = None, False
        elif isinstance(f, FalseFilter):
            matches, never = None, True
        elif isinstance(f, SqlFilter):
            matches, never = compile_filter(f.sql_expression, f.parameters).matches, False
        elif isinstance(f, CorrelationFilter):
            compiled = compile_correlation_filter(
                correlation_id=f.correlation_id,
                message_id=f.message_id,
                to=f.to,
                reply_to=f.reply_to,
                label=f.label,
                session_id=f.session_id,
                reply_to_session_id=f.reply_to_session_id,
                content_type=f.content_type,
                properties=f.properties,
            )
            matches, never = compiled.matches, False
        else:
            raise ArgumentError(f"Unsupported filter type {type(f).__name__}.", "filter")
        apply = None
        if rule.action is not None:
            apply = compile_action(rule.action.sql_expression, rule.action.parameters).apply
    except RuleSyntaxError as exc:
        raise ArgumentError(f"{exc} Parameter name: SqlExpression", "sql_expression") from exc
    check_storable(rule, "filter")
    return CompiledRule(rule, matches, apply, never)


def always(message: Message) -> bool:
    """The filter of a subscription whose only rule is a TrueFilter without action."""
    return True


class Route(NamedTuple):
    """One subscription in a topic's fan-out plan (see Namespace._routes)."""

    subscription: Any
    matches: Callable[[Message], bool] | None  # its one rule has no action: this decides; None: use `rules`
    rules: tuple[CompiledRule, ...]  # the rules that can match (FalseFilters left out)
    dead_letters_filter_errors: bool  # a filter that fails on a message dead-letters it here
    ttl: float  # default time to live in seconds, capped by the topic's


def matching_rules(rules: Iterable[CompiledRule], message: Message) -> tuple[bool, list[CompiledRule]]:
    """(whether some rule without action matched, the matching rules with actions).

    Raises FilterEvaluationError when a filter fails on this message.
    """
    plain = False
    with_action: list[CompiledRule] = []
    for rule in rules:
        if rule.never:
            continue
        if rule.matches is not None and not rule.matches(message):
            continue
        if rule.apply is None:
            plain = True
        else:
            with_action.append(rule)
    return plain, with_action


def is_sql_filter(rule: RuleProperties) -> bool:
    """Counted against the topic's SQL-filter quota (True/False filters are SQL filters too)."""
    return not isinstance(rule.filter, CorrelationFilter)
