"""Rule descriptions over AMQP: the `com.microsoft:add-rule` request map -> engine `RuleProperties`, and
`RuleProperties` -> the described rule-description of an `enumerate-rules` reply.

Forms as .NET's `AmqpRuleManager` / `AmqpMessageConverter` and Java's `ManagementChannel` / `MessageUtils`
send and parse them. A request carries plain maps (`sql-filter` or `correlation-filter`, `sql-rule-action`,
`rule-name`); a reply carries described lists with ulong descriptors. Two descriptors differ from the
pattern of the others by a digit (0x13_7000_0006..9 for the filters, 0x137_0000_0004..6 for the rule and its
actions): those are the values Service Bus sends and both SDKs compare against, kept as they are.
"""

from __future__ import annotations

from typing import Any

from proton import Described, int32, ulong

from local_broker.engine import ArgumentError
from local_broker.engine.properties import (
    CorrelationFilter,
    FalseFilter,
    RuleFilter,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    TrueFilter,
)
from local_broker.wire.amqp import messages

RULE_DESCRIPTION = ulong(0x0000013700000004)
EMPTY_RULE_ACTION = ulong(0x0000013700000005)
SQL_RULE_ACTION = ulong(0x0000013700000006)
SQL_FILTER = ulong(0x0000001370000006)
TRUE_FILTER = ulong(0x0000001370000007)
FALSE_FILTER = ulong(0x0000001370000008)
CORRELATION_FILTER = ulong(0x0000001370000009)
COMPATIBILITY_LEVEL = int32(20)  # what Service Bus puts in its SQL filters and actions
# A correlation filter's fields in the order of both the request map's keys and the described list.
CORRELATION_FIELDS = (
    ("correlation-id", "correlation_id"), ("message-id", "message_id"), ("to", "to"),
    ("reply-to", "reply_to"), ("label", "label"), ("session-id", "session_id"),
    ("reply-to-session-id", "reply_to_session_id"), ("content-type", "content_type"),
)
INT32 = range(-(1 << 31), 1 << 31)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _map(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ArgumentError(f"The '{what}' of the rule description must be a map.", what)
    return {str(k): v for k, v in value.items()}


def rule_of_request(body: dict[str, Any]) -> RuleProperties:
    """The rule an `add-rule` request body describes (`rule-name`, `rule-description`)."""
    description = _map(body.get("rule-description"), "rule-description")
    name = _text(body.get("rule-name") or description.get("rule-name"))
    if not name:
        raise ArgumentError("The add-rule request has no 'rule-name'.", "rule-name")
    return RuleProperties(name=name, filter=_filter_of(description), action=_action_of(description))


def _filter_of(description: dict[str, Any]) -> RuleFilter:
    if description.get("sql-filter") is not None:
        sql = _map(description["sql-filter"], "sql-filter")
        expression = _text(sql.get("expression"))
        if expression is None:
            raise ArgumentError("The SQL filter has no 'expression'.", "expression")
        return SqlFilter(expression)
    if description.get("correlation-filter") is not None:
        fields = _map(description["correlation-filter"], "correlation-filter")
        properties = fields.get("properties")
        return CorrelationFilter(
            **{attribute: _text(fields.get(key)) for key, attribute in CORRELATION_FIELDS},
            properties={str(k): messages.to_python(v) for k, v in properties.items()} if properties else None)
    raise ArgumentError("The rule description has neither a 'sql-filter' nor a 'correlation-filter'.",
                        "rule-description")


def _action_of(description: dict[str, Any]) -> SqlRuleAction | None:
    action = description.get("sql-rule-action")
    if action is None:
        return None
    expression = _text(_map(action, "sql-rule-action").get("expression"))
    return None if expression is None else SqlRuleAction(expression)


def _property(value: Any) -> Any:
    """A correlation filter property value as it goes out: ints that fit one as AMQP int (a .NET int),
    others as the message path encodes them."""
    if type(value) is int and value in INT32:
        return int32(value)
    return messages.to_amqp(value)


def _described_filter(rule_filter: RuleFilter) -> Described:
    if isinstance(rule_filter, TrueFilter):
        return Described(TRUE_FILTER, [])
    if isinstance(rule_filter, FalseFilter):
        return Described(FALSE_FILTER, [])
    if isinstance(rule_filter, SqlFilter):
        return Described(SQL_FILTER, [rule_filter.sql_expression, COMPATIBILITY_LEVEL])
    fields: list[Any] = [getattr(rule_filter, attribute) for _, attribute in CORRELATION_FIELDS]
    properties = rule_filter.properties or {}
    return Described(CORRELATION_FILTER, [*fields, {k: _property(v) for k, v in properties.items()}])


def described_rule(rule: RuleProperties) -> Described:
    """One entry's `rule-description`: filter, action, name, created-at."""
    action = (Described(EMPTY_RULE_ACTION, []) if rule.action is None
              else Described(SQL_RULE_ACTION, [rule.action.sql_expression, COMPATIBILITY_LEVEL]))
    created = None if rule.created_at is None else messages.to_amqp(rule.created_at)
    return Described(RULE_DESCRIPTION, [_described_filter(rule.filter), action, rule.name, created])
