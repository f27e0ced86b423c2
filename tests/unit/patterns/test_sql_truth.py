"""patterns.sql_truth, checked by the broker's own rules engine: the two-valued form of a filter is TRUE
exactly where the filter is, and FALSE (never UNKNOWN) where it is FALSE or UNKNOWN, over messages with each
property present, missing and null."""

import itertools
import re

import pytest

from local_broker.rules import FilterEvaluationError, MessageProperties, compile_filter
from patterns.sql_truth import MAX_FILTER_LENGTH, is_true, none_true

MISSING = object()
FILTERS = [
    "region = 'eu'",
    "region = 'us' OR priority > 7",
    "NOT (region = 'eu')",
    "region <> 'eu' AND NOT priority < 5",
    "NOT (region = 'eu' OR NOT priority >= 5)",
    "NOT NOT region = 'us'",
    "region IN ('eu', 'us')",
    "region NOT IN ('eu', NULL)",
    "'eu' IN (region, 'apac')",
    "NOT priority IN (3, 4)",
    "region LIKE 'e%'",
    "NOT region NOT LIKE '%u!%' ESCAPE '!'",
    "region IS NULL OR priority > 7",
    "region IS NOT NULL AND NOT region = 'eu'",
    "EXISTS(priority) AND NOT EXISTS(region)",
    "priority + 1 > 5",
    "-priority < -5 AND NOT (priority * 2) % 3 = 0",
    "region = NULL",
    "NOT (priority = NULL) OR region = 'eu'",
    "sys.Label = 'urgent'",
    "NOT sys.Label LIKE 'urg%' AND sys.Label IS NOT NULL",
    "TRUE",
    "NOT FALSE AND region = 'eu'",
    "flag = TRUE OR NOT flag <> FALSE",
    "user.[region] = 'eu' AND [priority] >= 3",
    "((region = 'eu')) OR (((priority) > 8))",
    "newid() IS NOT NULL AND region <> 'us'",
    "region = sys.Label OR priority = priority",
]
VALUES = {
    "region": [MISSING, None, "eu", "us", "apac"],
    "priority": [MISSING, None, 3, 9, "high"],  # "high": comparing it with a number is an evaluation error
    "flag": [MISSING, None, True, False],
    "Label": [MISSING, "urgent"],  # a system property: unset or set
}


def messages():
    names = list(VALUES)
    for values in itertools.product(*VALUES.values()):
        present = {n: v for n, v in zip(names, values, strict=True) if v is not MISSING}
        label = {"Label": present.pop("Label")} if "Label" in present else {}
        yield MessageProperties(present, label)


MESSAGES = list(messages())


def outcomes(sql):
    """The filter's three-valued outcome on every message (True, False, None = UNKNOWN, or the error type)."""
    compiled = compile_filter(sql)
    result = []
    for message in MESSAGES:
        try:
            result.append(compiled.condition(message))
        except FilterEvaluationError as error:
            result.append(error.type_name)
    return result


@pytest.mark.parametrize("sql", FILTERS)
def test_the_two_valued_form_is_true_exactly_where_the_filter_is(sql):
    original, two_valued = outcomes(sql), outcomes(is_true(sql))
    for message, before, after in zip(MESSAGES, original, two_valued, strict=True):
        if isinstance(before, str):  # an evaluation error: FALSE where a guard fails first, else the same
            assert after in (False, before), (message, before, after)
        else:
            assert after is (before is True), (message, before, after)


def test_the_filter_that_takes_what_no_route_selects_takes_each_message_once():
    routes = ["region = 'eu'", "region = 'us' OR priority > 7", "region IS NULL AND flag = TRUE"]
    unrouted = outcomes(none_true(routes))
    plain = outcomes(f"NOT ({' OR '.join(f'({r})' for r in routes)})")  # what recipes generated before
    selected = [outcomes(route) for route in routes]
    rescued = 0
    for index, message in enumerate(MESSAGES):
        chosen = [s[index] for s in selected]
        if any(isinstance(c, str) for c in chosen):  # dead-lettered by the failing route's subscription
            continue
        assert unrouted[index] is (True not in chosen), (message, chosen, unrouted[index])
        rescued += plain[index] is None and unrouted[index]
    assert rescued > 50  # some route UNKNOWN, none TRUE: the plain negation took them nowhere


def test_a_plain_not_of_the_routes_would_lose_a_message_lacking_a_property():
    lacking = MessageProperties({"region": "apac"})  # no priority
    plain = compile_filter("NOT ((region = 'eu') OR (region = 'us' OR priority > 7))")
    assert plain.condition(lacking) is None and not plain.matches(lacking)
    assert compile_filter(none_true(["region = 'eu'", "region = 'us' OR priority > 7"])).matches(lacking)


@pytest.mark.parametrize("sql, problem", [
    ("region = @region", "takes no parameters"),
    ("p('region') = 'eu'", "only properties it names"),
    ("property('region') = 'eu'", "only properties it names"),
    ("region", "expected a condition"),
    ("NOT priority + 1", "expected a condition"),
    ("(region = 'eu') = TRUE", "a condition cannot be used as a value"),
    ("region = ", "expected an expression"),
    ("(region = 'eu'", "expected ')'"),
    ("region = 'eu' priority", "unexpected 'priority'"),
    ("region = 'eu' # x", "unexpected character '#'"),
])
def test_what_it_cannot_account_for_is_refused_with_the_column(sql, problem):
    with pytest.raises(ValueError, match=re.escape(problem)) as refused:
        is_true(sql)
    assert "column" in str(refused.value)


def test_a_filter_nested_deeper_than_python_recurses_is_refused_not_crashed_on():
    with pytest.raises(ValueError, match="nested too deep"):
        is_true("(" * 400 + "region = 'eu'" + ")" * 400)


def test_too_long_a_filter_for_service_bus_is_refused():
    routes = [f"region = 'region-{n:03d}' AND priority > {n}" for n in range(12)]
    with pytest.raises(ValueError, match=f"over Service Bus's {MAX_FILTER_LENGTH}"):
        none_true(routes)
