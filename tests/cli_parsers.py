"""The argparse parsers behind `sbfed ...`, taken from the real entry points: `sbfed.cli.main(argv)` runs
until the command's first `parse_args`, which hands over its parser instead of parsing. Used by the help
test (every subcommand described, every option explained) and the doc-test (every `sbfed` command in the
docs parses)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from unittest import mock

from sbfed import cli


class _Reached(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def _hand_over(parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
    raise _Reached(parser)


def parser_for(argv: list[str]) -> argparse.ArgumentParser:
    """The parser `sbfed <argv...>` parses its arguments with (argv: the words that pick the command)."""
    with mock.patch.object(argparse.ArgumentParser, "parse_args", _hand_over):
        try:
            cli.main(list(argv))
        except _Reached as reached:
            return reached.parser
    raise AssertionError(f"sbfed {' '.join(argv)} parsed no arguments")


def check_command(argv: list[str]) -> None:
    """Parse `sbfed <argv...>` with its real parser without running it; argparse's usage error (SystemExit 2)
    when a subcommand, option or value is wrong."""
    words = list(argv)
    parser = parser_for(words)
    # the words the dispatchers consumed before this parser: `broker fault`, `reconcile report`
    consumed = len(parser.prog.split()) - 1
    parser.parse_args(words[consumed:])


def all_parsers() -> Iterator[argparse.ArgumentParser]:
    """`sbfed`, every command and every subcommand, however each is dispatched (a dispatcher may hand a
    command to a parser of its own: the top level's commands, `broker fault`, `reconcile report`)."""
    yield from _walk(parser_for([]))
    yield from _walk(parser_for(["reconcile", "report"]))  # the reconcile parser does not list it


def _walk(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                own = parser_for(sub.prog.split()[1:])
                yield from _walk(own if own.prog == sub.prog else sub)
