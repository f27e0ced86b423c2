"""The SQL filter language, feature by feature, with the Service Bus documentation examples as vectors."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from local_broker.rules import SYSTEM_PROPERTIES, compile_filter
from tests.unit.rules.rules_truth import message, truth

T, F, U = "1=1", "1=0", "missing = 1"


class TestDocumentationExamples:
    def test_label_like_or_tag_in(self):
        text = "sys.Label LIKE '%bus%' OR user.tag IN ('queue', 'topic', 'subscription')"
        assert truth(text, message({"Label": "service bus"})) == "T"
        assert truth(text, message({"Label": "train"}, tag="topic")) == "T"
        assert truth(text, message({"Label": "train"}, tag="relay")) == "F"
        assert truth(text, message({"Label": "train"})) == "U"

    def test_store_examples(self):
        assert truth("StoreId IN('Store1', 'Store2', 'Store3')", message(StoreId="Store2")) == "T"
        text = "sys.To IN ('Store5','Store6','Store7') OR StoreId = 'Store8'"
        assert truth(text, message({"To": "Store6"})) == "T"
        assert truth(text, message({"To": "Store1"}, StoreId="Store8")) == "T"
        assert truth(text, message({"To": "Store1"}, StoreId="Store9")) == "F"

    def test_color_and_quantity(self):
        assert truth("color='blue' AND quantity=10", message(color="blue", quantity=10)) == "T"
        assert truth("color='blue' AND quantity=10", message(color="blue", quantity=11)) == "F"

    def test_like_with_escape_matches_the_literal_percent(self):
        text = r"property LIKE 'ABC\%' ESCAPE '\'"
        assert truth(text, message(property="ABC%")) == "T"
        assert truth(text, message(property="ABCD")) == "F"

    def test_quoted_name_with_any_characters(self):
        text = "\"http://schemas.microsoft.com/xrm/2011/Claims/EntityLogicalName\" = 'account'"
        props = {"http://schemas.microsoft.com/xrm/2011/Claims/EntityLogicalName": "account"}
        assert truth(text, message(**props)) == "T"

    def test_delimited_name(self):
        assert truth("[my prop] = 1", message(**{"my prop": 1})) == "T"
        assert truth("[a]]b] = 1", message(**{"a]b": 1})) == "T"
        assert truth('"say ""hi""" = 1', message(**{'say "hi"': 1})) == "T"

    def test_decimal_and_approximate_constants(self):
        assert truth("MessageProperty > 2.08", message(MessageProperty=3)) == "T"
        assert truth("MessageProperty > 2.08", message(MessageProperty=2.0)) == "F"
        assert truth("x = 101.5E5", message(x=10150000)) == "T"
        assert truth("x = 0.5E-2", message(x=0.005)) == "T"
        assert truth("x = 1.", message(x=1)) == "T"

    def test_replication_is_null_versus_not_equal(self):
        lacking = message(other=1)
        assert truth("replication IS NULL", lacking) == "T"
        assert truth("replication <> 1", lacking) == "U"
        assert truth("replication IS NOT NULL", lacking) == "F"
        assert truth("replication IS NULL", message(replication=None)) == "T"
        assert truth("replication <> 1", message(replication=2)) == "T"


