"""Runs a client of the compatibility suite (a node script, the Go binary) as a process of its own and returns
the one JSON document it prints as the last line of its standard output. A client that fails, or exits
without that line, fails the test with its output."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def run_printing_json(command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float, name: str,
                      error: type[AssertionError]) -> Any:
    """`command` in `cwd` with exactly `env`; `error(...)` with the output when it fails."""
    try:
        completed = subprocess.run(
            list(command), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=timeout, check=False)
    except subprocess.TimeoutExpired as expired:
        raise error(f"{name} did not finish within {timeout:.0f} s\n{_output(expired)}") from None
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise error(f"{name} exited with {completed.returncode}\n{_output(completed)}")
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise error(f"{name} printed no JSON on its last line\n{_output(completed)}") from None


def _output(result: subprocess.CompletedProcess[str] | subprocess.TimeoutExpired) -> str:
    def text(value: str | bytes | None) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else value or ""

    return f"--- stdout\n{text(result.stdout)[-4000:]}\n--- stderr\n{text(result.stderr)[-4000:]}"
