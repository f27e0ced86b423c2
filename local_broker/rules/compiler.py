"""Compiles the lark tree of a filter or action into generated Python code, once per rule.

Conditions evaluate to True, False or None (UNKNOWN); values to a Python value or None (NULL or
UNKNOWN, which behave alike except for EXISTS). Sub-trees without properties are folded into
constants at compile time (unless evaluating them fails: that error belongs to each message).
The usual shapes (a property compared with a constant, LIKE with a constant pattern, IN over
constants) get inline fast paths for the usual types and call helpers (runtime.py) for the rest.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from lark import Token, Tree

from local_broker.rules import runtime
from local_broker.rules.codegen import Block, Node, PropertyReference, RuleProgram
from local_broker.rules.errors import FilterEvaluationError, RuleSyntaxError
from local_broker.rules.like import compile_like
from local_broker.rules.target import SYSTEM_PROPERTIES, RuleTarget
from local_broker.rules.values import INT64_MAX, INT64_MIN, identity, negate

PARAMETER_TYPES = (type(None), bool, int, float, Decimal, str, datetime, timedelta, uuid.UUID, bytes)
MAX_EXPRESSION_LENGTH = 1024
# Operands this deep become functions of their own (a call instead of inline code), which keeps the
# blocks of a generated function (2 per AND/OR level, 1 for the whole) under Python's 20; see `shallow`.
OUTLINE_DEPTH = 8
_PYTHON_COMPARISONS = {"=": "==", "<>": "!=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def check_length(text: str, what: str) -> None:
    """Service Bus limits filter and action texts to 1,024 characters."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise RuleSyntaxError(
            f"the {what} is {len(text)} characters long; the limit is {MAX_EXPRESSION_LENGTH}",
            text,
            MAX_EXPRESSION_LENGTH + 1,
        )


def _has_token(tree: Tree, token_type: str) -> bool:
    return any(isinstance(child, Token) and child.type == token_type for child in tree.children)


