"""Runs one scenario of the Go binary (go/, the official azservicebus SDK, built by `make setup` into
go/bin/compat) against a namespace and returns the JSON document it prints.

The binary reads the namespace from its environment (`SB_CONNECTION_STRING`, `SB_ADMIN_CONNECTION_STRING`,
`SB_CERT_PATH`: the broker's self-signed certificate, the one root its TLS trusts) and prints one JSON
document as the last line of its standard output. A scenario that fails, or exits without that line, fails
the test with its output."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from patterns.drills.broker import BrokerNamespace
from tests.compat.scenario_process import ScenarioError, connection_settings, run_printing_json

GO_DIR = Path(__file__).resolve().parent / "go"
BINARY = GO_DIR / "bin" / "compat"
DEFAULT_TIMEOUT_SECONDS = 180


def namespace_environment(namespace: BrokerNamespace) -> dict[str, str]:
    return {**connection_settings(namespace), "SB_CERT_PATH": namespace.cert_path}


def run_go(scenario: str, namespace: BrokerNamespace | None = None, *args: str,
           env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Any:
    """`go/bin/compat <scenario> <args>` with the namespace's settings and `env` added to this process's
    environment."""
    if not BINARY.exists():
        raise ScenarioError(f"{BINARY} is not built: `make setup` builds it (scripts/ensure-go.sh)")
    environment = {**os.environ, **(namespace_environment(namespace) if namespace else {}), **(env or {})}
    return run_printing_json([str(BINARY), scenario, *args], cwd=GO_DIR, env=environment, timeout=timeout,
                             label=scenario)
