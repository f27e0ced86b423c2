"""Many filters in one generated function: what a topic runs on each message to choose its subscriptions.

Each SQL filter's code is inlined (no call per filter) and every property is read at most once per
message: the user properties any filter names before the first filter (such a read cannot fail), the
system properties where a filter first needs one (the memo locals of `RuleProgram.memo`). The outcome of each
filter is the one its own `matches` gives: TRUE chooses, FALSE and UNKNOWN do not, and an evaluation
error is reported for that filter alone. Generating the function costs about a third of a millisecond
per filter; `interpret_selector` chooses the same without generating anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from local_broker.rules.codegen import Block, RuleProgram
from local_broker.rules.errors import FilterEvaluationError
from local_broker.rules.filters import SqlFilter
from local_broker.rules.target import RuleTarget

Append = Callable[[Any], None]


@dataclass(frozen=True)
class Choice:
    """`matched` is chosen when `test` is TRUE on the message: an SqlFilter, any `matches(message) -> bool`
    callable (which may raise FilterEvaluationError) or None (always). When the test fails,
    `(failed, error)` is chosen, or nothing when `failed` is None."""

    test: SqlFilter | Callable[[RuleTarget], bool] | None
    matched: Any
    failed: Any = None


@dataclass(frozen=True)
class Step:
    """A decision the selector cannot inline: `run(message, append)` appends what it chooses itself."""

    run: Callable[[RuleTarget, Append], None]


def compile_selector(decisions: Sequence[Choice | Step]) -> Callable[[RuleTarget], list[Any]]:
    """`select(message)`: what each decision chose, in the decisions' order."""
    program = RuleProgram()
    namespace = program.namespace
    body = Block()
    reads_properties, memos = False, set()
    eager: dict[str, str] = {}  # a user property's memo local -> a read of it
    plain: dict[str, str] = {}  # the memo expressions of those -> the local
    for decision in decisions:
        if isinstance(decision, Step):
            body.line(f"{program.bind(decision.run)}(message, _append)")
            continue
        test, matched = decision.test, program.bind(decision.matched)
        if test is None:
            body.line(f"_append({matched})")
            continue
        if isinstance(test, SqlFilter):
            node = test.node
            namespace.update(test.namespace)
            reads_properties = reads_properties or node.reads_properties
            memos.update(node.memos)
            for expression, (local, read) in test.memo_reads.items():
                if local in node.memos and local.startswith("_u_"):
                    eager.setdefault(local, read)
                    plain[expression] = local
        body.line("try:")
        with body.indented():
            if not isinstance(test, SqlFilter):
                body.line(f"if {program.bind(test)}(message):")
            else:
                body.line(f"if {node.result(body, program)} is True:")
            with body.indented():
                body.line(f"_append({matched})")
        failed = None if decision.failed is None else program.bind(decision.failed)
        body.line("except FilterEvaluationError as _error:")
        with body.indented():
            body.line("pass" if failed is None else f"_append(({failed}, _error))")
        if isinstance(test, SqlFilter):  # what its `matches` turns into FilterEvaluationError
            body.line("except (ArithmeticError, TypeError, ValueError) as _error:")
            with body.indented():
                body.line("pass" if failed is None else f"_append(({failed}, _evaluation_error(_error)))")
    head = Block()
    program.preamble(head, reads_properties, memos - eager.keys())
    for local, read in sorted(eager.items()):
        head.line(f"{local} = {read}")
    head.line("_chosen = []")
    head.line("_append = _chosen.append")
    code = "\n".join(body.lines)
    for expression, local in plain.items():
        code = code.replace(expression, local)
    source = "def _select(message):\n" + "\n".join([*head.lines, code]) + "\n    return _chosen\n"
    exec(compile(source, "<selector>", "exec"), namespace)
    return namespace.pop("_select")


def interpret_selector(decisions: Sequence[Choice | Step]) -> Callable[[RuleTarget], list[Any]]:
    """What `compile_selector` builds, by calling each filter's own function (nothing to generate)."""
    plan: list[tuple[str, Any, Any, Any]] = []
    for decision in decisions:
        if isinstance(decision, Step):
            plan.append(("step", decision.run, None, None))
        elif decision.test is None:
            plan.append(("always", None, decision.matched, None))
        else:
            test = decision.test.matches if isinstance(decision.test, SqlFilter) else decision.test
            plan.append(("test", test, decision.matched, decision.failed))

    def select(message: RuleTarget) -> list[Any]:
        chosen: list[Any] = []
        append = chosen.append
        for kind, test, matched, failed in plan:
            if kind == "test":
                try:
                    if test(message):
                        append(matched)
                except FilterEvaluationError as error:
                    if failed is not None:
                        append((failed, error))
            elif kind == "always":
                append(matched)
            else:
                test(message, append)
        return chosen

    return select
