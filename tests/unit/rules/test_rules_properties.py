"""Property-based tests: the compiled evaluator agrees with a plain tree-walking reference evaluator on
generated expressions and messages, and no generated text makes the parser fail other than by
RuleSyntaxError.

The reference below restates the documented semantics directly (recursion over a small AST, exact
fractions for integer division, a backtracking LIKE matcher) and shares no code with the library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from local_broker.rules import (
    FilterEvaluationError,
    MessageProperties,
    RuleSyntaxError,
    compile_action,
    compile_filter,
)
from local_broker.rules.selector import Choice, Step, compile_selector

# Hypothesis warns about the size of these recursive strategies' reprs; that is expected here.
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")

INT64 = (-(2**63), 2**63 - 1)
NAMES = ["alpha", "Beta", "x", "größe", "my prop"]
PARAMETERS = ["@p1", "@p2"]
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Failure(Exception):
    """The reference's evaluation error, named like the .NET exception the library reports."""

    def __init__(self, type_name: str) -> None:
        super().__init__(type_name)
        self.type_name = type_name


# ---------------------------------------------------------------- generated values and messages

scalar_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-6, 6),
    st.sampled_from([INT64[0], INT64[1], 2**53 + 1, -(2**31)]),
    st.floats(min_value=-1e6, max_value=1e6, width=32),
    st.sampled_from([0.0, -0.0, 0.5, 2.5, 1e300]),
    st.text(alphabet="aAb%_!'é😀\uff5e", max_size=4),
)
values = st.one_of(scalar_values, st.builds(timedelta, seconds=st.integers(-100, 100)))


@st.composite
def messages(draw) -> MessageProperties:
    properties: dict[str, Any] = {}
    for name in NAMES:
        if draw(st.booleans()):
            casing = draw(st.sampled_from([name, name.upper(), name.lower()]))
            properties[casing] = draw(values)
    system = {"Label": draw(st.one_of(st.none(), st.text(alphabet="ab%", max_size=3))), "DeliveryCount": 3}
    return MessageProperties(properties, {k: v for k, v in system.items() if v is not None})


# ---------------------------------------------------------------- the expression AST and its SQL text


@dataclass(frozen=True)
class E:
    """One node: `op` names it, `args` holds children or payload."""

    op: str
    args: tuple


def render_constant(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value) if value >= 0 else f"(-{-value})"
    if isinstance(value, float):
        return repr(value) if math.copysign(1.0, value) > 0 else f"(-{-value!r})"
    return "'" + value.replace("'", "''") + "'"


def render_name(name: str, style: int) -> str:
    if style == 1 and " " not in name:
        return f"user.{name}"
    if style == 2:
        return "[" + name.replace("]", "]]") + "]"
    if style == 3:
        return '"' + name.replace('"', '""') + '"'
    return name if " " not in name else f"[{name}]"


def render(node: E) -> str:
    op, args = node.op, node.args
    if op == "const":
        return render_constant(args[0])
    if op == "prop":
        return render_name(args[0], args[1])
    if op == "sys":
        return f"sys.{args[0]}"
    if op == "param":
        return args[0]
    if op == "pfunc":
        return f"p('{args[0]}')"
    if op == "neg":
        return f"-({render(args[0])})"
    if op == "arith":
        return f"({render(args[1])} {args[0]} {render(args[2])})"
    if op == "cmp":
        return f"({render(args[1])} {args[0]} {render(args[2])})"
    if op == "like":
        negated, operand, pattern, escape = args
        text = f"({render(operand)} {'NOT ' if negated else ''}LIKE {render_constant(pattern)}"
        return text + (f" ESCAPE '{escape}')" if escape else ")")
    if op == "in":
        negated, operand, items = args
        listed = ", ".join(render(item) for item in items)
        return f"({render(operand)} {'NOT ' if negated else ''}IN ({listed}))"
    if op == "isnull":
        return f"({render(args[1])} IS {'NOT ' if args[0] else ''}NULL)"
    if op == "exists":
        return f"EXISTS({render_name(args[0], args[1])})"
    if op in ("and", "or"):
        return f"({render(args[0])} {op.upper()} {render(args[1])})"
    if op == "not":
        return f"(NOT {render(args[0])})"
    assert op == "bool"
    return "TRUE" if args[0] else "FALSE"


