"""The value semantics of the rule language: C#-style types, promotion, comparison and arithmetic.

NULL and UNKNOWN are both None: every operator here returns None when an operand is None.
Errors are FilterEvaluationError with the .NET exception type name Service Bus reports.
"""

from __future__ import annotations

import math
import operator
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal, DecimalException
from typing import Any

from local_broker.rules.errors import FilterEvaluationError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_EXACT_TYPE_NAMES: dict[type, str] = {
    bool: "Boolean",
    int: "Int64",
    float: "Double",
    Decimal: "Decimal",
    str: "String",
    datetime: "DateTime",
    timedelta: "TimeSpan",
    uuid.UUID: "Guid",
    bytes: "Byte[]",
}


def type_name(value: Any) -> str:
    """The .NET name of a value's type (subclasses count as their base: an AMQP `symbol` is a String)."""
    name = _EXACT_TYPE_NAMES.get(type(value))
    if name is not None:
        return name
    for base, base_name in _EXACT_TYPE_NAMES.items():
        if isinstance(value, base):
            return base_name
    return type(value).__name__


_NUMERIC = frozenset({"Int64", "Double", "Decimal"})


def _overflow() -> FilterEvaluationError:
    return FilterEvaluationError("OverflowException", "Arithmetic operation resulted in an overflow.")


def _divide_by_zero() -> FilterEvaluationError:
    return FilterEvaluationError("DivideByZeroException", "Attempted to divide by zero.")


def _no_conversion(left: str, right: str, symbol: str) -> FilterEvaluationError:
    return FilterEvaluationError(
        "InvalidCastException",
        f"Operator '{symbol}' cannot be applied to operands of type '{left}' and '{right}': "
        f"there is no implicit conversion between {left} and {right}.",
    )


def _not_applicable(left: str, right: str, symbol: str) -> FilterEvaluationError:
    return FilterEvaluationError(
        "InvalidOperationException",
        f"Operator '{symbol}' cannot be applied to operands of type '{left}' and '{right}'.",
    )


def checked_int64(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise _overflow()


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _promote(left: Any, right: Any, symbol: str) -> tuple[Any, Any, str]:
    """Both operands converted to their common type, as C# implicit conversions allow, and its name."""
    lname, rname = type_name(left), type_name(right)
    if lname == rname:
        if lname == "DateTime" and (left.tzinfo is None) != (right.tzinfo is None):
            return _as_utc(left), _as_utc(right), lname
        return left, right, lname
    if lname in _NUMERIC and rname in _NUMERIC:
        if "Decimal" in (lname, rname):
            if "Double" in (lname, rname):
                raise _no_conversion(lname, rname, symbol)
            return Decimal(left), Decimal(right), "Decimal"
        return float(left), float(right), "Double"
    raise _no_conversion(lname, rname, symbol)


# ---------------------------------------------------------------- comparison

_ORDERING: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "!=": operator.ne,
    **_ORDERING,
}
_ORDERED_TYPES = frozenset({"Int64", "Double", "Decimal", "String", "DateTime", "TimeSpan", "Guid"})


def _ordinal(compare_fn: Callable[[Any, Any], bool], left: str, right: str) -> bool:
    """Strings order by UTF-16 code unit, as .NET ordinal comparison does (differs above U+FFFF)."""
    if left.isascii() and right.isascii():
        return compare_fn(left, right)
    return compare_fn(left.encode("utf-16-be"), right.encode("utf-16-be"))


def compare(symbol: str, left: Any, right: Any) -> bool | None:
    """`left <symbol> right` with SQL NULL semantics and C# typing; None means UNKNOWN."""
    if left is None or right is None:
        return None
    left, right, common = _promote(left, right, symbol)
    compare_fn = COMPARISONS[symbol]
    if symbol in _ORDERING:
        if common not in _ORDERED_TYPES:
            raise _not_applicable(common, common, symbol)
        if common == "String":
            return _ordinal(compare_fn, left, right)
    return compare_fn(left, right)


# ---------------------------------------------------------------- arithmetic


def _int_divide(left: int, right: int) -> int:
    if right == 0:
        raise _divide_by_zero()
    quotient = abs(left) // abs(right)
    return checked_int64(quotient if (left < 0) == (right < 0) else -quotient)


def _int_remainder(left: int, right: int) -> int:
    if right == 0:
        raise _divide_by_zero()
    remainder = abs(left) % abs(right)
    return remainder if left >= 0 else -remainder


def _float_divide(left: float, right: float) -> float:
    if right == 0.0:
        if left == 0.0 or math.isnan(left):
            return math.nan
        return math.copysign(math.inf, left) * math.copysign(1.0, right)
    return left / right


def _float_remainder(left: float, right: float) -> float:
    if right == 0.0 or math.isinf(left) or math.isnan(left) or math.isnan(right):
        return math.nan
    return math.fmod(left, right)


