"""The helpers generated rule code calls: value-level operations with fast paths for the usual types.

Everything here works on values (not messages); the generated function reads the properties and
passes their values in. NULL/UNKNOWN is None throughout.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from local_broker.rules.errors import FilterEvaluationError
from local_broker.rules.like import compile_like
from local_broker.rules.target import MISSING, find_user_key
from local_broker.rules.values import COMPARISONS, INT64_MAX, INT64_MIN, arithmetic, compare, type_name

EQUALITY_FAST_TYPES = (int, float, str, bool)
ORDERING_FAST_TYPES = (int, float)
_FAST_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def fast_types(symbol: str) -> tuple[type, ...]:
    """Types whose Python comparison already is the rule language's (ordering strings needs UTF-16)."""
    return EQUALITY_FAST_TYPES if symbol in ("=", "<>", "!=") else ORDERING_FAST_TYPES


def exact_as_double(constant: Any) -> bool:
    """An Int64 constant a Double compares with exactly as Python compares them (C# converts the Int64
    to Double first; Python compares exactly: the same outcome when the conversion is exact)."""
    return type(constant) is int and -(2**53) <= constant <= 2**53


def slow_user_property_reader(name: str) -> Callable[[Mapping[str, Any]], Any]:
    """The lookup once the exact-case key missed: the usual casings first, then a scan of all keys."""
    lowered = name.lower()
    casings = tuple(
        casing
        for casing in dict.fromkeys((lowered, name[:1].upper() + name[1:], name.upper()))
        if casing != name and len(casing) == len(name) and casing.lower() == lowered
    )

    def read(properties: Mapping[str, Any]) -> Any:
        for casing in casings:
            value = properties.get(casing, MISSING)
            if value is not MISSING:
                return value
        key = find_user_key(properties, name, lowered)
        return None if key is MISSING else properties[key]

    return read


def user_name(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise FilterEvaluationError(
        "InvalidCastException", f"A property name must be a String, not a value of type '{type_name(value)}'."
    )


def read_named(properties: Mapping[str, Any], name: Any) -> Any:
    """property(name) / p(name) with a computed name."""
    if name is None:
        return None
    name = user_name(name)
    key = find_user_key(properties, name, name.lower())
    return None if key is MISSING else properties[key]


def exists_named(properties: Mapping[str, Any], name: Any) -> bool:
    if name is None:
        return False
    name = user_name(name)
    return find_user_key(properties, name, name.lower()) is not MISSING


def comparison(symbol: str) -> Callable[[Any, Any], bool | None]:
    """`a <symbol> b` for two computed operands."""
    compare_fn, fast = COMPARISONS[symbol], fast_types(symbol)

    def evaluate(a: Any, b: Any) -> bool | None:
        if a.__class__ is b.__class__ and a.__class__ in fast:
            return compare_fn(a, b)
        return compare(symbol, a, b)

    return evaluate


def comparison_with_constant(symbol: str, constant: Any) -> Callable[[Any], bool | None]:
    """`value <symbol> constant` once the value's class is not the constant's (checked inline)."""
    compare_fn = COMPARISONS[symbol]
    # Int64 meets Double as Double: the other numeric type compares with the constant as a float.
    other_numeric = {int: float, float: int}.get(type(constant))
    as_float = float(constant) if other_numeric else None

    def evaluate(value: Any) -> bool | None:
        if value.__class__ is other_numeric:
            return compare_fn(float(value), as_float)
        return compare(symbol, value, constant)

    return evaluate


def arithmetic_operation(symbol: str) -> Callable[[Any, Any], Any]:
    """+ - * / % with a fast path for + - * on Int64 and Double operands."""
    fast = _FAST_ARITHMETIC.get(symbol)

    def evaluate(a: Any, b: Any) -> Any:
        if fast is not None:
            left_class, right_class = a.__class__, b.__class__
            if left_class is int and right_class is int:
                result = fast(a, b)
                if INT64_MIN <= result <= INT64_MAX:
                    return result
            elif (left_class is float or left_class is int) and (right_class is float or right_class is int):
                return fast(float(a), float(b))
        return arithmetic(symbol, a, b)

    return evaluate


def require_string(value: Any, role: str) -> str:
    if isinstance(value, str):
        return value
    problem = f"LIKE needs a String {role}, not '{type_name(value)}'."
    raise FilterEvaluationError("InvalidCastException", problem)


def like_constant(matcher: Callable[[str], bool] | None, negated: bool) -> Callable[[Any], bool | None]:
    """[NOT] LIKE with a pattern known at compile time (`matcher` None: the pattern or escape is NULL)."""

    def evaluate(value: Any) -> bool | None:
        if value is None or matcher is None:
            return None
        return matcher(require_string(value, "operand")) is not negated

    return evaluate


def like_computed(negated: bool, has_escape: bool) -> Callable[[Any, Any, Any], bool | None]:
    """[NOT] LIKE with a computed pattern; called only for a non-NULL operand."""

    def evaluate(value: Any, pattern: Any, escape: Any) -> bool | None:
        if pattern is None or (has_escape and escape is None):
            return None
        escape_char = require_string(escape, "escape character") if has_escape else None
        matcher = compile_like(require_string(pattern, "pattern"), escape_char)
        return matcher(require_string(value, "operand")) is not negated

    return evaluate


def member(value: Any, items: list[Callable[[], Any]]) -> bool:
    """Whether `value` (not NULL) equals one of the items; errors only count when no item is equal."""
    error: FilterEvaluationError | None = None
    for item in items:
        try:
            candidate = item()
            if candidate is not None and compare("=", value, candidate):
                return True
        except FilterEvaluationError as failure:
            error = error or failure
    if error is not None:
        raise error
    return False


def constant_strings(constants: list[Any]) -> frozenset[str] | None:
    """The items of an IN list as a set when all its non-NULL items are strings (a String value is in
    the list exactly when it is in the set), else None."""
    present = [constant for constant in constants if constant is not None]
    return frozenset(present) if present and all(type(c) is str for c in present) else None


def member_of_constants(constants: list[Any], negated: bool) -> Callable[[Any], bool]:
    """[NOT] IN over constant items, for a non-NULL value; all-string lists use a set."""
    present = [constant for constant in constants if constant is not None]
    items = [lambda constant=constant: constant for constant in present]
    strings = constant_strings(constants)

    def evaluate(value: Any) -> bool:
        if strings is not None and value.__class__ is str:
            return (value in strings) is not negated
        return member(value, items) is not negated

    return evaluate