leaf_values = st.one_of(
    st.builds(lambda v: E("const", (v,)), scalar_values),
    st.builds(lambda n, s: E("prop", (n, s)), st.sampled_from(NAMES), st.integers(0, 3)),
    st.sampled_from([E("sys", ("Label",)), E("sys", ("DeliveryCount",)), E("sys", ("ReplyTo",))]),
    st.builds(lambda p: E("param", (p,)), st.sampled_from(PARAMETERS)),
    st.builds(lambda n: E("pfunc", (n,)), st.sampled_from(NAMES)),
)
value_trees = st.recursive(
    leaf_values,
    lambda inner: st.one_of(
        st.builds(lambda e: E("neg", (e,)), inner),
        st.builds(lambda o, a, b: E("arith", (o, a, b)), st.sampled_from("+-*/%"), inner, inner),
    ),
    max_leaves=4,
)
patterns = st.lists(
    st.one_of(st.sampled_from(["%", "_", "a", "A", "é", "😀", "'"]), st.sampled_from(["!%", "!_", "!!"])),
    max_size=4,
).map("".join)
simple_conditions = st.one_of(
    st.builds(
        lambda o, a, b: E("cmp", (o, a, b)),
        st.sampled_from(["=", "<>", "!=", "<", "<=", ">", ">="]),
        value_trees,
        value_trees,
    ),
    st.builds(
        lambda n, v, p: E("like", (n, v, p, "!" if "!" in p else None)), st.booleans(), value_trees, patterns
    ),
    st.builds(
        lambda n, v, i: E("in", (n, v, tuple(i))),
        st.booleans(),
        value_trees,
        st.lists(value_trees, min_size=1, max_size=3),
    ),
    st.builds(lambda n, v: E("isnull", (n, v)), st.booleans(), value_trees),
    st.builds(lambda n, s: E("exists", (n, s)), st.sampled_from(NAMES), st.integers(0, 3)),
    st.builds(lambda b: E("bool", (b,)), st.booleans()),
)
conditions = st.recursive(
    simple_conditions,
    lambda inner: st.one_of(
        st.builds(lambda a, b: E("and", (a, b)), inner, inner),
        st.builds(lambda a, b: E("or", (a, b)), inner, inner),
        st.builds(lambda a: E("not", (a,)), inner),
    ),
    max_leaves=4,
)
parameter_values = st.fixed_dictionaries({name: values for name in PARAMETERS})


# ---------------------------------------------------------------- the reference evaluator


