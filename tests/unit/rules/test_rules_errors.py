"""Rules Service Bus refuses at creation (RuleSyntaxError with a position) and errors raised per message."""

from __future__ import annotations

from decimal import Decimal

import pytest

from local_broker.rules import FilterEvaluationError, RuleSyntaxError, compile_action, compile_filter
from tests.unit.rules.rules_truth import message


def refusal(text: str, parameters: dict | None = None, action: bool = False) -> RuleSyntaxError:
    with pytest.raises(RuleSyntaxError) as caught:
        (compile_action if action else compile_filter)(text, parameters)
    return caught.value


class TestSyntaxErrors:
    def test_unexpected_token_names_the_column_and_the_token(self):
        error = refusal("color = 'red' AND AND size > 2")
        assert error.position == 19 and error.column == 19 and error.line == 1
        assert str(error).startswith("Syntax error at column 19: unexpected 'AND'")
        assert "expected an expression" in str(error)

    def test_incomplete_expression(self):
        error = refusal("color = 'red' AND")
        assert error.position == 18
        assert "unexpected end of expression" in str(error)

    def test_positions_on_later_lines(self):
        error = refusal("a = 1\nAND b = = 2")
        assert (error.line, error.column) == (2, 9)
        assert str(error).startswith("Syntax error at line 2, column 9:")

    @pytest.mark.parametrize(
        ("text", "position", "problem"),
        [
            ("name = 'unterminated", 8, "unterminated string constant"),
            ("[open = 1", 1, "unterminated delimited property name"),
            ('"open = 1', 1, "unterminated quoted property name"),
            ("a = 1 # 2", 7, "unexpected character '#'"),
            ("a = b = c", 7, "unexpected '='"),
            ("a BETWEEN 1 AND 2", 3, "unexpected 'BETWEEN'"),
            ("a IN ()", 7, "unexpected ')'"),
            ("(a = 1", 7, "expected ')'"),
            ("", 1, "unexpected end of expression"),
            ("a = 1)", 6, "unexpected ')'"),
            ("a IS 1", 6, "unexpected '1'"),
        ],
    )
    def test_malformed(self, text, position, problem):
        error = refusal(text)
        assert error.position == position
        assert problem in str(error)

    def test_reserved_words_are_not_names(self):
        assert "unexpected 'like'" in str(refusal("like = 1"))
        assert "unexpected 'set'" in str(refusal("set = 1"))
        assert compile_filter("[like] = 1").matches(message(like=1))


class TestSemanticRefusals:
    def test_unknown_system_property(self):
        error = refusal("sys.Colour = 'red'")
        assert error.position == 5
        assert "unknown system property 'sys.Colour'" in str(error)

    def test_unknown_scope(self):
        assert "unknown property scope 'app'" in str(refusal("app.x = 1"))

    def test_unknown_parameter(self):
        error = refusal("color = @colour", {"@color": "red"})
        assert error.position == 9
        assert "unknown parameter '@colour'" in str(error)

    def test_unsupported_parameter_type(self):
        assert "unsupported type 'list'" in str(refusal("a = @p", {"@p": [1]}))

    def test_unknown_function_and_arity(self):
        assert "unknown function 'upper'" in str(refusal("upper(a) = 'A'"))
        assert "newid() takes no arguments" in str(refusal("newid(1) = a"))
        assert "takes exactly one argument" in str(refusal("p() = 1"))
        assert "EXISTS needs a property" in str(refusal("EXISTS(newid())"))

    def test_condition_and_value_in_the_wrong_place(self):
        assert "expected a condition" in str(refusal("quantity"))
        assert "expected a condition" in str(refusal("a = 1 AND b"))
        assert "expected a condition" in str(refusal("NULL"))
        assert "cannot be used as a value" in str(refusal("(a = 1) = TRUE"))
        assert "cannot be used as a value" in str(refusal("a + (b > 1) = 2"))

    def test_integer_out_of_range(self):
        assert "out of the Int64 range" in str(refusal("a = 9223372036854775808"))
        assert compile_filter("a = -9223372036854775808").matches(message(a=-(2**63)))

    def test_constant_like_pattern_problems(self):
        assert "ends with the escape character" in str(refusal(r"a LIKE 'abc\' ESCAPE '\'"))
        assert "exactly one character" in str(refusal("a LIKE 'x' ESCAPE 'ab'"))
        assert "must be a string" in str(refusal("a LIKE 5"))

    def test_empty_names(self):
        assert "cannot be empty" in str(refusal("[] = 1"))

    def test_length_limit(self):
        longest = "s = '" + "x" * 1018 + "'"
        assert len(longest) == 1024
        assert compile_filter(longest).matches(message(s="x" * 1018))
        error = refusal("s = '" + "x" * 1019 + "'")
        assert error.position == 1025
        assert "1025 characters long; the limit is 1024" in str(error)


