"""Runs one scenario of the Go binary (go/, the official azservicebus SDK, built by `make setup` into
go/bin/compat) against a namespace and returns the JSON document it prints.

The binary reads the namespace from its environment (`SB_CONNECTION_STRING`, `SB_ADMIN_CONNECTION_STRING`,
`SB_CERT_PATH`: the broker's self-signed certificate, the one root its TLS trusts) and prints one JSON
document as the last line of its standard output. A scenario that fails, or exits without that line, fails
the test with its output."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from patterns.drills.broker import BrokerNamespace

GO_DIR = Path(__file__).resolve().parent / "go"
BINARY = GO_DIR / "bin" / "compat"
DEFAULT_TIMEOUT_SECONDS = 180


class GoScenarioError(AssertionError):
    """A Go scenario exited with an error or printed no JSON; the message holds its output."""


def namespace_environment(namespace: BrokerNamespace) -> dict[str, str]:
    return {
        "SB_CONNECTION_STRING": namespace.connection_string,
        "SB_ADMIN_CONNECTION_STRING": namespace.admin_connection_string,
        "SB_CERT_PATH": namespace.cert_path,
    }


def run_go(scenario: str, namespace: BrokerNamespace | None = None, *args: str,
           env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Any:
    """`go/bin/compat <scenario> <args>` with the namespace's settings and `env` added to this process's
    environment."""
    if not BINARY.exists():
        raise GoScenarioError(f"{BINARY} is not built: `make setup` builds it (Go 1.26+, scripts/ensure-go.sh)")
    environment = {**os.environ, **(namespace_environment(namespace) if namespace else {}), **(env or {})}
    try:
        completed = subprocess.run(
            [str(BINARY), scenario, *args], cwd=GO_DIR, env=environment, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as expired:
        raise GoScenarioError(f"{scenario} did not finish within {timeout:.0f} s\n{_output(expired)}") from None
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise GoScenarioError(f"{scenario} exited with {completed.returncode}\n{_output(completed)}")
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise GoScenarioError(f"{scenario} printed no JSON on its last line\n{_output(completed)}") from None


def _output(result: subprocess.CompletedProcess[str] | subprocess.TimeoutExpired) -> str:
    def text(value: str | bytes | None) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else value or ""

    return f"--- stdout\n{text(result.stdout)[-4000:]}\n--- stderr\n{text(result.stderr)[-4000:]}"
