"""The compatibility suite: the broker as users run it (`sbfed broker serve`, its own process, in memory on
ephemeral ports), driven by clients other than the Python SDK — the official JavaScript SDK through the node
scripts in js/ (see js_runner.py), the official Java SDK through the Maven project in java/ (see
java_runner.py), and raw AMQP for forms no installed SDK sends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from patterns.drills.broker import BrokerNamespace
from tests.broker_process import brokers

Serve = Callable[[dict[str, Any]], dict[str, BrokerNamespace]]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """A function that starts `sbfed broker serve` for a topology document and returns its namespaces by
    name; every broker it started stops after the module. Each one logs to `<its directory>/broker.log`."""
    with ExitStack() as stack:

        def start(raw_topology: dict[str, Any]) -> dict[str, BrokerNamespace]:
            directory = tmp_path_factory.mktemp("broker")
            namespaces, _ = stack.enter_context(brokers(raw_topology, directory))
            return namespaces

        yield start
