"""LIKE patterns: `%` is any run of characters, `_` exactly one; an ESCAPE character quotes the next."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from local_broker.rules.errors import FilterEvaluationError

_WILDCARDS = {"%": ".*", "_": "."}


def _pieces(pattern: str, escape: str | None) -> list[tuple[bool, str]]:
    """The pattern as (is_wildcard, text) pieces; consecutive literal characters form one piece."""
    pieces: list[tuple[bool, str]] = []
    literal: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if escape is not None and char == escape:
            following = next(chars, None)
            if following is None:
                raise FilterEvaluationError(
                    "ArgumentException", f"The LIKE pattern '{pattern}' ends with the escape character."
                )
            literal.append(following)
        elif char in _WILDCARDS:
            if literal:
                pieces.append((False, "".join(literal)))
                literal = []
            pieces.append((True, char))
        else:
            literal.append(char)
    if literal:
        pieces.append((False, "".join(literal)))
    return pieces


@lru_cache(maxsize=1024)
def compile_like(pattern: str, escape: str | None) -> Callable[[str], bool]:
    """A matcher for one pattern; the common shapes ('abc%', '%abc', '%abc%', 'abc') need no regex."""
    if escape is not None and len(escape) != 1:
        raise FilterEvaluationError(
            "ArgumentException", f"The ESCAPE value '{escape}' must be exactly one character."
        )
    pieces = _pieces(pattern, escape)
    shape = "".join(text if wildcard else "L" for wildcard, text in pieces)
    literal = next((text for wildcard, text in pieces if not wildcard), "")
    simple: dict[str, Callable[[str], bool]] = {
        "": lambda value: value == "",
        "L": lambda value: value == literal,
        "L%": lambda value: value.startswith(literal),
        "%L": lambda value: value.endswith(literal),
        "%L%": lambda value: literal in value,
    }
    if shape in simple:
        return simple[shape]
    if set(shape) == {"%"}:
        return lambda value: True
    regex = "".join(_WILDCARDS[text] if wildcard else re.escape(text) for wildcard, text in pieces)
    matcher = re.compile(regex, re.DOTALL).fullmatch
    return lambda value: matcher(value) is not None