def _decimal_op(fn: Callable[[Decimal, Decimal], Decimal]) -> Callable[[Decimal, Decimal], Decimal]:
    def apply(left: Decimal, right: Decimal) -> Decimal:
        if fn in (operator.truediv, operator.mod) and right == 0:
            raise _divide_by_zero()
        try:
            return fn(left, right)
        except DecimalException as error:
            raise _overflow() from error

    return apply


_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _int_divide,
    "%": _int_remainder,
}
_FLOAT_OPS: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _float_divide,
    "%": _float_remainder,
}
_DECIMAL_OPS = {
    symbol: _decimal_op(fn)
    for symbol, fn in {
        "+": operator.add,
        "-": operator.sub,
        "*": operator.mul,
        "/": operator.truediv,
        "%": operator.mod,
    }.items()
}
# (left type, symbol, right type) -> operation, for the non-numeric operators C# defines.
_OTHER_OPS: dict[tuple[str, str, str], Callable[[Any, Any], Any]] = {
    ("String", "+", "String"): operator.add,
    ("DateTime", "+", "TimeSpan"): lambda d, t: _as_utc(d) + t,
    ("TimeSpan", "+", "DateTime"): lambda t, d: _as_utc(d) + t,
    ("TimeSpan", "+", "TimeSpan"): operator.add,
    ("DateTime", "-", "TimeSpan"): lambda d, t: _as_utc(d) - t,
    ("DateTime", "-", "DateTime"): lambda a, b: _as_utc(a) - _as_utc(b),
    ("TimeSpan", "-", "TimeSpan"): operator.sub,
}


def arithmetic(symbol: str, left: Any, right: Any) -> Any:
    """`left <symbol> right` for + - * / %; None when either operand is NULL/UNKNOWN."""
    if left is None or right is None:
        return None
    lname, rname = type_name(left), type_name(right)
    other = _OTHER_OPS.get((lname, symbol, rname))
    if other is not None:
        try:
            return other(left, right)
        except OverflowError as error:
            raise _overflow() from error
    if lname in _NUMERIC and rname in _NUMERIC:
        left, right, common = _promote(left, right, symbol)
        if common == "Int64":
            return checked_int64(_INT_OPS[symbol](int(left), int(right)))
        if common == "Double":
            return _FLOAT_OPS[symbol](left, right)
        return _DECIMAL_OPS[symbol](left, right)
    if lname == rname:
        raise _not_applicable(lname, rname, symbol)
    raise _no_conversion(lname, rname, symbol)


def negate(value: Any) -> Any:
    """Unary minus: numbers and TimeSpans."""
    if value is None:
        return None
    name = type_name(value)
    if name == "Int64":
        return checked_int64(-int(value))
    if name in ("Double", "Decimal", "TimeSpan"):
        return -value
    raise FilterEvaluationError(
        "InvalidOperationException", f"Operator '-' cannot be applied to an operand of type '{name}'."
    )


def identity(value: Any) -> Any:
    """Unary plus: defined on the same types as unary minus."""
    if value is not None and type_name(value) not in ("Int64", "Double", "Decimal", "TimeSpan"):
        raise FilterEvaluationError(
            "InvalidOperationException",
            f"Operator '+' cannot be applied to an operand of type '{type_name(value)}'.",
        )
    return value


# ---------------------------------------------------------------- conversions for system properties

_TIMESPAN = re.compile(
    r"\s*(?P<sign>-)?(?:(?:(?P<days>\d+)\.)?(?P<hours>\d+):(?P<minutes>\d+)"
    r"(?::(?P<seconds>\d+)(?:\.(?P<fraction>\d{1,7}))?)?|(?P<only_days>\d+))\s*"
)


def parse_timespan(text: str) -> timedelta:
    """A .NET TimeSpan string `[-][d.]hh:mm[:ss[.fffffff]]` or `[-]d` (e.g. '0:2:0' is two minutes)."""
    match = _TIMESPAN.fullmatch(text)
    if match is None:
        raise FilterEvaluationError(
            "FormatException", f"String '{text}' was not recognized as a valid TimeSpan."
        )
    out_of_range = FilterEvaluationError(
        "OverflowException",
        f"The TimeSpan string '{text}' could not be parsed because a component is out of range.",
    )
    days = int(match["only_days"] or match["days"] or 0)
    hours, minutes, seconds = int(match["hours"] or 0), int(match["minutes"] or 0), int(match["seconds"] or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        raise out_of_range
    ticks = int((match["fraction"] or "0").ljust(7, "0"))
    try:
        span = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds, microseconds=ticks // 10)
    except OverflowError:
        raise out_of_range from None
    return -span if match["sign"] else span


def to_utc(value: datetime) -> datetime:
    """An aware UTC datetime (a value without offset is taken as UTC)."""
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError as error:
        raise FilterEvaluationError(
            "ArgumentOutOfRangeException", f"{value} is out of the DateTime range."
        ) from error


def parse_utc(text: str) -> datetime:
    """An ISO 8601 date and time as an aware UTC datetime (a value without offset is taken as UTC)."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError as error:
        raise FilterEvaluationError(
            "FormatException", f"String '{text}' was not recognized as a valid DateTime."
        ) from error
    return to_utc(value)
