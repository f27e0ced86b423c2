"""A pytest plugin for your own test suite: a Service Bus broker for the session, in one line.

    pytest -p sbfed.testing                  # or, in a conftest.py: pytest_plugins = ["sbfed.testing"]

Fixtures (session-scoped):
* `sbfed_broker`: `sbfed broker serve` in its own process, in memory, on free loopback ports; stopped after
  the session. `.connection_string` (the emulator's form, `UseDevelopmentEmulator=true`),
  `.admin_connection_string`, `.cert_path` (trust it as `connection_verify`), and `.namespaces` by name;
  for clients with no emulator mode, `.amqps_connection_string` (the Azure form) with `.amqps_port` and
  `.websocket_port` (the Python SDK dials 5671/443 whatever the Endpoint says: give it
  `custom_endpoint_address=f"sb://localhost:{port}"`).
* `servicebus_connection_string`: `sbfed_broker.connection_string`.

What it hosts: the topology file given by `--sbfed-topology FILE` (or the `sbfed_topology` ini option; the
sbfed format or the emulator's Config.json), else one namespace `sbemulatorns`; plus the entities each test
declares with `@pytest.mark.sbfed_topology({...})` (a namespace's `queues`/`topics`, as in the topology
file), all merged into the first namespace before the broker starts. An invalid topology stops the session
after collection, before any test runs, with its problems, one line each, naming the file or the test
module/class/function whose marker has them.
"""

from __future__ import annotations

import copy
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import topology
from topology.emulator import DEFAULT_NAMESPACE

MARKER = "sbfed_topology"
FIXTURES = frozenset({"sbfed_broker", "servicebus_connection_string"})
DOCUMENT = pytest.StashKey[dict]()
INLINE_COMMENT = re.compile(r"\s+[#;].*$")
READY_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Namespace:
    name: str
    connection_string: str  # the emulator's form: Endpoint=sb://localhost:<port>;...;UseDevelopmentEmulator=true;
    admin_connection_string: str  # the management port (HTTPS, plain HTTP too)
    cert_path: str
    amqps_connection_string: str  # the Azure form (no emulator flag): AMQPS, or WebSockets
    amqps_port: int
    websocket_port: int


@dataclass(frozen=True)
class SbfedBroker:
    namespaces: dict[str, Namespace]

    @property
    def first(self) -> Namespace:
        return next(iter(self.namespaces.values()))

    @property
    def connection_string(self) -> str:
        return self.first.connection_string

    @property
    def admin_connection_string(self) -> str:
        return self.first.admin_connection_string

    @property
    def cert_path(self) -> str:
        return self.first.cert_path

    @property
    def amqps_connection_string(self) -> str:
        return self.first.amqps_connection_string

    @property
    def amqps_port(self) -> int:
        return self.first.amqps_port

    @property
    def websocket_port(self) -> int:
        return self.first.websocket_port


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--sbfed-topology", help="topology file (or emulator Config.json) for the sbfed_broker "
                                              "fixture")
    parser.addini(MARKER, "topology file (or emulator Config.json) for the sbfed_broker fixture")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(entities): queues/topics the test needs on the session's "
                                       "sbfed broker (merged into its first namespace)")


