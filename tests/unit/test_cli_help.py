"""`sbfed <command> --help` explains everything: every command and subcommand has a description, every
argument and option a help line, and an option with a default says what it is."""

from __future__ import annotations

import argparse

from tests.cli_parsers import all_parsers

PARSERS = list(all_parsers())


def _own_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions
            if not isinstance(action, (argparse._HelpAction, argparse._VersionAction,
                                       argparse._SubParsersAction))]


def _help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help line as --help prints it (the formatter may add the default; %(default)s is expanded)."""
    return parser._get_formatter()._expand_help(action) if action.help else ""


def _shows_default(text: str) -> bool:
    """"(default: 5)", "(default %(default)s)" expanded, or a default said in words ("default: the azd
    environment name", for one taken from the environment)."""
    return "default" in text.lower()


def test_the_walk_reaches_every_command() -> None:
    progs = {parser.prog for parser in PARSERS}
    assert {"sbfed broker serve", "sbfed broker fault partition", "sbfed topology apply", "sbfed drill",
            "sbfed reconcile report", "sbfed functions run", "sbfed infra params", "sbfed demo"} <= progs


def test_every_command_has_a_description() -> None:
    assert [parser.prog for parser in PARSERS if not (parser.description or "").strip()] == []


def test_every_subcommand_is_listed_with_a_help_line() -> None:
    bare = [f"{parser.prog} {choice.dest}" for parser in PARSERS for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for choice in action._choices_actions if not (choice.help or "").strip()]
    assert bare == []


def test_every_argument_and_option_has_help() -> None:
    bare = [f"{parser.prog} {action.option_strings[0] if action.option_strings else action.dest}"
            for parser in PARSERS for action in _own_actions(parser)
            if action.help is not argparse.SUPPRESS and not (action.help or "").strip()]
    assert bare == []


def test_every_default_is_shown() -> None:
    hidden = [f"{parser.prog} {action.option_strings[0]}: default {action.default!r} not in "
              f"{_help_text(parser, action)!r}"
              for parser in PARSERS for action in _own_actions(parser)
              if action.option_strings and action.default not in (None, False, [], (), argparse.SUPPRESS)
              and not isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
              and not _shows_default(_help_text(parser, action))]
    assert hidden == []