class TestThreeValuedLogic:
    @pytest.mark.parametrize(
        ("left", "right", "conjunction", "disjunction"),
        [
            (T, T, "T", "T"),
            (T, F, "F", "T"),
            (T, U, "U", "T"),
            (F, T, "F", "T"),
            (F, F, "F", "F"),
            (F, U, "F", "U"),
            (U, T, "U", "T"),
            (U, F, "F", "U"),
            (U, U, "U", "U"),
        ],
    )
    def test_truth_tables(self, left, right, conjunction, disjunction):
        assert truth(f"({left}) AND ({right})") == conjunction
        assert truth(f"({left}) OR ({right})") == disjunction

    def test_not(self):
        assert truth(f"NOT {T}") == "F"
        assert truth(f"NOT {F}") == "T"
        assert truth(f"NOT {U}") == "U"
        assert truth(f"NOT NOT {T}") == "T"

    def test_unknown_propagates_through_arithmetic_and_comparison(self):
        assert truth("missing + 1 > 0") == "U"
        assert truth("-missing < 0") == "U"
        assert truth("1 = NULL") == "U"
        assert truth("NULL <> NULL") == "U"

    def test_like_is_unknown_for_any_unknown_operand(self):
        assert truth("missing LIKE 'a%'") == "U"
        assert truth("'abc' LIKE missing") == "U"
        assert truth("'abc' LIKE 'a%' ESCAPE missing") == "U"
        assert truth("missing NOT LIKE 'a%'") == "U"

    def test_in_is_unknown_only_for_an_unknown_left_operand(self):
        assert truth("missing IN (1, 2)") == "U"
        assert truth("missing NOT IN (1, 2)") == "U"
        assert truth("1 IN (missing, 2)") == "F"
        assert truth("1 NOT IN (missing, 2)") == "T"
        assert truth("1 IN (NULL, 1)") == "T"

    def test_is_null_and_exists_are_never_unknown(self):
        assert truth("missing IS NULL") == "T"
        assert truth("EXISTS(missing)") == "F"
        assert truth("EXISTS(present)", message(present=None)) == "T"
        assert truth("NOT EXISTS(missing)") == "T"
        assert truth("EXISTS(sys.ReplyTo)", message({"ReplyTo": "q"})) == "T"
        assert truth("EXISTS(sys.ReplyTo)") == "F"

    def test_false_outweighs_an_error_in_and_and_true_in_or(self):
        assert truth("x = 'a' AND 1 = 0", message(x=1)) == "F"
        assert truth("1 = 0 AND x = 'a'", message(x=1)) == "F"
        assert truth("x = 'a' OR 1 = 1", message(x=1)) == "T"
        assert truth("x = 'a' AND 1 = 1", message(x=1)) == "InvalidCastException"
        assert truth("x = 'a' OR missing = 1", message(x=1)) == "InvalidCastException"
        assert truth("1/0 = 1 AND x = 'a'", message(x=1)) == "DivideByZeroException"


class TestNamesAndScopes:
    def test_user_names_are_case_insensitive_and_user_is_the_default_scope(self):
        target = message(Color="red")
        assert truth("color = 'red'", target) == "T"
        assert truth("USER.COLOR = 'red'", target) == "T"
        assert truth("user.[color] = 'red'", target) == "T"
        assert truth("cOlOr = 'red'", target) == "T"

    def test_exact_casing_wins(self):
        assert truth("color = 'b'", message(Color="a", color="b")) == "T"

    def test_system_names_are_case_insensitive_and_subject_is_label(self):
        target = message({"Label": "important", "MessageId": "m1"})
        for text in ("sys.Label = 'important'", "sys.label = 'important'", "SYS.SUBJECT = 'important'"):
            assert truth(text, target) == "T"
        assert truth("sys.messageid = 'm1'", target) == "T"
        assert truth("sys.Label = 'important'", message(Label="important")) == "U"

    def test_every_system_property_resolves(self):
        for sql_name, canonical in SYSTEM_PROPERTIES.items():
            assert truth(f"sys.{sql_name} = 7", message({canonical: 7})) == "T"

    def test_keywords_are_case_insensitive(self):
        assert truth("a like 'x%' and not b in (1) or c is not null", message(a="xy", b=2)) == "T"

    def test_names_and_strings_with_quotes_backslashes_and_line_breaks(self):
        name = 'it\'s "odd"\\\n]'
        text = "[it's \"odd\"\\\n]]] = 'a''b\\\n'"
        assert truth(text, message(**{name: "a'b\\\n"})) == "T"
        assert truth('"it\'s ""odd""\\\n]" = \'a\'\'b\\\n\'', message(**{name: "a'b\\\n"})) == "T"

    def test_single_letter_and_unicode_names(self):
        assert truth("p = 1", message(p=1)) == "T"
        assert truth("größe = 'L'", message(Größe="L")) == "T"


