"""Runs a node script of js/ (ESM, `.mjs`) against a namespace and returns the JSON document it prints.

A script reads the namespace from its environment (`SB_CONNECTION_STRING`, `SB_ADMIN_CONNECTION_STRING`;
`NODE_EXTRA_CA_CERTS` makes node trust the broker's self-signed certificate) and prints one JSON document as
the last line of its standard output (js/lib/harness.mjs does both). A script that fails, or exits without
that line, fails the test with its output."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from patterns.drills.broker import BrokerNamespace
from tests.compat.scenario_process import connection_settings, run_printing_json

JS_DIR = Path(__file__).resolve().parent / "js"
DEFAULT_TIMEOUT_SECONDS = 180


def namespace_environment(namespace: BrokerNamespace) -> dict[str, str]:
    return {**connection_settings(namespace), "NODE_EXTRA_CA_CERTS": namespace.cert_path}


def run_js(script: str, namespace: BrokerNamespace | None = None, *args: str,
           env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Any:
    """`node js/<script> <args>` with the namespace's settings and `env` added to this process's
    environment."""
    environment = {**os.environ, **(namespace_environment(namespace) if namespace else {}), **(env or {})}
    return run_printing_json(["node", str(JS_DIR / script), *args], cwd=JS_DIR, env=environment,
                             timeout=timeout, label=script)
