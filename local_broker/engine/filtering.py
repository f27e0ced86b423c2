"""Rules of a subscription compiled once, and the evaluation of a message into copies (semantics 4.6, 4.7).

SQL filters, SQL actions and correlation filters come from `local_broker.rules`; True/False filters
are constants here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
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
from local_broker.rules.errors import FilterEvaluationError, RuleSyntaxError
from local_broker.rules.filters import SqlFilter as SqlFilterCode
from local_broker.rules.selector import Append, Choice, Step, compile_selector, interpret_selector


@dataclass(slots=True)
class CompiledRule:
    props: RuleProperties
    matches: Callable[[Message], bool] | None  # None: always matches (TrueFilter)
    apply: Callable[[Message], None] | None  # None: no action
    never: bool = False  # FalseFilter
    test: Any = None  # the compiled SQL or correlation filter, for a topic's selector


def compile_rule(rule: RuleProperties) -> CompiledRule:
    """Compile a rule; a syntax error in its SQL is the 400 argument error Service Bus returns."""
    try:
        f = rule.filter
        test: Any = None
        if isinstance(f, TrueFilter):
            matches, never = None, False
        elif isinstance(f, FalseFilter):
            matches, never = None, True
        elif isinstance(f, SqlFilter):
            test = compile_filter(f.sql_expression, f.parameters)
            matches, never = test.matches, False
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
            test = compiled
            matches, never = compiled.matches, False
        else:
            raise ArgumentError(f"Unsupported filter type {type(f).__name__}.", "filter")
        apply = None
        if rule.action is not None:
            apply = compile_action(rule.action.sql_expression, rule.action.parameters).apply
    except RuleSyntaxError as exc:
        raise ArgumentError(f"{exc} Parameter name: SqlExpression", "sql_expression") from exc
    check_storable(rule, "filter")
    return CompiledRule(rule, matches, apply, never, test)


class Route(NamedTuple):
    """One subscription in a topic's fan-out plan (see Namespace._routes)."""

    subscription: Any
    rules: tuple[CompiledRule, ...]  # the rules that can match (FalseFilters left out)
    dead_letters_filter_errors: bool  # a filter that fails on a message dead-letters it here
    ttl: float  # default time to live in seconds, capped by the topic's
    main: Any  # its main sub-queue when its plain copies are lazy there (see Namespace._routes), else None


def still_lazy(m: Message, targets: list[tuple[Route, Any]]) -> Iterator[Route]:
    """The routes among a topic message's chosen `targets` whose lazy copy of it (see SubQueue) is still
    lazy."""
    return (
        route
        for route, what in targets
        if what is None and route.main is not None and route.main.holds_lazy(m)
    )


SELECTOR_PART = 200  # subscriptions per generated function (about 70 ms to build on the shared machine)
Target = tuple[Route, Any]  # a copy to make: None (plain), the CompiledRule whose action runs, or the error


def selector(topic: Any, routes: list[Route]) -> Callable[[Message], list[Target]]:
    """The topic's fan-out decisions: `select(message)` gives the copies to make, in the subscriptions'
    order (semantics 4.6, 4.7). A subscription whose one rule has no action is decided by its filter
    (inlined into one generated function, `local_broker.rules.selector`); one with several rules or an
    action by `matching_rules`.

    The generated code costs about a third of a millisecond per subscription to build, so the plan is
    interpreted until it has routed as many messages as it has subscriptions (a topic whose subscriptions
    keep changing while few messages pass never pays more for building than for routing); then each
    message routed builds one more part of SELECTOR_PART subscriptions (no long hold of the engine for a
    topic with many), and once all are built they take the plan's place as `topic.routes`."""
    decisions: list[Choice | Step] = []
    for route in routes:
        failed = route if route.dead_letters_filter_errors else None
        only = route.rules[0]
        if len(route.rules) == 1 and only.apply is None:
            test = only.test if isinstance(only.test, SqlFilterCode) else only.matches
            decisions.append(Choice(test, (route, None), failed))
        else:
            decisions.append(Step(_rules_step(route)))
    interpreted = interpret_selector(decisions)
    remaining = len(decisions)
    parts = [decisions[start : start + SELECTOR_PART] for start in range(0, len(decisions), SELECTOR_PART)]
    built: list[Callable[[Message], list[Target]]] = []

    def warming(message: Message) -> list[Target]:
        nonlocal remaining
        remaining -= 1
        if remaining <= 0 and topic.routes is warming:
            if len(built) < len(parts):
                built.append(compile_selector(parts[len(built)]))
            if len(built) == len(parts):
                topic.routes = built[0] if len(built) == 1 else _joined(built)
        return interpreted(message)

    return warming


def _joined(parts: list[Callable[[Message], list[Target]]]) -> Callable[[Message], list[Target]]:
    def select(message: Message) -> list[Target]:
        chosen: list[Target] = []
        for part in parts:
            chosen += part(message)
        return chosen

    return select


def _rules_step(route: Route) -> Callable[[Message, Append], None]:
    def run(message: Message, append: Append) -> None:
        try:
            plain, with_action = matching_rules(route.rules, message)
        except FilterEvaluationError as exc:
            if route.dead_letters_filter_errors:
                append((route, exc))
            return
        if plain:
            append((route, None))
        for rule in with_action:
            append((route, rule))

    return run


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
