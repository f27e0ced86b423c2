"""SQL rule actions: SET and REMOVE statements, run in order on a message (a subscription's copy)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lark import Tree

from local_broker.rules.codegen import Node, PropertyReference
from local_broker.rules.compiler import Compiler, check_length
from local_broker.rules.errors import FilterEvaluationError, RuleSyntaxError
from local_broker.rules.grammar import parse
from local_broker.rules.target import MISSING, SETTABLE_SYSTEM_PROPERTIES, RuleTarget, find_user_key
from local_broker.rules.values import parse_timespan, parse_utc, to_utc, type_name

MAX_STATEMENTS = 32

Statement = Callable[[RuleTarget], None]


def _cast_error(value: Any, target: str) -> FilterEvaluationError:
    return FilterEvaluationError(
        "InvalidCastException", f"A value of type '{type_name(value)}' cannot be assigned to sys.{target}."
    )


def _to_string(value: Any, target: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if type_name(value) == "Guid":
        return str(value)
    raise _cast_error(value, target)


def _to_timespan(value: Any, target: str) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    if isinstance(value, str):
        return parse_timespan(value)
    raise _cast_error(value, target)


def _to_utc(value: Any, target: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, str):
        return parse_utc(value)
    raise _cast_error(value, target)


# Settable system property -> conversion of an assigned value to the type the message holds.
_SYSTEM_CONVERSIONS: dict[str, Callable[[Any, str], Any]] = {
    name: _to_string for name in SETTABLE_SYSTEM_PROPERTIES
} | {"TimeToLive": _to_timespan, "ScheduledEnqueueTimeUtc": _to_utc}


def _widened(value: Any, existing: Any) -> Any:
    """SET keeps a property's type where C# converts implicitly (Int64 into a Double/Decimal property)."""
    if type_name(value) == "Int64" and type_name(existing) in ("Double", "Decimal"):
        return type(existing)(value)
    return value


def _set_user(name: str, value_node: Node, compiler: Compiler) -> Statement:
    lowered, evaluate = name.lower(), compiler.function(value_node)

    def apply(message: RuleTarget) -> None:
        value = evaluate(message)
        properties = message.application_properties
        key = find_user_key(properties, name, lowered)
        if key is MISSING:
            properties[name] = value
        else:
            properties[key] = _widened(value, properties[key])

    return apply


def _remove_user(name: str) -> Statement:
    lowered = name.lower()

    def apply(message: RuleTarget) -> None:
        properties = message.application_properties
        for key in [key for key in properties if isinstance(key, str) and key.lower() == lowered]:
            del properties[key]

    return apply


def _set_system(name: str, value_node: Node, compiler: Compiler) -> Statement:
    convert = _SYSTEM_CONVERSIONS[name]
    if value_node.is_constant:
        try:
            value = convert(value_node.constant, name)
        except FilterEvaluationError as error:
            raise compiler.error(error.description, value_node.position) from None
        return lambda message: message.set_system_property(name, value)
    evaluate = compiler.function(value_node)
    return lambda message: message.set_system_property(name, convert(evaluate(message), name))


@dataclass(frozen=True)
class SqlRuleAction:
    """A compiled action; `apply` mutates the message in place, statement by statement.

    If a statement fails (FilterEvaluationError), the earlier ones have already been applied: run
    actions on the subscription's copy, and dead-letter the original message.
    """

    sql_expression: str
    parameters: Mapping[str, Any]
    statements: tuple[Statement, ...] = field(repr=False, compare=False)

    def apply(self, message: RuleTarget) -> None:
        for statement in self.statements:
            statement(message)


def _target(compiler: Compiler, tree: Tree) -> PropertyReference:
    reference = compiler.reference(tree)
    if reference.scope == "sys" and reference.name not in SETTABLE_SYSTEM_PROPERTIES:
        raise compiler.error(
            f"sys.{reference.name} is set by the broker and cannot be changed by an action",
            compiler.position(tree),
        )
    return reference


def _statement(compiler: Compiler, tree: Tree) -> Statement:
    target_tree, *rest = [child for child in tree.children if isinstance(child, Tree)]
    reference = _target(compiler, target_tree)
    if tree.data == "remove_statement":
        if reference.scope == "sys":
            return lambda message: message.set_system_property(reference.name, None)
        return _remove_user(reference.name)
    value_node = compiler.value(rest[0])
    if reference.scope == "sys":
        return _set_system(reference.name, value_node, compiler)
    return _set_user(reference.name, value_node, compiler)


def compile_action(sql_expression: str, parameters: Mapping[str, Any] | None = None) -> SqlRuleAction:
    """Compile an action once; raises RuleSyntaxError (with a position) for anything Service Bus refuses."""
    check_length(sql_expression, "action expression")
    compiler = Compiler(sql_expression, parameters)
    trees = [child for child in parse(sql_expression, "action").children if isinstance(child, Tree)]
    if len(trees) > MAX_STATEMENTS:
        extra = trees[MAX_STATEMENTS]
        raise RuleSyntaxError(
            f"the action has {len(trees)} statements; the limit is {MAX_STATEMENTS}",
            sql_expression,
            compiler.position(extra),
        )
    return SqlRuleAction(
        sql_expression, dict(parameters or {}), tuple(_statement(compiler, tree) for tree in trees)
    )