class TestNesting:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("a = 1 AND " * 100 + "a = 1", True),
            ("a = 1 OR " * 100 + "a = 2", True),
            ("(" * 120 + "a = 1" + ")" * 120, True),
            ("NOT " * 120 + "a = 1", True),
            ("a + (" * 100 + "1" + ")" * 100 + " = 101", True),
            ("(" * 40 + "a = 1" + " AND b = 1) OR a = 1" * 20 + ") AND a = 1" * 20, True),
            ("(" * 30 + "a = 2" + " OR (a = 2)) AND (a = 1 OR b = 2" * 15 + "))" * 15, False),
            ("a=1 AND " * 127 + "a=1", True),
            ("a=2 OR " * 140 + "a=1", True),
            ("a" + "+1" * 500 + " = 501", True),
            ("a" + "*1-1+1" * 150 + " = 1", True),
        ],
    )
    def test_deep_but_legal_expressions_compile_and_run(self, text, expected):
        assert compile_filter(text).matches(message(a=1)) is expected

    def test_too_deep_is_refused(self):
        error = refusal("NOT " * 200 + "a = 1")
        assert "nests more than 128 operators deep" in str(error)
        assert "nests more than" in str(refusal("-" * 1000 + "1 = 1"))
        assert "nests more than" in str(refusal("a = " + "(a+" * 150 + "1" + ")" * 150))


class TestActionRefusals:
    def test_read_only_system_properties(self):
        for name in ("SequenceNumber", "EnqueuedTimeUtc", "DeliveryCount", "LockedUntilUtc", "Size", "State"):
            error = refusal(f"SET sys.{name} = 1", action=True)
            assert error.position == 5
            assert "cannot be changed by an action" in str(error)
        assert "cannot be changed" in str(refusal("REMOVE sys.ExpiresAtUtc", action=True))

    def test_statement_limit(self):
        compile_action("; ".join(f"SET p{i} = {i}" for i in range(32)))
        text = "; ".join(f"SET p{i} = {i}" for i in range(33))
        error = refusal(text, action=True)
        assert "33 statements; the limit is 32" in str(error)
        assert error.position == text.index("SET p32") + 1

    def test_constants_that_cannot_be_assigned(self):
        assert "valid TimeSpan" in str(refusal("SET sys.TimeToLive = 'soon'", action=True))
        assert "out of range" in str(refusal("SET sys.TimeToLive = '0:99:0'", action=True))
        assert "valid DateTime" in str(refusal("SET sys.ScheduledEnqueueTimeUtc = 'tomorrow'", action=True))
        assert "cannot be assigned to sys.Label" in str(refusal("SET sys.Label = 5", action=True))
        assert "out of range" in str(refusal("SET sys.TimeToLive = '99999999999'", action=True))
        early = "SET sys.ScheduledEnqueueTimeUtc = '0001-01-01T00:00:00+01:00'"
        assert "out of the DateTime range" in str(refusal(early, action=True))

    def test_action_syntax(self):
        assert "unexpected end of expression" in str(refusal("SET a =", action=True))
        assert "expected '='" in str(refusal("SET a", action=True))
        assert "unexpected 'x'" in str(refusal("x = 1", action=True))
        assert "cannot be used as a value" in str(refusal("SET a = b > 1", action=True))
        assert "limit is 1024" in str(refusal("SET a = '" + "x" * 1020 + "'", action=True))


class TestEvaluationErrors:
    def test_the_error_carries_a_dotnet_type_name_and_a_description(self):
        sql_filter = compile_filter("quantity / divisor > 1")
        with pytest.raises(FilterEvaluationError) as caught:
            sql_filter.matches(message(quantity=4, divisor=0))
        assert caught.value.type_name == "DivideByZeroException"
        assert str(caught.value) == "Attempted to divide by zero."

    def test_invalid_cast_description_names_both_types(self):
        with pytest.raises(FilterEvaluationError) as caught:
            compile_filter("priority > 3").matches(message(priority="high"))
        assert caught.value.type_name == "InvalidCastException"
        assert "'String' and 'Int64'" in str(caught.value)

    def test_constant_errors_surface_per_message_not_at_creation(self):
        sql_filter = compile_filter("1 / 0 = 1")
        with pytest.raises(FilterEvaluationError):
            sql_filter.matches(message())

    @pytest.mark.parametrize(
        ("text", "value", "type_name"),
        [
            ("a > 1.5", 10**400, "OverflowException"),
            ("a < 1", Decimal("NaN"), "ArithmeticException"),
            ("a * a > 1", Decimal("1E+999999"), "OverflowException"),
            ("a < a", [1], "InvalidOperationException"),
        ],
    )
    def test_unusual_property_values_fail_as_evaluation_errors(self, text, value, type_name):
        with pytest.raises(FilterEvaluationError) as caught:
            compile_filter(text).matches(message(a=value))
        assert caught.value.type_name == type_name

    def test_runtime_conversion_failures_in_actions(self):
        action = compile_action("SET sys.TimeToLive = ttl")
        with pytest.raises(FilterEvaluationError) as caught:
            action.apply(message(ttl="soon"))
        assert caught.value.type_name == "FormatException"
        with pytest.raises(FilterEvaluationError) as caught:
            action.apply(message(ttl=5))
        assert caught.value.type_name == "InvalidCastException"