def _topology_file(config: pytest.Config) -> Path | None:
    """The --sbfed-topology option, else the ini value without an inline comment (`Config.json  # optional`:
    ini files written for other tools put comments there, and pytest keeps them in the value)."""
    given = config.getoption("--sbfed-topology") or INLINE_COMMENT.sub("", config.getini(MARKER)).strip()
    return Path(config.rootpath, given) if given else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Check the session's topology once everything is collected, so an invalid one stops the session with
    its problems, one line each, before any test runs (rather than each test erroring in the fixture)."""
    if any(FIXTURES & set(getattr(item, "fixturenames", ())) for item in items):
        config.stash[DOCUMENT] = _document(config, items)


def _document(config: pytest.Config, items: list[pytest.Item]) -> dict[str, Any]:
    """The topology the session needs: the file's (or the default namespace), plus every marker's entities
    merged into its first namespace; validated, each problem naming the file, or the test module, class
    or function whose marker has it."""
    from local_broker.topology import check_sql

    topology.add_check(check_sql)
    try:
        path = _topology_file(config)
        document = topology.load(path).to_dict() if path else {"namespaces": {DEFAULT_NAMESPACE: {}}}
        declared = _declarations(items)
        merged = _merged(document, declared)
        try:
            topology.parse(merged, f"{MARKER} markers")
        except topology.TopologyError as problems:
            raise _per_declaration(document, declared) or problems from None
    except topology.TopologyError as problems:
        raise pytest.UsageError(str(problems)) from None
    return merged


def _declarations(items: list[pytest.Item]) -> list[tuple[str, dict[str, Any]]]:
    """(node id, entities) of each marker, by the node that carries it (a module's `pytestmark` once)."""
    seen: dict[tuple[str, int], tuple[str, dict[str, Any]]] = {}
    for item in items:
        for node, mark in item.iter_markers_with_node(MARKER):
            entities = mark.args[0] if mark.args else mark.kwargs
            seen.setdefault((node.nodeid, id(mark)), (node.nodeid, entities))
    return list(seen.values())


def _merged(document: dict[str, Any], declared: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    merged = copy.deepcopy(document)
    first = next(iter(merged["namespaces"].values()))
    for where, entities in declared:
        if not isinstance(entities, dict):
            raise topology.TopologyError(f"{where}: {MARKER}: {entities!r} is not a mapping, allowed: "
                                         "{'queues': {...}, 'topics': {...}}")
        for kind, by_name in entities.items():
            into = first.setdefault(kind, {})
            for name, body in (by_name or {}).items():
                if into.setdefault(name, body) != body:
                    raise topology.TopologyError(f"{where}: {MARKER} declares {kind} '{name}' differently "
                                                 "from another test")
    return merged


def _per_declaration(document: dict[str, Any], declared: list[tuple[str, dict[str, Any]]]
                     ) -> topology.TopologyError | None:
    """The problems of each marker on its own (with the file's entities), named by its node; None when
    each is valid alone and only their combination is not."""
    lines: list[str] = []
    for where, entities in declared:
        alone = _merged(document, [(where, entities)])
        try:
            topology.parse(alone, where)
        except topology.TopologyError as problems:
            lines += problems.problems
    return topology.TopologyError(lines) if lines else None


@pytest.fixture(scope="session")
def sbfed_broker(request: pytest.FixtureRequest) -> Iterator[SbfedBroker]:
    """`sbfed broker serve` for the session (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="sbfed-pytest-") as work:
        path, ready = Path(work, "topology.json"), Path(work, "ready.json")
        document = request.config.stash.get(DOCUMENT, None) or _document(request.config,
                                                                         request.session.items)
        path.write_text(json.dumps(document), encoding="utf-8")
        with Path(work, "broker.log").open("w", encoding="utf-8") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "sbfed.cli", "broker", "serve", "--topology", str(path), "--in-memory",
                 "--amqp-port", "0", "--admin-port", "0", "--ready-file", str(ready),
                 "--log-level", "WARNING"],
                stdout=subprocess.DEVNULL, stderr=log)
            try:
                _wait_ready(process, ready, Path(log.name))
                yield SbfedBroker({entry["namespace"]: Namespace(
                    entry["namespace"], entry["emulator_connection_string"],
                    entry["emulator_admin_connection_string"], entry["cert_path"],
                    entry["amqps_connection_string"], entry["amqps_port"], entry["websocket_port"])
                    for entry in json.loads(ready.read_text(encoding="utf-8"))})
            finally:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_TIMEOUT_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()


def _wait_ready(process: subprocess.Popen[bytes], ready: Path, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while not ready.exists():
        if process.poll() is not None:
            raise pytest.UsageError(f"sbfed broker serve exited with {process.returncode}:\n"
                                    f"{log.read_text(encoding='utf-8')}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"sbfed broker serve was not ready within {READY_TIMEOUT_SECONDS:.0f} s")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def servicebus_connection_string(sbfed_broker: SbfedBroker) -> str:
    """The session broker's connection string (first namespace), as the emulator's documented form."""
    return sbfed_broker.connection_string