def kind(value: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", timedelta: "span"}[type(value)]


def lookup(target: MessageProperties, name: str) -> tuple[bool, Any]:
    properties = target.application_properties
    if name in properties:
        return True, properties[name]
    for key, value in properties.items():
        if key.lower() == name.lower():
            return True, value
    return False, None


def in_int64(value: int) -> int:
    if not INT64[0] <= value <= INT64[1]:
        raise Failure("OverflowException")
    return value


def ref_compare(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    ka, kb = kind(a), kind(b)
    if ka != kb:
        if {ka, kb} <= {"int", "float"}:
            a, b = float(a), float(b)
        else:
            raise Failure("InvalidCastException")
    elif ka == "bool" and op not in ("=", "<>", "!="):
        raise Failure("InvalidOperationException")
    elif ka == "str":
        a, b = a.encode("utf-16-be"), b.encode("utf-16-be")
    return {
        "=": a == b,
        "<>": a != b,
        "!=": a != b,
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
    }[op]


def ref_arithmetic(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    ka, kb = kind(a), kind(b)
    if ka == kb == "int":
        if op in "/%" and b == 0:
            raise Failure("DivideByZeroException")
        quotient = math.trunc(Fraction(a, b)) if b else 0
        results = {"+": a + b, "-": a - b, "*": a * b, "/": quotient, "%": a - b * quotient}
        return in_int64(results[op])
    if {ka, kb} <= {"int", "float"}:
        a, b = float(a), float(b)
        if op == "/" and b == 0:
            return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
        if op == "%":
            return math.nan if b == 0 or math.isinf(a) else math.fmod(a, b)
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0}[op]
    if ka == kb == "str" and op == "+":
        return a + b
    if ka == kb == "span" and op in "+-":
        return a + b if op == "+" else a - b
    raise Failure("InvalidOperationException" if ka == kb else "InvalidCastException")


def like_matches(text: str, pattern: str, escape: str | None) -> bool:
    if not pattern:
        return not text
    head = pattern[0]
    if escape and head == escape:
        return bool(text) and text[0] == pattern[1] and like_matches(text[1:], pattern[2:], escape)
    if head == "%":
        return any(like_matches(text[i:], pattern[1:], escape) for i in range(len(text) + 1))
    if head == "_":
        return bool(text) and like_matches(text[1:], pattern[1:], escape)
    return bool(text) and text[0] == head and like_matches(text[1:], pattern[1:], escape)


def ref_value(node: E, target: MessageProperties, parameters: dict[str, Any]) -> Any:
    op, args = node.op, node.args
    if op == "const":
        return args[0]
    if op in ("prop", "pfunc"):
        return lookup(target, args[0])[1]
    if op == "sys":
        return target.system_properties.get(args[0])
    if op == "param":
        return parameters[args[0]]
    if op == "neg":
        value = ref_value(args[0], target, parameters)
        if value is None:
            return None
        if kind(value) == "int":
            return in_int64(-value)
        if kind(value) in ("float", "span"):
            return -value
        raise Failure("InvalidOperationException")
    symbol, left, right = args
    return ref_arithmetic(symbol, ref_value(left, target, parameters), ref_value(right, target, parameters))


def attempt(fn, *args) -> Any:
    try:
        return fn(*args)
    except Failure as failure:
        return failure


def ref_condition(node: E, target: MessageProperties, parameters: dict[str, Any]) -> bool | None:
    op, args = node.op, node.args
    if op == "bool":
        return args[0]
    if op == "cmp":
        symbol, left, right = args
        return ref_compare(symbol, ref_value(left, target, parameters), ref_value(right, target, parameters))
    if op == "like":
        negated, operand, pattern, escape = args
        value = ref_value(operand, target, parameters)
        if value is None:
            return None
        if not isinstance(value, str):
            raise Failure("InvalidCastException")
        return like_matches(value, pattern, escape) != negated
    if op == "in":
        negated, operand, items = args
        value = ref_value(operand, target, parameters)
        if value is None:
            return None
        outcomes = [attempt(lambda item: ref_value(item, target, parameters), item) for item in items]
        found, failure = False, None
        for outcome in outcomes:
            if isinstance(outcome, Failure):
                failure = failure or outcome
            elif outcome is not None:
                result = attempt(ref_compare, "=", value, outcome)
                if result is True:
                    found = True
                elif isinstance(result, Failure):
                    failure = failure or result
        if not found and failure:
            raise failure
        return found != negated
    if op == "isnull":
        return (ref_value(args[1], target, parameters) is None) != args[0]
    if op == "exists":
        return lookup(target, args[0])[0]
    if op == "not":
        result = ref_condition(args[0], target, parameters)
        return None if result is None else not result
    left = attempt(ref_condition, args[0], target, parameters)
    right = attempt(ref_condition, args[1], target, parameters)
    decisive = op == "or"  # TRUE decides OR, FALSE decides AND, whatever the other side did
    if decisive in (left, right):
        return decisive
    for outcome in (left, right):
        if isinstance(outcome, Failure):
            raise outcome
    return None if None in (left, right) else not decisive


@dataclass(frozen=True)
class Raised:
    type_name: str


def outcome_of(fn) -> Any:
    """The value `fn` returns, or Raised(type name) for an evaluation error (reference or library)."""
    try:
        return fn()
    except (Failure, FilterEvaluationError) as failure:
        return Raised(failure.type_name)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------- the properties


@SETTINGS
@given(tree=conditions, target=messages(), parameters=parameter_values)
def test_filter_agrees_with_the_reference(tree, target, parameters):
    text = render(tree)
    sql_filter = compile_filter(text, parameters)
    expected = outcome_of(lambda: ref_condition(tree, target, parameters))
    actual = outcome_of(lambda: sql_filter.condition(target))
    assert actual == expected, text
    if expected in (True, False, None):
        assert sql_filter.matches(target) is (expected is True)


@SETTINGS
@given(trees=st.lists(conditions, min_size=1, max_size=4), target=messages(), parameters=parameter_values)
def test_a_selector_chooses_what_each_filter_alone_matches(trees, target, parameters):
    """Filters inlined into one function (sharing each property read) decide as each does alone; a failing
    filter is reported for itself only, and a Step runs in its place in the order."""
    filters = [compile_filter(render(tree), parameters) for tree in trees]
    expected: list[Any] = []
    for number, sql_filter in enumerate(filters):
        outcome = outcome_of(lambda sql_filter=sql_filter: sql_filter.matches(target))
        if outcome is True:
            expected.append(number)
        elif isinstance(outcome, Raised):
            expected.append(("failed", number, outcome.type_name))
        expected.append("step")
    decisions: list[Choice | Step] = []
    for number, sql_filter in enumerate(filters):
        decisions.append(Choice(sql_filter, number, ("failed", number)))
        decisions.append(Step(lambda message, append: append("step")))
    chosen = [
        (*item[0], item[1].type_name) if isinstance(item, tuple) else item
        for item in compile_selector(decisions)(target)
    ]
    assert chosen == expected, [render(tree) for tree in trees]


@SETTINGS
@given(tree=value_trees, target=messages(), parameters=parameter_values)
def test_set_agrees_with_the_reference(tree, target, parameters):
    text = f"SET result = {render(tree)}"
    expected = outcome_of(lambda: ref_value(tree, target, parameters))
    action = compile_action(text, parameters)
    actual = outcome_of(lambda: action.apply(target))
    if isinstance(expected, Raised):
        assert actual == expected, text
    else:
        assert actual is None, text
        assert same(lookup(target, "result")[1], expected), text


TOKENS = [
    "sys.",
    "user.",
    "Label",
    "a",
    "[b c]",
    '"d"',
    "'x'",
    "''",
    "1",
    "2.5",
    "1E3",
    "@p1",
    "(",
    ")",
    ",",
    "=",
    "<>",
    "<",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "AND",
    "OR",
    "NOT",
    "IS",
    "NULL",
    "IN",
    "LIKE",
    "ESCAPE",
    "EXISTS",
    "TRUE",
    "FALSE",
    "p(",
    "newid()",
    "SET",
    "REMOVE",
    ";",
    "sys.Foo",
    "[",
    "'",
    '"',
    "\n",
]


NESTINGS = [("(", ")"), ("NOT ", ""), ("a + (", ") = 1"), ("-", ""), ("a = 1 AND ", ""), ("p(", ")")]
nested_texts = st.builds(
    lambda wrap, times, base: wrap[0] * times + base + wrap[1] * times,
    st.sampled_from(NESTINGS),
    st.integers(0, 400),
    st.sampled_from(["a = 1", "1", "'x'"]),
)


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=60),
        st.lists(st.sampled_from(TOKENS), max_size=14).map(" ".join),
        nested_texts,
    )
)
def test_no_text_crashes_the_compilers(text):
    for compile_text in (compile_filter, compile_action):
        try:
            compiled = compile_text(text, {"@p1": 1})
        except RuleSyntaxError as error:
            assert 1 <= error.position <= len(text) + 1
            assert str(error).startswith("Syntax error at ")
            continue
        target = MessageProperties({"a": 1, "b c": "x"}, {"Label": "y"})
        try:
            compiled.matches(target) if hasattr(compiled, "matches") else compiled.apply(target)
        except FilterEvaluationError as error:
            assert error.type_name.endswith("Exception")