class TestComparisonsAndTypes:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("2 = 2", "T"),
            ("2 <> 3", "T"),
            ("2 != 2", "F"),
            ("2 < 3", "T"),
            ("3 <= 3", "T"),
            ("3 > 3", "F"),
            ("3 >= 3", "T"),
            ("1 = 1.0", "T"),
            ("2 > 1.5", "T"),
            ("'a' < 'b'", "T"),
            ("'B' < 'a'", "T"),
            ("'a' = 'A'", "F"),
            ("TRUE = TRUE", "T"),
            ("TRUE <> FALSE", "T"),
        ],
    )
    def test_constant_comparisons(self, text, expected):
        assert truth(text) == expected

    def test_strings_compare_by_utf16_code_unit(self):
        # U+FF5E is above the surrogate range in UTF-16 but below U+1F600 in code points.
        assert truth("a > b", message(a="\uff5e", b="\U0001f600")) == "T"

    def test_int64_and_double_mix_as_double(self):
        assert truth("big = 9007199254740993.0", message(big=9007199254740993)) == "T"

    def test_decimal_mixes_with_int64(self):
        assert truth("d = 2", message(d=Decimal("2.0"))) == "T"
        assert truth("d = 2.0", message(d=Decimal("2.0"))) == "InvalidCastException"

    @pytest.mark.parametrize(
        "text",
        ["s = 1", "s > 1", "1 = s", "flag = 1", "n = TRUE", "n IN ('1')", "ts = 1", "s = g"],
    )
    def test_no_implicit_conversion_is_an_invalid_cast(self, text):
        target = message(s="1", flag=True, n=1, ts=timedelta(seconds=1), g=uuid.uuid4())
        assert truth(text, target) == "InvalidCastException"

    def test_booleans_are_values(self):
        assert truth("flag = TRUE", message(flag=True)) == "T"
        assert truth("flag = FALSE", message(flag=True)) == "F"
        assert truth("flag < TRUE", message(flag=False)) == "InvalidOperationException"

    def test_datetimes_and_timespans(self):
        start = datetime(2024, 1, 1, tzinfo=UTC)
        target = message(
            {"EnqueuedTimeUtc": start + timedelta(hours=1), "TimeToLive": timedelta(minutes=5)},
            Start=start,
            End=start + timedelta(minutes=3),
            Naive=datetime(2024, 1, 1),
        )
        parameters = {"@span": timedelta(minutes=5), "@when": datetime(2024, 6, 1, tzinfo=UTC)}
        assert truth("(End - Start) <= @span", target, parameters) == "T"
        assert truth("Start < @when", target, parameters) == "T"
        assert truth("Naive = Start", target) == "T"
        assert truth("sys.EnqueuedTimeUtc - sys.TimeToLive > Start", target) == "T"
        assert truth("sys.TimeToLive = @span", target, parameters) == "T"
        assert truth("Start + sys.TimeToLive > End", target) == "T"

    def test_guids_compare_with_guids(self):
        value = uuid.uuid4()
        assert truth("g = @g", message(g=value), {"@g": value}) == "T"


