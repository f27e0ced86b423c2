"""The fenced code blocks of the README and docs/*.md, with what each one asks of the doc-test.

A block is judged by its language, unless the line before its fence says otherwise with an HTML comment
(invisible on GitHub):

    <!-- doctest: skip: needs an Azure subscription -->      nothing is run; the reason is required
    <!-- doctest: fragment: PRIMARY_CS comes from the text -->  Python that compiles and whose imports
                                                              resolve, but uses names the prose supplies
    <!-- doctest: pytest -->                                  a Python test file, run by pytest with
                                                              `-p sbfed.testing`

A fence with no language, or `text`, is output, a synopsis or a layout: nothing to run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[^`]*)$")
MARKER = re.compile(r"^\s*<!-- doctest: (?P<mode>[a-z]+)(?:: (?P<reason>.*?))? -->\s*$")
SHELL_OPERATORS = {";", "&", "&&", "|", "||", "(", ")", ">", ">>", "<", "2>", "<<"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    mode: str  # "" (by language), skip, fragment or pytest
    reason: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, body, start = len(opening["indent"]), [], index
        index += 1
        while index < len(lines) and not FENCE.match(lines[index]):
            line = lines[index]
            body.append(line[indent:] if line[:indent].isspace() or not indent else line.lstrip())
            index += 1
        marker = MARKER.match(_previous_line(lines, start))
        found.append(Block(path, start + 1, (opening["info"].split() or [""])[0], "\n".join(body) + "\n",
                           marker["mode"] if marker else "", (marker["reason"] or "") if marker else ""))
        index += 1
    return found


def _previous_line(lines: list[str], index: int) -> str:
    before = [line for line in lines[:index] if line.strip()]
    return before[-1] if before else ""


def shell_commands(text: str) -> list[list[str]]:
    """Each simple command of a shell block as its words (continuation lines joined, comments, environment
    assignments and redirections dropped)."""
    commands: list[list[str]] = []
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token in SHELL_OPERATORS or set(token) <= set(";&|()<>"):
                if words:
                    commands.append(words)
                words = []
            elif words or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", token):
                words.append(token)
    return commands
