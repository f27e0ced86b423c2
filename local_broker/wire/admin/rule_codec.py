"""`RuleDescription`: filter and action <-> the engine's rule types.

Filters arrive as `<Filter xsi:type="SqlFilter|TrueFilter|FalseFilter|CorrelationFilter">`, actions as
`<Action xsi:type="SqlRuleAction|EmptyRuleAction">`. Whether an expression is valid SQL is the engine's
call; this module only reads and writes the shapes.
"""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

from local_broker.engine.errors import ArgumentError
from local_broker.engine.properties import (
    CorrelationFilter,
    FalseFilter,
    RuleFilter,
    RuleProperties,
    SqlFilter,
    SqlRuleAction,
    TrueFilter,
)
from local_broker.wire.admin.atom import SB_NS, XSI_NS, element, sb
from local_broker.wire.admin.durations import format_timestamp
from local_broker.wire.admin.typed_values import read_key_values, render_key_values

SQL_COMPATIBILITY_LEVEL = 20
# CorrelationFilter elements in wire order, with the filter's attribute names.
CORRELATION_FIELDS = (
    ("CorrelationId", "correlation_id"),
    ("MessageId", "message_id"),
    ("To", "to"),
    ("ReplyTo", "reply_to"),
    ("Label", "label"),
    ("SessionId", "session_id"),
    ("ReplyToSessionId", "reply_to_session_id"),
    ("ContentType", "content_type"),
)


def _type_of(node: ElementTree.Element) -> str:
    return node.get(f"{{{XSI_NS}}}type", "").rpartition(":")[2]


def _sql_expression(node: ElementTree.Element, owner: str) -> str:
    expression = node.findtext(sb("SqlExpression"))
    if expression is None:
        raise ArgumentError(f"The {owner} needs a <SqlExpression>.", property_name="sql_expression")
    return expression


def parse_filter(node: ElementTree.Element | None) -> RuleFilter:
    """The rule's filter; a rule without one matches everything, as Service Bus defaults it."""
    if node is None:
        return TrueFilter()
    kind = _type_of(node)
    if kind == "TrueFilter":
        return TrueFilter()
    if kind == "FalseFilter":
        return FalseFilter()
    if kind == "SqlFilter":
        return SqlFilter(_sql_expression(node, "SQL filter"), read_key_values(node.find(sb("Parameters")),
                                                                               "Parameters"))
    if kind == "CorrelationFilter":
        fields: dict[str, Any] = {attr: node.findtext(sb(tag)) for tag, attr in CORRELATION_FIELDS}
        fields["properties"] = read_key_values(node.find(sb("Properties")), "Properties")
        return CorrelationFilter(**fields)
    raise ArgumentError(f"The filter type '{kind or '(none)'}' is not supported; use SqlFilter, "
                        "CorrelationFilter, TrueFilter or FalseFilter.", property_name="filter")


def parse_action(node: ElementTree.Element | None) -> SqlRuleAction | None:
    if node is None or _type_of(node) in ("EmptyRuleAction", ""):
        return None
    if _type_of(node) == "SqlRuleAction":
        return SqlRuleAction(_sql_expression(node, "SQL rule action"),
                             read_key_values(node.find(sb("Parameters")), "Parameters"))
    raise ArgumentError(f"The action type '{_type_of(node)}' is not supported; use SqlRuleAction.",
                        property_name="action")


def parse_rule(node: ElementTree.Element, default_name: str | None) -> RuleProperties:
    """A `RuleDescription` (or a subscription's `DefaultRuleDescription`); the URL's name wins over <Name>."""
    if node.tag.removeprefix(f"{{{SB_NS}}}") not in ("RuleDescription", "DefaultRuleDescription"):
        raise ArgumentError("The entry must hold a RuleDescription.")
    name = default_name or node.findtext(sb("Name")) or ""
    return RuleProperties(name=name, filter=parse_filter(node.find(sb("Filter"))),
                          action=parse_action(node.find(sb("Action"))))


def _render_sql(kind: str, expression: str, parameters: dict[str, Any] | None, tag: str) -> str:
    return (f'<{tag} i:type="{kind}">{element("SqlExpression", expression)}'
            f"<CompatibilityLevel>{SQL_COMPATIBILITY_LEVEL}</CompatibilityLevel>"
            f'{render_key_values("Parameters", parameters)}</{tag}>')


def render_filter(rule_filter: RuleFilter) -> str:
    if isinstance(rule_filter, CorrelationFilter):
        fields = "".join(element(tag, getattr(rule_filter, attr)) for tag, attr in CORRELATION_FIELDS
                         if getattr(rule_filter, attr) is not None)
        return (f'<Filter i:type="CorrelationFilter">{fields}'
                f'{render_key_values("Properties", rule_filter.properties)}</Filter>')
    kind = {TrueFilter: "TrueFilter", FalseFilter: "FalseFilter"}.get(type(rule_filter), "SqlFilter")
    return _render_sql(kind, rule_filter.sql_expression, getattr(rule_filter, "parameters", None), "Filter")


def render_action(action: SqlRuleAction | None) -> str:
    if action is None:
        return '<Action i:type="EmptyRuleAction"/>'
    return _render_sql("SqlRuleAction", action.sql_expression, action.parameters, "Action")


def render_rule(rule: RuleProperties) -> str:
    return (f'<RuleDescription xmlns="{SB_NS}" xmlns:i="{XSI_NS}">{render_filter(rule.filter)}'
            f"{render_action(rule.action)}<CreatedAt>{format_timestamp(rule.created_at)}</CreatedAt>"
            f"{element('Name', rule.name)}</RuleDescription>")