class Compiler:
    """Turns one rule text's lark tree into Nodes; every refusal is a RuleSyntaxError with a position."""

    def __init__(self, text: str, parameters: Mapping[str, Any] | None) -> None:
        self.text = text
        self.program = RuleProgram()
        self.parameters: dict[str, Any] = {}
        for name, value in (parameters or {}).items():
            if not isinstance(value, PARAMETER_TYPES):
                problem = f"parameter '{name}' has unsupported type '{type(value).__name__}'"
                raise RuleSyntaxError(problem, text, 1)
            self.parameters[name.lstrip("@").lower()] = value

    def error(self, problem: str, position: int) -> RuleSyntaxError:
        return RuleSyntaxError(problem, self.text, position)

    def function(self, node: Node, truth: bool = False) -> Callable[[RuleTarget], Any]:
        return self.program.function(node, truth)

    # ------------------------------------------------------------ kinds, positions, folding

    def condition(self, tree: Tree | Token) -> Node:
        node = self.node(tree)
        if node.kind == "value":
            raise self.error(
                "expected a condition (comparison, LIKE, IN, IS NULL, EXISTS, TRUE or FALSE), found a value",
                node.position,
            )
        return self.shallow(node)

    def value(self, tree: Tree | Token) -> Node:
        node = self.node(tree)
        if node.kind == "condition":
            raise self.error("a condition cannot be used as a value", node.position)
        return self.shallow(node)

    def shallow(self, node: Node) -> Node:
        """A deeply nested node as a call of its own generated function, so that no generated function
        exceeds Python's limits on nested blocks and parentheses."""
        if node.depth < OUTLINE_DEPTH or node.is_constant:
            return node
        function = self.program.bind(self.function(node))
        return Node(node.kind, node.position, source=f"{function}(message)", reference=node.reference)

    def node(self, tree: Tree | Token) -> Node:
        return getattr(self, f"_{tree.data}")(tree)

    @staticmethod
    def position(tree: Tree | Token) -> int:
        if isinstance(tree, Token):
            return (tree.start_pos or 0) + 1
        return 1 if tree.meta.empty else tree.meta.start_pos + 1

    def constant(self, value: Any, kind: str, position: int) -> Node:
        return Node(kind, position, source=self.program.bind(value), constant=value)

    def helper(self, function: Callable[..., Any]) -> str:
        """Bind a helper into the rule's namespace; the name to call it by."""
        return self.program.bind(function)

    def built(self, kind: str, position: int, operands: list[Node], source: str = "", emit=None) -> Node:
        """A Node over `operands`, folded into a constant when all are constant and evaluation succeeds."""
        node = Node(
            kind,
            position,
            source=source,
            emit=emit,
            reads_properties=any(operand.reads_properties for operand in operands),
            memos=frozenset().union(*(operand.memos for operand in operands)),
            depth=1 + max((operand.depth for operand in operands), default=0),
        )
        if all(operand.is_constant for operand in operands):
            try:
                return self.constant(self.function(node)(None), kind, position)  # type: ignore[arg-type]
            except FilterEvaluationError:
                pass
        return node

    # ------------------------------------------------------------ conditions

    def _chain(self, tree: Tree) -> list[Node]:
        """The operands of an AND (or OR) chain, left to right (iteratively: chains may be long)."""
        nodes: list[Node] = []
        pending: list[Tree | Token] = [tree]
        while pending:
            child = pending.pop()
            if isinstance(child, Tree) and child.data == tree.data:
                pending.extend(reversed([part for part in child.children if isinstance(part, Tree)]))
            else:
                nodes.append(self.condition(child))
        return nodes

    def _logical(self, tree: Tree, decisive: bool) -> Node:
        """AND (decisive FALSE) / OR (decisive TRUE) over a chain of operands, evaluated left to right.

        The decisive outcome of any operand wins, even over another operand's error; otherwise the
        leftmost error is raised; otherwise the result is UNKNOWN if any operand is, else not decisive.
        """
        operands = self._chain(tree)

        def emit(block: Block, target: str) -> None:
            self._guarded(block, operands[0], target)
            for operand in operands[1:]:
                outcome = self.program.name()
                block.line(f"if {target} is not {decisive}:")
                with block.indented():
                    self._guarded(block, operand, outcome)
                    block.line(f"if {outcome} is {decisive}:")
                    with block.indented():
                        block.line(f"{target} = {decisive}")
                    undecided = f"({target} is None and {outcome} is not {not decisive})"
                    block.line(f"elif {target} is {not decisive} or {undecided}:")
                    with block.indented():
                        block.line(f"{target} = {outcome}")
            block.line(f"if {target} is not True and {target} is not False and {target} is not None:")
            with block.indented():
                block.line(f"raise {target}")

        return self.built("condition", self.position(tree), operands, emit=emit)

    @staticmethod
    def _guarded(block: Block, node: Node, target: str) -> None:
        """`target` = the node's outcome, or the FilterEvaluationError it raised."""
        block.line("try:")
        with block.indented():
            node.assign(block, target)
        block.line("except FilterEvaluationError as _error:")
        with block.indented():
            block.line(f"{target} = _error")

    def _and_(self, tree: Tree) -> Node:
        return self._logical(tree, decisive=False)

    def _or_(self, tree: Tree) -> Node:
        return self._logical(tree, decisive=True)

    def _not_(self, tree: Tree) -> Node:
        operand = self.condition(tree.children[1])

        def emit(block: Block, target: str) -> None:
            inner = self.program.name()
            operand.assign(block, inner)
            block.line(f"{target} = None if {inner} is None else not {inner}")

        return self.built("condition", self.position(tree), [operand], emit=emit)

    def _comparison(self, tree: Tree) -> Node:
        left_tree, operator_tree, right_tree = tree.children
        left, right = self.value(left_tree), self.value(right_tree)
        symbol = operator_tree.children[0].value
        if left.is_constant and not right.is_constant and symbol in ("=", "<>", "!="):
            left, right = right, left
        if right.is_constant and type(right.constant) in runtime.fast_types(symbol):
            value, fast_type = self.program.name(), type(right.constant).__name__
            rest = self.helper(runtime.comparison_with_constant(symbol, right.constant))
            also_double = f" or {value}.__class__ is float" if runtime.exact_as_double(right.constant) else ""
            source = (
                f"({value} {_PYTHON_COMPARISONS[symbol]} {right.source} "
                f"if ({value} := {left.source}).__class__ is {fast_type}{also_double} else {rest}({value}))"
            )
        else:
            source = f"{self.helper(runtime.comparison(symbol))}({left.source}, {right.source})"
        return self.built("condition", self.position(tree), [left, right], source=source)

    def _like(self, tree: Tree) -> Node:
        negated = _has_token(tree, "NOT")
        operands = [self.value(child) for child in tree.children if isinstance(child, Tree)]
        operand, pattern = operands[0], operands[1]
        escape = operands[2] if len(operands) == 3 else None
        if pattern.is_constant and (escape is None or escape.is_constant):
            matcher = self._constant_matcher(pattern, escape)
            like = self.helper(runtime.like_constant(matcher, negated))
            source = f"{like}({operand.source})"
            if matcher is not None:  # a String operand straight to the matcher
                value = self.program.name()
                source = (
                    f"({self.helper(matcher)}({value}) is not {negated} "
                    f"if ({value} := {operand.source}).__class__ is str else {like}({value}))"
                )
        else:
            like = self.helper(runtime.like_computed(negated, escape is not None))
            value = self.program.name()
            escape_source = "None" if escape is None else escape.source
            source = (
                f"(None if ({value} := {operand.source}) is None "
                f"else {like}({value}, {pattern.source}, {escape_source}))"
            )
        return self.built("condition", self.position(tree), operands, source=source)

    def _constant_matcher(self, pattern: Node, escape: Node | None) -> Callable[[str], bool] | None:
        """The matcher of a constant pattern, built (and checked) once, at compile time; None if NULL."""
        if pattern.constant is None or (escape is not None and escape.constant is None):
            return None
        for part, role in ((pattern, "pattern"), (escape, "escape character")):
            if part is not None and not isinstance(part.constant, str):
                raise self.error(f"the LIKE {role} must be a string", part.position)
        try:
            return compile_like(pattern.constant, None if escape is None else escape.constant)
        except FilterEvaluationError as error:
            raise self.error(error.description, (escape or pattern).position) from None

    def _in_(self, tree: Tree) -> Node:
        negated = _has_token(tree, "NOT")
        operand, *items = [self.value(child) for child in tree.children if isinstance(child, Tree)]
        value = self.program.name()
        if all(item.is_constant for item in items):
            constants = [item.constant for item in items]
            membership = self.helper(runtime.member_of_constants(constants, negated))
            test = f"{membership}({value})"
            strings = runtime.constant_strings(constants)
            if strings is not None:  # a String value: a set lookup
                test = (
                    f"(({value} {'not in' if negated else 'in'} {self.program.bind(strings)}) "
                    f"if {value}.__class__ is str else {test})"
                )
        else:
            # a lambda has locals of its own: it starts from the memos' values (see RuleProgram.memo)
            memos = [", ".join(f"{memo}={memo}" for memo in sorted(item.memos)) for item in items]
            thunks = ", ".join(f"lambda {own}: {item.source}" for own, item in zip(memos, items, strict=True))
            test = f"{self.helper(runtime.member)}({value}, [{thunks}]) is not {negated}"
        source = f"(None if ({value} := {operand.source}) is None else {test})"
        return self.built("condition", self.position(tree), [operand, *items], source=source)

    def _is_null(self, tree: Tree) -> Node:
        operand = self.value(tree.children[0])
        negated = _has_token(tree, "NOT")
        if operand.is_constant:
            return self.constant((operand.constant is None) is not negated, "condition", self.position(tree))
        source = f"(({operand.source}) {'is not' if negated else 'is'} None)"
        return self.built("condition", self.position(tree), [operand], source=source)

    def _exists(self, tree: Tree) -> Node:
        target = self.node(tree.children[1])
        reference, position = target.reference, self.position(tree)
        if reference is not None and reference.scope == "sys":
            return Node("condition", position, source=f"({target.source} is not None)", memos=target.memos)
        if reference is not None:
            find = self.helper(runtime.find_user_key)
            name = self.program.bind(reference.name)
            lowered = self.program.bind(reference.name.lower())
            source = f"({find}(_props, {name}, {lowered}) is not _M)"
            return Node("condition", position, source=source, reads_properties=True)
        function = tree.children[1]
        if function.children[0].value.lower() not in ("property", "p"):
            raise self.error("EXISTS needs a property", target.position)
        name_node = self.value(function.children[1])
        source = f"{self.helper(runtime.exists_named)}(_props, {name_node.source})"
        depth = name_node.depth + 1
        memos = name_node.memos
        return Node("condition", position, source=source, reads_properties=True, memos=memos, depth=depth)

    # ------------------------------------------------------------ values

    def _arithmetic(self, tree: Tree) -> Node:
        """A left-nested chain such as `a + b - c * d`, built left to right (iteratively: it may be long)."""
        steps: list[Tree] = []
        leftmost: Tree | Token = tree
        while isinstance(leftmost, Tree) and leftmost.data == "arithmetic":
            steps.append(leftmost)
            leftmost = leftmost.children[0]
        result = self.value(leftmost)
        for step in reversed(steps):
            _, operator_token, right_tree = step.children
            right = self.value(right_tree)
            symbol = operator_token.value
            operation = self.helper(runtime.arithmetic_operation(symbol))
            source = f"{operation}({result.source}, {right.source})"
            if symbol in "+-*" and right.is_constant and type(right.constant) in (int, float):
                # A Double operand: Double arithmetic with the constant as a Double, inline.
                left, double = self.program.name(), self.program.bind(float(right.constant))
                source = (
                    f"({left} {symbol} {double} if ({left} := {result.source}).__class__ is float "
                    f"else {operation}({left}, {right.source}))"
                )
            result = self.shallow(self.built("value", self.position(step), [result, right], source=source))
        return result

    def _unary(self, tree: Tree) -> Node:
        sign, operand_tree = tree.children
        position = self.position(tree)
        if (
            sign.value == "-"
            and isinstance(operand_tree, Tree)
            and operand_tree.data == "constant"
            and operand_tree.children[0].type == "INTEGER"
        ):
            return self.constant(self._integer(operand_tree.children[0], negative=True), "value", position)
        operand = self.value(operand_tree)
        apply = self.helper(negate if sign.value == "-" else identity)
        return self.built("value", position, [operand], source=f"{apply}({operand.source})")

    def _integer(self, token: Token, negative: bool = False) -> int:
        value = -int(token.value) if negative else int(token.value)
        if not INT64_MIN <= value <= INT64_MAX:
            problem = f"the integer constant {token.value} is out of the Int64 range"
            raise self.error(problem, self.position(token))
        return value

    def _constant(self, tree: Tree) -> Node:
        token: Token = tree.children[0]
        position = self.position(token)
        kind = token.type
        if kind == "INTEGER":
            return self.constant(self._integer(token), "value", position)
        if kind in ("DECIMAL", "APPROXIMATE"):
            return self.constant(float(token.value), "value", position)
        if kind == "STRING":
            return self.constant(token.value[1:-1].replace("''", "'"), "value", position)
        if kind in ("TRUE", "FALSE"):
            return self.constant(kind == "TRUE", "boolean", position)
        return self.constant(None, "value", position)

    def _parameter(self, tree: Tree) -> Node:
        token: Token = tree.children[0]
        key = token.value[1:].lower()
        if key not in self.parameters:
            raise self.error(f"unknown parameter '{token.value}' (no value was given)", self.position(token))
        value = self.parameters[key]
        return self.constant(value, "boolean" if isinstance(value, bool) else "value", self.position(token))

    def _function(self, tree: Tree) -> Node:
        name_token, *argument_trees = tree.children
        name, position = name_token.value.lower(), self.position(tree)
        arguments = [self.value(argument) for argument in argument_trees]
        if name == "newid":
            if arguments:
                raise self.error("newid() takes no arguments", position)
            return Node("value", position, source=f"{self.helper(uuid.uuid4)}()")
        if name in ("property", "p"):
            if len(arguments) != 1:
                problem = f"{name_token.value}() takes exactly one argument: the property name"
                raise self.error(problem, position)
            argument = arguments[0]
            if argument.is_constant and isinstance(argument.constant, str):
                return self._user_property(argument.constant, position, None)
            source = f"{self.helper(runtime.read_named)}(_props, {argument.source})"
            depth = argument.depth + 1
            memos = argument.memos
            return Node("value", position, source=source, reads_properties=True, memos=memos, depth=depth)
        raise self.error(f"unknown function '{name_token.value}'; use newid(), property() or p()", position)

    def _property(self, tree: Tree) -> Node:
        position = self.position(tree)
        reference = self.reference(tree)
        if reference.scope == "sys":
            read = f"message.get_system_property({reference.name!r})"
            local, source = self.program.memo("s", reference.name, read)
            return Node("value", position, source=source, reference=reference, memos=frozenset((local,)))
        return self._user_property(reference.name, position, reference)

    def _user_property(self, name: str, position: int, reference: PropertyReference | None) -> Node:
        """The exact-case key inline; other casings through the slow reader; once per message."""
        value, key = self.program.name(), self.program.bind(name)
        slow = self.helper(runtime.slow_user_property_reader(name))
        read = f"({value} if ({value} := _props.get({key}, _M)) is not _M else {slow}(_props))"
        local, source = self.program.memo("u", name, read)
        memos = frozenset((local,))
        return Node("value", position, source=source, reference=reference, reads_properties=True, memos=memos)

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
