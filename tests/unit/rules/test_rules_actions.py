"""SQL rule actions: SET and REMOVE on user and settable system properties, several statements per action."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from local_broker.rules import SETTABLE_SYSTEM_PROPERTIES, MessageProperties, RuleTarget, compile_action
from tests.unit.rules.rules_truth import message


def applied(text: str, target: MessageProperties, parameters: dict | None = None) -> MessageProperties:
    compile_action(text, parameters).apply(target)
    return target


def test_message_properties_is_a_rule_target():
    assert isinstance(message(), RuleTarget)


def test_documentation_example_with_several_statements():
    target = message(quantity=10, priority="high", color="blue")
    applied("SET quantity = quantity / 2; REMOVE priority;SET sys.CorrelationId = 'low';", target)
    assert target.application_properties == {"quantity": 5, "color": "blue"}
    assert target.system_properties == {"CorrelationId": "low"}


def test_semicolons_are_optional():
    target = applied("SET a = 1 SET b = a + 1 REMOVE c", message(c=3))
    assert target.application_properties == {"a": 1, "b": 2}


def test_statements_run_in_order_and_see_earlier_effects():
    target = applied("SET n = n * 2; SET n = n + 1; SET m = n", message(n=5))
    assert target.application_properties == {"n": 11, "m": 11}


def test_set_creates_with_the_written_casing_and_updates_keeping_the_key_casing():
    target = applied("SET Color = 'red'; SET NewProp = 1", message(color="blue"))
    assert target.application_properties == {"color": "red", "NewProp": 1}


def test_set_converts_an_integer_into_an_existing_double():
    target = applied("SET ratio = 2", message(ratio=0.5))
    assert target.application_properties["ratio"] == 2.0
    assert type(target.application_properties["ratio"]) is float


def test_set_of_another_type_replaces_the_value():
    target = applied("SET v = 'text'", message(v=1))
    assert target.application_properties == {"v": "text"}


def test_set_of_an_unknown_value_stores_null():
    target = applied("SET v = missing + 1", message())
    assert target.application_properties == {"v": None}


def test_remove_deletes_every_case_variant_and_ignores_missing():
    target = applied("REMOVE priority; REMOVE nothing", message(Priority=1, PRIORITY=2, other=3))
    assert target.application_properties == {"other": 3}


def test_set_with_parameters_and_functions():
    target = applied("SET tier = @tier; SET copy = p('source')", message(source="a"), {"@tier": "gold"})
    assert target.application_properties == {"source": "a", "tier": "gold", "copy": "a"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:2:0", timedelta(minutes=2)),
        ("00:00:30", timedelta(seconds=30)),
        ("1.02:03:04.5", timedelta(days=1, hours=2, minutes=3, seconds=4, milliseconds=500)),
        ("-0:0:1", timedelta(seconds=-1)),
        ("3", timedelta(days=3)),
        ("0:0:0.0000010", timedelta(microseconds=1)),
    ],
)
def test_time_to_live_takes_a_timespan_string(text, expected):
    target = applied(f"SET sys.TimeToLive = '{text}'", message({"TimeToLive": timedelta(days=14)}))
    assert target.system_properties["TimeToLive"] == expected


def test_time_to_live_from_a_timespan_value():
    target = applied("SET sys.TimeToLive = @ttl", message(), {"@ttl": timedelta(seconds=9)})
    assert target.system_properties["TimeToLive"] == timedelta(seconds=9)


def test_scheduled_enqueue_time_takes_iso_8601():
    target = applied("SET sys.ScheduledEnqueueTimeUtc = '2030-01-02T03:04:05Z'", message())
    assert target.system_properties["ScheduledEnqueueTimeUtc"] == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    target = applied("SET sys.ScheduledEnqueueTimeUtc = '2030-01-02T05:04:05+02:00'", message())
    assert target.system_properties["ScheduledEnqueueTimeUtc"] == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_set_label_and_other_string_system_properties():
    target = applied(
        "SET sys.Label = 'x'; SET sys.To = sys.ReplyTo; SET sys.Subject = sys.Label + '!'",
        message({"ReplyTo": "queue-b"}),
    )
    assert target.system_properties == {"Label": "x!", "To": "queue-b", "ReplyTo": "queue-b"}


def test_set_session_id_to_newid():
    first = applied("SET sys.SessionId = newid()", message())
    second = applied("SET sys.SessionId = newid()", message())
    session_id = first.system_properties["SessionId"]
    assert isinstance(session_id, str) and str(uuid.UUID(session_id)) == session_id
    assert session_id != second.system_properties["SessionId"]


def test_newid_into_a_user_property_is_a_guid():
    target = applied("SET trace = newid()", message())
    assert isinstance(target.application_properties["trace"], uuid.UUID)


def test_every_settable_system_property_can_be_set_and_removed():
    values = {"TimeToLive": "0:1:0", "ScheduledEnqueueTimeUtc": "2030-01-01T00:00:00"}
    for name in SETTABLE_SYSTEM_PROPERTIES:
        target = applied(f"SET sys.{name} = '{values.get(name, 'v')}'", message())
        assert target.system_properties.get(name) is not None
        assert applied(f"REMOVE sys.{name}", target).system_properties == {}


def test_assigning_a_failing_expression_leaves_earlier_statements_applied():
    target = message(a=1, b=0)
    action = compile_action("SET x = 1; SET y = a / b")
    with pytest.raises(Exception, match="divide by zero"):
        action.apply(target)
    assert target.application_properties == {"a": 1, "b": 0, "x": 1}
