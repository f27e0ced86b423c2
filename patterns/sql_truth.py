"""Two-valued forms of Service Bus SQL filters, for a subscription that must take what other filters leave.

A filter selects a message only when it is TRUE. A comparison, LIKE or IN over a property the message lacks
(or holds as null) is UNKNOWN, and NOT UNKNOWN is UNKNOWN, so `NOT (route1 OR route2)` misses a message for
which a route is UNKNOWN and none is TRUE: neither a route nor the negation takes it. `is_true(sql)` rewrites
a filter into one that is TRUE where it is TRUE and FALSE everywhere else, never UNKNOWN: each comparison,
LIKE and IN is guarded with `IS NOT NULL` on the properties that would make it UNKNOWN (`x IN (...)` only on
its left operand, the only one that can), IS NULL and EXISTS are never UNKNOWN, and NOT is pushed down to
them (a NOT over a guarded predicate would be UNKNOWN again). `none_true` is the filter that takes what no
filter of a list selects.

The patterns run unchanged against Service Bus and never import the broker (its rules compiler is on the
other side of that wall), so this module reads the filter's structure itself: the grammar's tokens,
precedence and operators, nothing of evaluation. It refuses what it cannot account for: parameters and
`p()`/`property()`, whose property is named at run time. Its tests evaluate what it writes with the
broker's rules engine over messages with each property present, missing and null.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

MAX_FILTER_LENGTH = 1024  # characters of a SQL filter Service Bus accepts
NEVER = "1=0"  # Service Bus's FalseFilter
KEYWORDS = frozenset({"AND", "OR", "NOT", "IS", "NULL", "IN", "LIKE", "ESCAPE", "EXISTS", "TRUE", "FALSE",
                      "SET", "REMOVE"})
COMPARISONS = frozenset({"=", "<>", "!=", "<", "<=", ">", ">="})
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<name>\[(?:[^\]]|\]\])*\] | "(?:[^"]|"")*" | [^\W\d_]\w*)
  | (?P<parameter>@\w+)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
  | (?P<operator><> | != | <= | >= | [=<>+\-*/%(),.])
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    kind: str  # name, string, number, parameter, an operator's text or a keyword (upper case)
    text: str
    start: int
    end: int


class Condition:
    def true(self) -> str:
        """SQL that is TRUE where this condition is TRUE, FALSE otherwise."""
        raise NotImplementedError

    def false(self) -> str:
        """SQL that is TRUE where this condition is FALSE, FALSE otherwise (UNKNOWN included)."""
        raise NotImplementedError


@dataclass
class Total(Condition):
    """IS [NOT] NULL, EXISTS, TRUE, FALSE: never UNKNOWN."""

    text: str

    def true(self) -> str:
        return self.text

    def false(self) -> str:
        return f"NOT ({self.text})"


@dataclass
class Guarded(Condition):
    """A comparison, LIKE or IN: UNKNOWN when a property it reads (`guards`) is missing or null, or always
    when an operand holds the NULL constant."""

    text: str
    guards: tuple[str, ...]
    null: bool

    def true(self) -> str:
        return self._when(f"({self.text})")

    def false(self) -> str:
        return self._when(f"NOT ({self.text})")

    def _when(self, outcome: str) -> str:
        if self.null:
            return NEVER
        if not self.guards:
            return outcome
        return "(" + " AND ".join([*(f"{g} IS NOT NULL" for g in self.guards), outcome]) + ")"


@dataclass
class Not(Condition):
    operand: Condition

    def true(self) -> str:
        return self.operand.false()

    def false(self) -> str:
        return self.operand.true()


@dataclass
class Junction(Condition):
    """AND or OR of two or more conditions; the other one is its dual under NOT."""

    operator: str
    operands: list[Condition]

    def true(self) -> str:
        return self._joined(self.operator, [o.true() for o in self.operands])

    def false(self) -> str:
        return self._joined("OR" if self.operator == "AND" else "AND", [o.false() for o in self.operands])

    @staticmethod
    def _joined(operator: str, parts: list[str]) -> str:
        return "(" + f" {operator} ".join(parts) + ")"


@dataclass
class Value:
    """An operand: where it is in the text, the properties it reads, whether it holds the NULL constant;
    a parenthesized condition, EXISTS, TRUE or FALSE is a value that is also a `condition`."""

    start: int
    end: int
    reads: tuple[str, ...] = ()
    null: bool = False
    condition: Condition | None = None
    boolean: bool = False  # TRUE or FALSE, which is a value too (`flag = TRUE`)

    def operand(self, parser: Parser) -> Value:
        if self.condition is not None and not self.boolean:
            raise parser.error("a condition cannot be used as a value", self.start)
        return self

    def joined(self, other: Value) -> Value:
        return Value(self.start, other.end, self.reads + other.reads, self.null or other.null)


@dataclass
class Parser:
    """Recursive descent over the filter grammar, with SQL's precedence: OR < AND < NOT < predicates
    (comparison, LIKE, IN, IS NULL) < + - < * / % < unary + -."""

    sql: str
    tokens: list[Token] = field(default_factory=list)
    at: int = 0

    def __post_init__(self) -> None:
        self.tokens = list(_tokens(self.sql))

    def error(self, problem: str, position: int) -> ValueError:
        return ValueError(f"filter {self.sql!r}, column {position + 1}: {problem}")

    def peek(self, offset: int = 0) -> Token | None:
        index = self.at + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def accept(self, *kinds: str) -> Token | None:
        token = self.peek()
        if token is not None and token.kind in kinds:
            self.at += 1
            return token
        return None

    def expect(self, kind: str) -> Token:
        token = self.accept(kind)
        if token is None:
            raise self.error(f"expected '{kind}'", self._position())
        return token

    def _position(self) -> int:
        token = self.peek()
        return token.start if token else len(self.sql)

    def filter(self) -> Condition:
        condition = self.condition()
        if self.peek() is not None:
            raise self.error(f"unexpected '{self.peek().text}'", self._position())
        return self.as_condition(condition)

    def as_condition(self, parsed: Condition | Value) -> Condition:
        if isinstance(parsed, Condition):
            return parsed
        if parsed.condition is None:
            raise self.error("expected a condition (comparison, LIKE, IN, IS NULL, EXISTS, TRUE or FALSE), "
                             "found a value", parsed.start)
        return parsed.condition

    # A condition or, in parentheses, a value: the grammar shares parentheses between the two, so these
    # return a Value where no operator made it a condition, and the caller decides.

    def condition(self) -> Condition | Value:
        return self._junction("OR", self.conjunction)

    def conjunction(self) -> Condition | Value:
        return self._junction("AND", self.negation)

    def _junction(self, operator: str, operand: Callable[[], Condition | Value]) -> Condition | Value:
        operands = [operand()]
        while self.accept(operator):
            operands.append(operand())
        if len(operands) == 1:
            return operands[0]
        return Junction(operator, [self.as_condition(o) for o in operands])

    def negation(self) -> Condition | Value:
        if self.accept("NOT"):
            return Not(self.as_condition(self.negation()))
        return self.predicate()

    def predicate(self) -> Condition | Value:
        left = self.sum()
        negated = self._kind(0) == "NOT" and self._kind(1) in ("LIKE", "IN")
        if negated:
            self.at += 1
        token = self.accept(*COMPARISONS, "LIKE", "IN", "IS")
        if token is None:
            return left
        left = left.operand(self)
        if token.kind == "IS":
            self.accept("NOT")
            end = self.expect("NULL").end
            return Total(self.sql[left.start:end])
        if token.kind == "IN":
            self.expect("(")
            self.sum().operand(self)
            while self.accept(","):
                self.sum().operand(self)
            end = self.expect(")").end
            return Guarded(self.sql[left.start:end], _distinct(left.reads), left.null)
        operands = left.joined(self.sum().operand(self))
        if token.kind == "LIKE" and self.accept("ESCAPE"):
            operands = operands.joined(self.sum().operand(self))
        return Guarded(self.sql[operands.start:operands.end], _distinct(operands.reads), operands.null)

    def _kind(self, offset: int) -> str:
        token = self.peek(offset)
        return token.kind if token else ""

    def sum(self) -> Value:
        return self._arithmetic(("+", "-"), self.product)

    def product(self) -> Value:
        return self._arithmetic(("*", "/", "%"), self.unary)

    def _arithmetic(self, operators: tuple[str, ...], operand: Callable[[], Value]) -> Value:
        value = operand()
        while self.accept(*operators):
            value = value.operand(self).joined(operand().operand(self))
        return value

    def unary(self) -> Value:
        sign = self.accept("+", "-")
        if sign is None:
            return self.atom()
        value = self.unary().operand(self)
        return Value(sign.start, value.end, value.reads, value.null)

    def atom(self) -> Value:
        token = self.accept("string", "number", "NULL", "TRUE", "FALSE", "name", "parameter", "EXISTS", "(")
        if token is None:
            found = f"'{self.peek().text}'" if self.peek() else "the end of the filter"
            raise self.error(f"expected an expression, found {found}", self._position())
        if token.kind in ("string", "number"):
            return Value(token.start, token.end)
        if token.kind == "NULL":
            return Value(token.start, token.end, null=True)
        if token.kind in ("TRUE", "FALSE"):
            return Value(token.start, token.end, condition=Total(token.text), boolean=True)
        if token.kind == "parameter":
            raise self.error(f"{token.text}: a route takes no parameters; write the value into the filter",
                             token.start)
        if token.kind == "EXISTS":
            self.expect("(")
            name = self.expect("name")
            self.property_reference(name)
            end = self.expect(")").end
            return Value(token.start, end, condition=Total(self.sql[token.start:end]))
        if token.kind == "(":
            return self._group(token)
        return self.property_reference(token)

    def _group(self, opening: Token) -> Value:
        inner = self.condition()
        closing = self.expect(")")
        if isinstance(inner, Value):
            return Value(opening.start, closing.end, inner.reads, inner.null, inner.condition, inner.boolean)
        return Value(opening.start, closing.end, condition=inner)

    def property_reference(self, name: Token) -> Value:
        """`name`, `[name]`, `"name"`, `user.name`, `sys.Name`; a function call is refused but `newid()`."""
        if self.accept("("):
            if name.text.lower() != "newid":
                raise self.error(f"{name.text}(): a route may read only properties it names (a property "
                                 "named at run time cannot be guarded against being missing)", name.start)
            return Value(name.start, self.expect(")").end)
        end = name.end
        if self.accept("."):
            end = self.expect("name").end
        text = self.sql[name.start:end]
        return Value(name.start, end, reads=(text,))


def _tokens(sql: str) -> Iterable[Token]:
    position = 0
    while position < len(sql):
        match = _TOKEN.match(sql, position)
        if match is None:
            raise ValueError(f"filter {sql!r}, column {position + 1}: unexpected character "
                             f"{sql[position]!r}")
        kind, text = match.lastgroup or "", match.group()
        position = match.end()
        if kind == "space":
            continue
        if kind == "name" and text.upper() in KEYWORDS:
            kind = text.upper()
        elif kind == "operator":
            kind = text
        yield Token(kind, text, match.start(), match.end())


def _distinct(references: tuple[str, ...]) -> tuple[str, ...]:
    """Each property once (names are case-insensitive), in the order they are read."""
    seen: dict[str, str] = {}
    for reference in references:
        seen.setdefault(reference.lower(), reference)
    return tuple(seen.values())


def is_true(sql: str) -> str:
    """A filter that is TRUE where `sql` is TRUE and FALSE where it is FALSE or UNKNOWN."""
    try:
        return Parser(sql).filter().true()
    except RecursionError:  # Service Bus itself refuses such nesting
        raise ValueError(f"filter {sql[:60]!r}...: nested too deep to rewrite") from None


def none_true(filters: Iterable[str]) -> str:
    """The filter that selects a message exactly when none of `filters` does (each one FALSE or UNKNOWN),
    within Service Bus's 1,024 characters."""
    sql = f"NOT ({' OR '.join(is_true(f) for f in filters)})"
    if len(sql) > MAX_FILTER_LENGTH:
        raise ValueError(f"the filter that takes what no route selects would be {len(sql)} characters long, "
                         f"over Service Bus's {MAX_FILTER_LENGTH}: use fewer or shorter routes")
    return sql
