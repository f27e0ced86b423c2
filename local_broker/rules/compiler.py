"""Compiles the lark tree of a filter or action into nested Python closures, once per rule.

Each node becomes an `Evaluator` (message -> value). Conditions return True, False or None
(UNKNOWN); values return a Python value or None (NULL or UNKNOWN, which behave alike except for
EXISTS). Sub-trees without properties are folded into constants at compile time, and the common
shapes (a property compared with a constant, LIKE with a constant pattern, IN over constants)
get closures with a fast path for the usual types.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from lark import Token, Tree

from local_broker.rules.errors import FilterEvaluationError, RuleSyntaxError
from local_broker.rules.like import compile_like
from local_broker.rules.target import MISSING, SYSTEM_PROPERTIES, RuleTarget, find_user_key
from local_broker.rules.values import (
    COMPARISONS,
    INT64_MAX,
    INT64_MIN,
    arithmetic,
    compare,
    identity,
    negate,
    type_name,
)

Evaluator = Callable[[RuleTarget], Any]
NOT_CONSTANT: Any = object()
PARAMETER_TYPES = (type(None), bool, int, float, Decimal, str, datetime, timedelta, uuid.UUID, bytes)
MAX_EXPRESSION_LENGTH = 1024
_EQUALITY_FAST_TYPES = (int, float, str, bool)
FAST_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_ORDERING_FAST_TYPES = (int, float)


@dataclass(frozen=True)
class PropertyReference:
    """A property named in the text: scope "user" (name as written) or "sys" (canonical name)."""

    scope: str
    name: str

    def __str__(self) -> str:
        return f"{self.scope}.{self.name}"


@dataclass(frozen=True)
class Node:
    """One compiled sub-expression. `kind` is "condition", "value" or "boolean" (TRUE/FALSE serve as both)."""

    evaluate: Evaluator
    kind: str
    position: int
    constant: Any = NOT_CONSTANT
    reference: PropertyReference | None = None

    @property
    def is_constant(self) -> bool:
        return self.constant is not NOT_CONSTANT


def constant_node(value: Any, kind: str, position: int) -> Node:
    def evaluate(message: RuleTarget) -> Any:
        return value

    return Node(evaluate, kind, position, constant=value)


def _user_name(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise FilterEvaluationError(
        "InvalidCastException", f"A property name must be a String, not a value of type '{type_name(value)}'."
    )


def read_user_property(name: str) -> Evaluator:
    """A reader of one user property; the usual casings of the name are tried before scanning all keys."""
    lowered = name.lower()
    casings = tuple(
        casing
        for casing in dict.fromkeys((lowered, name[:1].upper() + name[1:], name.upper()))
        if casing != name and len(casing) == len(name) and casing.lower() == lowered
    )

    def evaluate(message: RuleTarget) -> Any:
        properties = message.application_properties
        value = properties.get(name, MISSING)
        if value is MISSING:
            for casing in casings:
                value = properties.get(casing, MISSING)
                if value is not MISSING:
                    return value
            key = find_user_key(properties, name, lowered)
            return None if key is MISSING else properties[key]
        return value

    return evaluate


def _read_named_user_property(message: RuleTarget, name: str) -> Any:
    properties = message.application_properties
    key = find_user_key(properties, name, name.lower())
    return None if key is MISSING else properties[key]


def conjunction(first: Evaluator, second: Evaluator) -> Evaluator:
    """AND: FALSE if either side is FALSE (even if the other fails), else the first error, else T/U."""

    def evaluate(message: RuleTarget) -> bool | None:
        try:
            left = first(message)
        except FilterEvaluationError as error:
            left = error
        if left is False:
            return False
        try:
            right = second(message)
        except FilterEvaluationError as error:
            right = error
        if right is False:
            return False
        if left is True and right is True:
            return True
        return _unknown_or_raise(left, right)

    return evaluate


def disjunction(first: Evaluator, second: Evaluator) -> Evaluator:
    """OR: TRUE if either side is TRUE (even if the other fails), else the first error, else F/U."""

    def evaluate(message: RuleTarget) -> bool | None:
        try:
            left = first(message)
        except FilterEvaluationError as error:
            left = error
        if left is True:
            return True
        try:
            right = second(message)
        except FilterEvaluationError as error:
            right = error
        if right is True:
            return True
        if left is False and right is False:
            return False
        return _unknown_or_raise(left, right)

    return evaluate


def _unknown_or_raise(left: Any, right: Any) -> None:
    """The undecided AND/OR outcome: the leftmost error if either side failed, else UNKNOWN."""
    for outcome in (left, right):
        if isinstance(outcome, FilterEvaluationError):
            raise outcome
    return None


def negation(operand: Evaluator) -> Evaluator:
    def evaluate(message: RuleTarget) -> bool | None:
        value = operand(message)
        return None if value is None else not value

    return evaluate


def comparison(symbol: str, left: Node, right: Node) -> Evaluator:
    compare_fn = COMPARISONS[symbol]
    fast_types = _EQUALITY_FAST_TYPES if symbol in ("=", "<>", "!=") else _ORDERING_FAST_TYPES
    read_left, read_right = left.evaluate, right.evaluate
    if right.is_constant and type(right.constant) in fast_types:
        constant, constant_type = right.constant, type(right.constant)
        # Int64 meets Double as Double: the other numeric type compares with the constant as a float.
        other_numeric = {int: float, float: int}.get(constant_type)
        as_float = float(constant) if other_numeric else None

        def against_constant(message: RuleTarget) -> bool | None:
            value = read_left(message)
            cls = value.__class__
            if cls is constant_type:
                return compare_fn(value, constant)
            if cls is other_numeric:
                return compare_fn(float(value), as_float)
            return compare(symbol, value, constant)

        return against_constant

    def evaluate(message: RuleTarget) -> bool | None:
        a, b = read_left(message), read_right(message)
        if a.__class__ is b.__class__ and a.__class__ in fast_types:
            return compare_fn(a, b)
        return compare(symbol, a, b)

    return evaluate


def arithmetic_operation(symbol: str, read_left: Evaluator, read_right: Evaluator) -> Evaluator:
    """+ - * / % with a fast path for + - * on Int64 and Double operands."""
    fast = FAST_ARITHMETIC.get(symbol)

    def evaluate(message: RuleTarget) -> Any:
        a, b = read_left(message), read_right(message)
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


def _require_string(value: Any, role: str) -> str:
    if isinstance(value, str):
        return value
    raise FilterEvaluationError(
        "InvalidCastException", f"LIKE needs a String {role}, not '{type_name(value)}'."
    )


def like(operand: Evaluator, matcher_of: Callable[[RuleTarget], Callable[[str], bool] | None], negated: bool):
    """[NOT] LIKE; `matcher_of` gives the pattern's matcher for a message (None: pattern/escape NULL)."""

    def evaluate(message: RuleTarget) -> bool | None:
        value = operand(message)
        if value is None:
            return None
        matcher = matcher_of(message)
        if matcher is None:
            return None
        return matcher(_require_string(value, "operand")) is not negated

    return evaluate