class TestArithmetic:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("1 + 2 * 3 = 7", "T"),
            ("(1 + 2) * 3 = 9", "T"),
            ("7 / 2 = 3", "T"),
            ("-7 / 2 = -3", "T"),
            ("-7 % 3 = -1", "T"),
            ("7 % -3 = 1", "T"),
            ("7.0 / 2 = 3.5", "T"),
            ("10 - 2 - 3 = 5", "T"),
            ("-(2) = -2", "T"),
            ("+2 = 2", "T"),
            ("- -2 = 2", "T"),
            ("'ab' + 'c' = 'abc'", "T"),
            ("1.0 / 0 > 1E308", "T"),
            ("-9223372036854775808 < 0", "T"),
        ],
    )
    def test_expressions(self, text, expected):
        assert truth(text) == expected

    def test_integer_division_by_zero(self):
        assert truth("quantity / 0 = 1", message(quantity=5)) == "DivideByZeroException"
        assert truth("quantity % 0 = 1", message(quantity=5)) == "DivideByZeroException"

    def test_double_division_by_zero_is_infinite_or_nan(self):
        assert truth("q / 0 > 1", message(q=5.0)) == "T"
        assert truth("q % 0 = q % 0", message(q=5.0)) == "F"

    def test_int64_overflow(self):
        assert truth("big + 1 > 0", message(big=2**63 - 1)) == "OverflowException"
        assert truth("big * 2.0 > 0", message(big=2**63 - 1)) == "T"

    def test_operators_a_type_lacks(self):
        assert truth("'a' * 'b' = 'c'") == "InvalidOperationException"
        assert truth("'a' + 1 = 'a1'") == "InvalidCastException"
        assert truth("-s = 1", message(s="x")) == "InvalidOperationException"


class TestLike:
    @pytest.mark.parametrize(
        ("value", "pattern", "expected"),
        [
            ("order-1", "order%", "T"),
            ("my order", "%order", "T"),
            ("a bus stop", "%bus%", "T"),
            ("abc", "abc", "T"),
            ("abc", "ABC", "F"),
            ("abc", "a_c", "T"),
            ("abbc", "a_c", "F"),
            ("", "%", "T"),
            ("", "", "T"),
            ("x", "", "F"),
            ("a.c", "a.c", "T"),
            ("abc", "a.c", "F"),
            ("line\nbreak", "line%", "T"),
            ("a(b)*", "a(b)*", "T"),
            ("xaybzc", "%a%b%c", "T"),
        ],
    )
    def test_patterns(self, value, pattern, expected):
        assert truth(f"v LIKE '{pattern}'", message(v=value)) == expected
        negated = {"T": "F", "F": "T"}[expected]
        assert truth(f"v NOT LIKE '{pattern}'", message(v=value)) == negated

    def test_escape(self):
        assert truth("v LIKE 'a!_b' ESCAPE '!'", message(v="a_b")) == "T"
        assert truth("v LIKE 'a!_b' ESCAPE '!'", message(v="axb")) == "F"
        assert truth("v LIKE '100!%%' ESCAPE '!'", message(v="100% sure")) == "T"
        assert truth("v LIKE 'a!!' ESCAPE '!'", message(v="a!")) == "T"

    def test_pattern_from_a_property_or_parameter(self):
        assert truth("v LIKE pattern", message(v="abc", pattern="a%")) == "T"
        assert truth("v LIKE @p ESCAPE @e", message(v="a%"), {"@p": "a#%", "@e": "#"}) == "T"
        assert truth("v LIKE pattern", message(v="abc", pattern=1)) == "InvalidCastException"
        assert truth("v LIKE pattern ESCAPE e", message(v="a", pattern="a", e="xy")) == "ArgumentException"

    def test_non_string_operand(self):
        assert truth("n LIKE '1%'", message(n=12)) == "InvalidCastException"


