"""Generated Python for one rule: each filter or action value becomes one function, compiled once.

A rule's sub-expressions become Python expressions (values, simple conditions) or statements
(AND / OR / NOT, whose outcome depends on errors of their operands); `RuleProgram.function` wraps
them in `def _rule(message): ...` and compiles it with the helpers and constants it refers to.
Generated code calls only the helpers bound into its namespace; constants that are not plain
str/int/bool/None literals are bound as names too, never spelled out as source.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from local_broker.rules.errors import FilterEvaluationError
from local_broker.rules.target import MISSING, RuleTarget

NOT_CONSTANT: Any = object()
UNREAD: Any = object()  # a memo local's value until the property is first read
Emitter = Callable[["Block", str], None]


@dataclass(frozen=True)
class PropertyReference:
    """A property named in the text: scope "user" (name as written) or "sys" (canonical name)."""

    scope: str
    name: str


@dataclass(frozen=True)
class Node:
    """One compiled sub-expression: a Python expression (`source`) or, for AND/OR/NOT, statements (`emit`).

    `kind` is "condition", "value" or "boolean" (TRUE/FALSE, which serve as both); `reads_properties`
    says whether the code uses the message's application properties; `memos` names the locals that keep
    a property once read (see `RuleProgram.memo`); `depth` is how many operator levels its code nests.
    """

    kind: str
    position: int
    source: str = ""
    emit: Emitter | None = None
    constant: Any = NOT_CONSTANT
    reference: PropertyReference | None = None
    reads_properties: bool = False
    memos: frozenset[str] = frozenset()
    depth: int = 1

    @property
    def is_constant(self) -> bool:
        return self.constant is not NOT_CONSTANT

    def assign(self, block: Block, target: str) -> None:
        """Statements that leave this node's result in the local variable `target`."""
        if self.emit is not None:
            self.emit(block, target)
        else:
            block.line(f"{target} = {self.source}")

    def result(self, block: Block, program: RuleProgram) -> str:
        """An expression for this node's result: its source inline, or a fresh local its statements set."""
        if self.emit is None:
            return f"({self.source})"
        local = program.name("_r")
        self.emit(block, local)
        return local


class Block:
    """Indented lines of a function body."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    @contextmanager
    def indented(self):
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1


_programs = itertools.count(1)


class RuleProgram:
    """The namespace and the generated functions of one rule.

    Its names are unique among all programs, so that the code of several rules can run in one function
    (see `selector`).
    """

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            "_M": MISSING,
            "_U": UNREAD,
            "FilterEvaluationError": FilterEvaluationError,
            "_evaluation_error": _evaluation_error,
        }
        self.serial = next(_programs)
        self.count = 0
        self.memo_reads: dict[str, tuple[str, str]] = {}  # memo expression -> (its local, its plain read)

    def name(self, prefix: str = "_t") -> str:
        self.count += 1
        return f"{prefix}{self.serial}_{self.count}"

    def memo(self, scope: str, name: str, read: str) -> tuple[str, str]:
        """(the memo local of a property, an expression that reads it once per call of the function).

        The local starts UNREAD (see `preamble`) and keeps the value from the first read on, wherever
        that happens (so a read skipped by AND/OR costs nothing, and an error stays where it was). Its
        name depends on the property only: every rule in one function shares it.
        """
        local = f"_{scope}_{name.encode('utf-8').hex()}"
        expression = f"({local} if {local} is not _U else ({local} := {read}))"
        self.memo_reads[expression] = (local, read)
        return local, expression

    @staticmethod
    def preamble(block: Block, reads_properties: bool, memos: Iterable[str]) -> None:
        """The lines a function body starts with for the properties its code reads."""
        if reads_properties:
            block.line("_props = message.application_properties")
        for local in sorted(memos):
            block.line(f"{local} = _U")

    def bind(self, value: Any) -> str:
        """Source text that evaluates to `value`: a literal for str/int/bool/None, else a bound name."""
        if value is None or type(value) in (str, int, bool):
            return repr(value)
        name = self.name("_k")
        self.namespace[name] = value
        return name

    def function(self, node: Node, truth: bool = False) -> Callable[[RuleTarget], Any]:
        """`message -> result` for a node; with `truth`, `message -> bool` (TRUE only).

        Python errors of unusual values (an int too large for a float, a decimal NaN ordered, ...)
        leave it as FilterEvaluationError too, so that a filter never fails in any other way.
        """
        body = Block()
        with body.indented():
            suffix = " is True" if truth else ""
            body.line(f"return {node.result(body, self)}{suffix}")
        code = "\n".join(body.lines)
        for expression, (_, read) in self.memo_reads.items():  # one rule alone reads its properties plainly
            code = code.replace(expression, read)
        head = Block()
        head.line("try:")
        with head.indented():  # memos still named (by the lambdas of an IN list) start UNREAD
            self.preamble(head, node.reads_properties, [memo for memo in node.memos if memo in code])
        tail = Block()
        tail.line("except (ArithmeticError, TypeError, ValueError) as _error:")
        with tail.indented():
            tail.line("raise _evaluation_error(_error) from _error")
        source = "def _rule(message):\n" + "\n".join([*head.lines, code, *tail.lines]) + "\n"
        exec(compile(source, "<sql rule>", "exec"), self.namespace)
        return self.namespace.pop("_rule")


def _evaluation_error(error: Exception) -> FilterEvaluationError:
    """The .NET-named evaluation error for a Python error raised by an operation on unusual values."""
    if isinstance(error, OverflowError):
        type_name = "OverflowException"
    elif isinstance(error, ZeroDivisionError):
        type_name = "DivideByZeroException"
    elif isinstance(error, ArithmeticError):
        type_name = "ArithmeticException"
    elif isinstance(error, TypeError):
        type_name = "InvalidOperationException"
    else:
        type_name = "ArgumentException"
    return FilterEvaluationError(type_name, str(error) or type(error).__name__)