def membership(operand: Evaluator, items: list[Node], negated: bool) -> Evaluator:
    """[NOT] IN: UNKNOWN only when the operand is; NULL items never match; TRUE outweighs item errors."""
    item_evaluators = [item.evaluate for item in items]
    constants = [item.constant for item in items if item.constant is not None]
    if all(item.is_constant for item in items) and constants and all(type(c) is str for c in constants):
        strings = frozenset(constants)

        def in_strings(message: RuleTarget) -> bool | None:
            value = operand(message)
            if value.__class__ is str:
                return (value in strings) is not negated
            return None if value is None else _member(value, item_evaluators, message) is not negated

        return in_strings

    def evaluate(message: RuleTarget) -> bool | None:
        value = operand(message)
        if value is None:
            return None
        return _member(value, item_evaluators, message) is not negated

    return evaluate


def _member(value: Any, items: list[Evaluator], message: RuleTarget) -> bool:
    """Whether `value` equals one of `items`; errors only count when no item is equal."""
    error: FilterEvaluationError | None = None
    for item in items:
        try:
            candidate = item(message)
            if candidate is not None and compare("=", value, candidate):
                return True
        except FilterEvaluationError as failure:
            error = error or failure
    if error is not None:
        raise error
    return False


def check_length(text: str, what: str) -> None:
    """Service Bus limits filter and action texts to 1,024 characters."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise RuleSyntaxError(
            f"the {what} is {len(text)} characters long; the limit is {MAX_EXPRESSION_LENGTH}",
            text,
            MAX_EXPRESSION_LENGTH + 1,
        )


class Compiler:
    """Turns one rule text's lark tree into Nodes; every refusal is a RuleSyntaxError with a position."""

    def __init__(self, text: str, parameters: Mapping[str, Any] | None) -> None:
        self.text = text
        self.parameters: dict[str, Any] = {}
        for name, value in (parameters or {}).items():
            if not isinstance(value, PARAMETER_TYPES):
                raise RuleSyntaxError(
                    f"parameter '{name}' has unsupported type '{type(value).__name__}'", text, 1
                )
            self.parameters[name.lstrip("@").lower()] = value

    def error(self, problem: str, position: int) -> RuleSyntaxError:
        return RuleSyntaxError(problem, self.text, position)

    # ------------------------------------------------------------ kinds

    def condition(self, tree: Tree | Token) -> Node:
        node = self.node(tree)
        if node.kind == "value":
            raise self.error(
                "expected a condition (comparison, LIKE, IN, IS NULL, EXISTS, TRUE or FALSE), found a value",
                node.position,
            )
        return node

    def value(self, tree: Tree | Token) -> Node:
        node = self.node(tree)
        if node.kind == "condition":
            raise self.error("a condition cannot be used as a value", node.position)
        return node

    def node(self, tree: Tree | Token) -> Node:
        return getattr(self, f"_{tree.data}")(tree)

    @staticmethod
    def position(tree: Tree | Token) -> int:
        if isinstance(tree, Token):
            return (tree.start_pos or 0) + 1
        return 1 if tree.meta.empty else tree.meta.start_pos + 1

    def folded(self, evaluate: Evaluator, kind: str, position: int, operands: list[Node]) -> Node:
        """A constant Node when every operand is constant and evaluation succeeds; else the evaluator itself.

        Errors are not raised here: they surface per message, where Service Bus reports them.
        """
        if all(operand.is_constant for operand in operands):
            try:
                return constant_node(evaluate(None), kind, position)  # type: ignore[arg-type]
            except FilterEvaluationError:
                pass
        return Node(evaluate, kind, position)

    # ------------------------------------------------------------ conditions

    def _chain(self, tree: Tree) -> list[Node]:
        """The operands of a left-nested AND (or OR) chain, left to right."""
        nodes: list[Node] = []
        for child in tree.children:
            if isinstance(child, Token):
                continue
            if isinstance(child, Tree) and child.data == tree.data:
                nodes.extend(self._chain(child))
            else:
                nodes.append(self.condition(child))
        return nodes

    def _logical(self, tree: Tree, combine: Callable[[Evaluator, Evaluator], Evaluator]) -> Node:
        operands = self._chain(tree)
        evaluate = operands[0].evaluate
        for operand in operands[1:]:
            evaluate = combine(evaluate, operand.evaluate)
        return self.folded(evaluate, "condition", self.position(tree), operands)

    def _and_(self, tree: Tree) -> Node:
        return self._logical(tree, conjunction)

    def _or_(self, tree: Tree) -> Node:
        return self._logical(tree, disjunction)

    def _not_(self, tree: Tree) -> Node:
        operand = self.condition(tree.children[1])
        return self.folded(negation(operand.evaluate), "condition", self.position(tree), [operand])

    def _comparison(self, tree: Tree) -> Node:
        left_tree, operator_tree, right_tree = tree.children
        left, right = self.value(left_tree), self.value(right_tree)
        symbol = operator_tree.children[0].value
        if left.is_constant and not right.is_constant and symbol in ("=", "<>", "!="):
            left, right = right, left
        return self.folded(comparison(symbol, left, right), "condition", self.position(tree), [left, right])

    def _like(self, tree: Tree) -> Node:
        negated = any(isinstance(c, Token) and c.type == "NOT" for c in tree.children)
        operands = [self.value(child) for child in tree.children if isinstance(child, Tree)]
        operand, pattern = operands[0], operands[1]
        escape = operands[2] if len(operands) == 3 else None
        pattern_parts = [pattern] if escape is None else [pattern, escape]
        if all(part.is_constant for part in pattern_parts):
            matcher_of = self._constant_matcher(pattern, escape)
        else:

            def matcher_of(message: RuleTarget) -> Callable[[str], bool] | None:
                text = pattern.evaluate(message)
                escape_char = None if escape is None else escape.evaluate(message)
                if text is None or (escape is not None and escape_char is None):
                    return None
                escape_text = None if escape is None else _require_string(escape_char, "escape character")
                return compile_like(_require_string(text, "pattern"), escape_text)

        return self.folded(
            like(operand.evaluate, matcher_of, negated), "condition", self.position(tree), operands
        )

    def _constant_matcher(self, pattern: Node, escape: Node | None) -> Callable[[RuleTarget], Any]:
        """The matcher of a constant pattern, built (and checked) once, at compile time."""
        if pattern.constant is None or (escape is not None and escape.constant is None):
            return lambda message: None
        for part, role in ((pattern, "pattern"), (escape, "escape character")):
            if part is not None and not isinstance(part.constant, str):
                raise self.error(f"the LIKE {role} must be a string", part.position)
        try:
            matcher = compile_like(pattern.constant, None if escape is None else escape.constant)
        except FilterEvaluationError as error:
            raise self.error(error.description, (escape or pattern).position) from None
        return lambda message: matcher

    def _in_(self, tree: Tree) -> Node:
        negated = any(isinstance(c, Token) and c.type == "NOT" for c in tree.children)
        operand, *items = [self.value(child) for child in tree.children if isinstance(child, Tree)]
        evaluate = membership(operand.evaluate, items, negated)
        return self.folded(evaluate, "condition", self.position(tree), [operand, *items])

    def _is_null(self, tree: Tree) -> Node:
        negated = any(isinstance(c, Token) and c.type == "NOT" for c in tree.children)
        operand = self.value(tree.children[0])
        read = operand.evaluate

        def evaluate(message: RuleTarget) -> bool:
            return (read(message) is None) is not negated

        return self.folded(evaluate, "condition", self.position(tree), [operand])

    def _exists(self, tree: Tree) -> Node:
        target = self.node(tree.children[1])
        reference, position = target.reference, self.position(tree)
        if reference is not None and reference.scope == "sys":
            read = target.evaluate
            return Node(lambda message: read(message) is not None, "condition", position)
        if reference is not None:
            name, lowered = reference.name, reference.name.lower()
            return Node(
                lambda message: find_user_key(message.application_properties, name, lowered) is not MISSING,
                "condition",
                position,
            )
        function = tree.children[1]
        if function.children[0].value.lower() not in ("property", "p"):
            raise self.error("EXISTS needs a property", target.position)
        name_of = self.value(function.children[1]).evaluate

        def exists_named(message: RuleTarget) -> bool:
            name = name_of(message)
            if name is None:
                return False
            name = _user_name(name)
            return find_user_key(message.application_properties, name, name.lower()) is not MISSING

        return Node(exists_named, "condition", position)

    # ------------------------------------------------------------ values

    def _arithmetic(self, tree: Tree) -> Node:
        left_tree, operator_token, right_tree = tree.children
        left, right = self.value(left_tree), self.value(right_tree)
        evaluate = arithmetic_operation(operator_token.value, left.evaluate, right.evaluate)
        return self.folded(evaluate, "value", self.position(tree), [left, right])

    def _unary(self, tree: Tree) -> Node:
        sign, operand_tree = tree.children
        position = self.position(tree)
        if (
            sign.value == "-"
            and isinstance(operand_tree, Tree)
            and operand_tree.data == "constant"
            and operand_tree.children[0].type == "INTEGER"
        ):
            return constant_node(self._integer(operand_tree.children[0], negative=True), "value", position)
        operand = self.value(operand_tree)
        apply = negate if sign.value == "-" else identity
        read = operand.evaluate
        return self.folded(lambda message: apply(read(message)), "value", position, [operand])

    def _integer(self, token: Token, negative: bool = False) -> int:
        value = -int(token.value) if negative else int(token.value)
        if not INT64_MIN <= value <= INT64_MAX:
            raise self.error(
                f"the integer constant {token.value} is out of the Int64 range", self.position(token)
            )
        return value

    def _constant(self, tree: Tree) -> Node:
        token: Token = tree.children[0]
        position = self.position(token)
        kind = token.type
        if kind == "INTEGER":
            return constant_node(self._integer(token), "value", position)
        if kind in ("DECIMAL", "APPROXIMATE"):
            return constant_node(float(token.value), "value", position)
        if kind == "STRING":
            return constant_node(token.value[1:-1].replace("''", "'"), "value", position)
        if kind in ("TRUE", "FALSE"):
            return constant_node(kind == "TRUE", "boolean", position)
        return constant_node(None, "value", position)

    def _parameter(self, tree: Tree) -> Node:
        token: Token = tree.children[0]
        key = token.value[1:].lower()
        if key not in self.parameters:
            raise self.error(
                f"unknown parameter '{token.value}' (no value was given for it)", self.position(token)
            )
        value = self.parameters[key]
        return constant_node(value, "boolean" if isinstance(value, bool) else "value", self.position(token))

    def _function(self, tree: Tree) -> Node:
        name_token, *argument_trees = tree.children
        name, position = name_token.value.lower(), self.position(tree)
        arguments = [self.value(argument) for argument in argument_trees]
        if name == "newid":
            if arguments:
                raise self.error("newid() takes no arguments", position)
            return Node(lambda message: uuid.uuid4(), "value", position)
        if name in ("property", "p"):
            if len(arguments) != 1:
                raise self.error(
                    f"{name_token.value}() takes exactly one argument: the property name", position
                )
            name_of = arguments[0].evaluate
            if arguments[0].is_constant and isinstance(arguments[0].constant, str):
                return Node(read_user_property(arguments[0].constant), "value", position)

            def evaluate(message: RuleTarget) -> Any:
                property_name = name_of(message)
                if property_name is None:
                    return None
                return _read_named_user_property(message, _user_name(property_name))

            return Node(evaluate, "value", position)
        raise self.error(f"unknown function '{name_token.value}'; use newid(), property() or p()", position)

    def _property(self, tree: Tree) -> Node:
        position = self.position(tree)
        reference = self.reference(tree)
        if reference.scope == "sys":
            canonical = reference.name

            def evaluate(message: RuleTarget) -> Any:
                return message.get_system_property(canonical)

            return Node(evaluate, "value", position, reference=reference)
        return Node(read_user_property(reference.name), "value", position, reference=reference)

    def reference(self, tree: Tree) -> PropertyReference:
        """The property a `property` tree names; unknown scopes and system properties are refused."""
        *scope_tokens, name_token = tree.children
        name = self._identifier(name_token)
        if not scope_tokens:
            return PropertyReference("user", name)
        scope_token = scope_tokens[0]
        scope = scope_token.value.lower() if scope_token.type == "NAME" else ""
        if scope == "user":
            return PropertyReference("user", name)
        if scope != "sys":
            raise self.error(
                f"unknown property scope '{scope_token.value}'; use sys. or user.", self.position(scope_token)
            )
        canonical = SYSTEM_PROPERTIES.get(name.lower())
        if canonical is None:
            raise self.error(f"unknown system property 'sys.{name}'", self.position(name_token))
        return PropertyReference("sys", canonical)

    def _identifier(self, token: Token) -> str:
        if token.type == "DELIMITED_NAME":
            name = token.value[1:-1].replace("]]", "]")
        elif token.type == "QUOTED_NAME":
            name = token.value[1:-1].replace('""', '"')
        else:
            name = token.value
        if not name:
            raise self.error("a property name cannot be empty", self.position(token))
        return name
