"""Runs a node script of js/ (ESM, `.mjs`) against a namespace and returns the JSON document it prints.

A script reads the namespace from its environment (`SB_CONNECTION_STRING`, `SB_ADMIN_CONNECTION_STRING`;
`NODE_EXTRA_CA_CERTS` makes node trust the broker's self-signed certificate) and prints one JSON document as
the last line of its standard output (js/lib/harness.mjs does both). A script that fails, or exits without
that line, fails the test with its output."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from patterns.drills.broker import BrokerNamespace

JS_DIR = Path(__file__).resolve().parent / "js"
DEFAULT_TIMEOUT_SECONDS = 180


class NodeScriptError(AssertionError):
    """A node script exited with an error or printed no JSON; the message holds its output."""


def namespace_environment(namespace: BrokerNamespace) -> dict[str, str]:
    return {
        "SB_CONNECTION_STRING": namespace.connection_string,
        "SB_ADMIN_CONNECTION_STRING": namespace.admin_connection_string,
        "NODE_EXTRA_CA_CERTS": namespace.cert_path,
    }


def run_js(script: str, namespace: BrokerNamespace | None = None, *args: str,
           env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Any:
    """`node js/<script> <args>` with the namespace's settings and `env` added to this process's
    environment."""
    environment = {**os.environ, **(namespace_environment(namespace) if namespace else {}), **(env or {})}
    try:
        completed = subprocess.run(
            ["node", str(JS_DIR / script), *args], cwd=JS_DIR, env=environment, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as expired:
        raise NodeScriptError(f"{script} did not finish within {timeout:.0f} s\n{_output(expired)}") from None
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise NodeScriptError(f"{script} exited with {completed.returncode}\n{_output(completed)}")
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise NodeScriptError(f"{script} printed no JSON on its last line\n{_output(completed)}") from None


def _output(result: subprocess.CompletedProcess[str] | subprocess.TimeoutExpired) -> str:
    def text(value: str | bytes | None) -> str:
        return value.decode(errors="replace") if isinstance(value, bytes) else value or ""

    return f"--- stdout\n{text(result.stdout)[-4000:]}\n--- stderr\n{text(result.stderr)[-4000:]}"
