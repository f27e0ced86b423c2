"""Runs a client scenario in a process of its own (a node script, a Java program) and returns the JSON
document it prints as the last line of its standard output. A scenario that fails, or exits without that
line, fails the test with its output."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def connection_settings(namespace: Any) -> dict[str, str]:
    """What every scenario reads of a namespace (a BrokerNamespace): its AMQP and admin connection strings."""
    return {"SB_CONNECTION_STRING": namespace.connection_string,
            "SB_ADMIN_CONNECTION_STRING": namespace.admin_connection_string}


class ScenarioError(AssertionError):
    """A scenario exited with an error or printed no JSON; the message holds its output."""


def run_printing_json(command: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float,
                      label: str) -> Any:
    try:
        completed = subprocess.run(list(command), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as expired:
        raise ScenarioError(f"{label} did not finish within {timeout:.0f} s\n{_output(expired)}") from None
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise ScenarioError(f"{label} exited with {completed.returncode}\n{_output(completed)}")
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise ScenarioError(f"{label} printed no JSON on its last line\n{_output(completed)}") from None


def _output(result: subprocess.CompletedProcess[str] | subprocess.TimeoutExpired) -> str:
    def text(value: str | bytes | None) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else value or ""

    return f"--- stdout\n{text(result.stdout)[-4000:]}\n--- stderr\n{text(result.stderr)[-6000:]}"
