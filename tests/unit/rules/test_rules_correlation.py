"""Correlation filters: set fields must be equal (case-sensitive), typed user properties by type and value."""

from __future__ import annotations

from local_broker.rules import compile_correlation_filter, compile_filter
from tests.unit.rules.rules_truth import message


def test_documentation_equivalence_with_the_sql_filter():
    correlation = compile_correlation_filter(
        label="Important", reply_to="johndoe@contoso.com", properties={"color": "Red"}
    )
    sql = compile_filter("sys.ReplyTo = 'johndoe@contoso.com' AND sys.Label = 'Important' AND color = 'Red'")
    cases = [
        message({"Label": "Important", "ReplyTo": "johndoe@contoso.com"}, color="Red"),
        message({"Label": "Important", "ReplyTo": "johndoe@contoso.com"}, color="red"),
        message({"Label": "important", "ReplyTo": "johndoe@contoso.com"}, color="Red"),
        message({"Label": "Important"}, color="Red"),
        message({"Label": "Important", "ReplyTo": "johndoe@contoso.com"}),
    ]
    assert [correlation.matches(m) for m in cases] == [True, False, False, False, False]
    assert [correlation.matches(m) for m in cases] == [sql.matches(m) for m in cases]


def test_every_system_field():
    fields = {
        "correlation_id": "CorrelationId",
        "message_id": "MessageId",
        "to": "To",
        "reply_to": "ReplyTo",
        "label": "Label",
        "session_id": "SessionId",
        "reply_to_session_id": "ReplyToSessionId",
        "content_type": "ContentType",
    }
    for field, canonical in fields.items():
        correlation = compile_correlation_filter(**{field: "v"})
        assert correlation.matches(message({canonical: "v"}))
        assert not correlation.matches(message({canonical: "V"}))
        assert not correlation.matches(message())


def test_typed_property_values_compare_by_type_and_value():
    correlation = compile_correlation_filter(properties={"n": 1, "flag": True})
    assert correlation.matches(message(n=1, flag=True))
    assert correlation.matches(message(N=1, FLAG=True))
    assert not correlation.matches(message(n=1.0, flag=True))
    assert not correlation.matches(message(n="1", flag=True))
    assert not correlation.matches(message(n=1, flag=1))


def test_unset_fields_are_ignored():
    assert compile_correlation_filter(correlation_id="c").matches(
        message({"CorrelationId": "c", "Label": "x"})
    )
    assert compile_correlation_filter().matches(message(anything=1))
