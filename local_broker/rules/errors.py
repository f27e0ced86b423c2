"""The two errors of the rule language: one when a rule is created, one when it runs on a message."""

from __future__ import annotations


class RuleSyntaxError(ValueError):
    """A filter or action text that Service Bus refuses when the rule is created (HTTP 400).

    `position` is the 1-based character offset of the problem in the text; `line` and `column`
    are 1-based as well. The message names the position and the problem.
    """

    def __init__(self, problem: str, text: str = "", position: int = 1) -> None:
        self.problem = problem
        self.position = max(1, position)
        before = text[: self.position - 1]
        self.line = before.count("\n") + 1
        self.column = self.position - (before.rfind("\n") + 1)
        where = f"column {self.column}" if self.line == 1 else f"line {self.line}, column {self.column}"
        super().__init__(f"Syntax error at {where}: {problem}")


class FilterEvaluationError(Exception):
    """A filter or action that fails on one message; the message is dead-lettered for that subscription.

    `type_name` is the .NET exception type name Service Bus writes into DeadLetterReason
    (e.g. "InvalidCastException"); the message text goes into DeadLetterErrorDescription.
    """

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        self.description = message
        super().__init__(message)

    def __repr__(self) -> str:
        return f"FilterEvaluationError({self.type_name!r}, {self.description!r})"