class TestInAndFunctions:
    def test_in_with_numbers_and_expressions(self):
        assert truth("n IN (1, 2, 3)", message(n=2)) == "T"
        assert truth("n IN (1.0, 2.5)", message(n=1)) == "T"
        assert truth("n NOT IN (1, 2)", message(n=3)) == "T"
        assert truth("n IN (m, m + 1)", message(n=3, m=2)) == "T"
        assert truth("s IN ('a', 'b')", message(s="A")) == "F"

    def test_in_matches_even_if_another_item_fails(self):
        assert truth("n IN ('a', 1)", message(n=1)) == "T"
        assert truth("n IN ('a', 2)", message(n=1)) == "InvalidCastException"
        assert truth("s IN ('a', 'b')", message(s=5)) == "InvalidCastException"

    def test_property_function(self):
        target = message(Color="red", which="color")
        assert truth("property('color') = 'red'", target) == "T"
        assert truth("p('COLOR') = 'red'", target) == "T"
        assert truth("p(which) = 'red'", target) == "T"
        assert truth("p('other') = 'red'", target) == "U"
        assert truth("EXISTS(p(which))", target) == "T"
        assert truth("p(1) = 'red'", target) == "InvalidCastException"
        assert truth("p('sys.Label') = 'x'", message({"Label": "x"})) == "U"

    def test_newid_is_a_fresh_guid(self):
        assert truth("newid() <> newid()") == "T"
        assert truth("NEWID() IS NOT NULL") == "T"

    def test_parameters_are_typed_and_case_insensitive(self):
        parameters = {"@stringParam": "orange", "intParam": 5, "@flag": True, "@ratio": 0.5}
        target = message(color="orange", n=5, ok=True, r=0.5)
        assert (
            truth("color = @stringParam AND n = @INTPARAM AND ok = @flag AND r = @ratio", target, parameters)
            == "T"
        )


class TestBooleanFilters:
    def test_true_and_false_filters(self):
        assert compile_filter("1=1").matches(message())
        assert not compile_filter("1=0").matches(message())
        assert compile_filter("TRUE").matches(message())
        assert not compile_filter("FALSE").matches(message())

    def test_precedence_not_and_or(self):
        # NOT binds tighter than AND, AND tighter than OR.
        assert truth(f"{T} OR {F} AND {F}") == "T"
        assert truth(f"NOT {F} AND {F}") == "F"
        assert truth(f"NOT ({F} AND {F})") == "T"


class TestInlineFastPaths:
    """The shapes compiled inline for the usual types agree with the general helpers on every type."""

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (31.0, "T"),
            (30.0, "F"),
            (29.5, "F"),
            (float("nan"), "F"),
            (31, "T"),
            (True, "InvalidCastException"),
        ],
    )
    def test_number_compared_with_an_integer_constant(self, value, expected):
        assert truth("amount > 30", message(amount=value)) == expected

    def test_double_against_an_integer_constant_beyond_exact_doubles(self):
        big = 2**53 + 1  # as a Double this is 2**53: C# compares the converted values
        assert truth(f"amount = {big}", message(amount=float(2**53))) == "T"
        assert truth(f"amount >= {big}", message(amount=float(2**53))) == "T"
        assert truth("amount = 9007199254740992", message(amount=float(2**53))) == "T"

    def test_not_a_number_is_unequal(self):
        assert truth("amount <> 30", message(amount=float("nan"))) == "T"
        assert truth("amount = 30", message(amount=float("nan"))) == "F"

    @pytest.mark.parametrize(
        ("value", "like", "not_like"),
        [("order1-x", "T", "F"), ("other", "F", "T"), (None, "U", "U"), (5, "InvalidCastException", None)],
    )
    def test_like_with_a_constant_pattern(self, value, like, not_like):
        assert truth("sys.Label LIKE 'order1%'", message({"Label": value})) == like
        if not_like is not None:
            assert truth("sys.Label NOT LIKE 'order1%'", message({"Label": value})) == not_like

    @pytest.mark.parametrize(
        ("value", "in_", "not_in"),
        [
            ("c2", "T", "F"),
            ("c9", "F", "T"),
            (None, "U", "U"),
            (2, "InvalidCastException", "InvalidCastException"),
        ],
    )
    def test_in_a_list_of_strings(self, value, in_, not_in):
        assert truth("customer IN ('c1', 'c2', NULL)", message(customer=value)) == in_
        assert truth("customer NOT IN ('c1', 'c2', NULL)", message(customer=value)) == not_in

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (15.5, "T"),
            (14.5, "F"),
            (15, "T"),
            (2**62, "OverflowException"),
            ("x", "InvalidCastException"),
        ],
    )
    def test_arithmetic_with_a_constant(self, value, expected):
        assert (
            truth("amount * 2 >= 30 AND amount + 1 > 0 AND amount - 1.5 < 1e300", message(amount=value))
            == expected
        )
