"""Shared fixtures: a real local broker on ephemeral loopback ports, started from a topology document.

Tests talk to it as a user would: through connection strings with the real azure-servicebus SDK and
its admin client (`connection_verify=server.cert_path`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from local_broker.server import BrokerServer
from patterns.drills.kafka_broker import KafkaBroker

StartBroker = Callable[..., BrokerServer]

# A user's project that uses the sbfed.testing plugin; tests/integration/test_pytest_plugin.py runs it.
collect_ignore = ["pytest_plugin_project"]


def _starter(directory: Path) -> tuple[StartBroker, list[BrokerServer]]:
    started: list[BrokerServer] = []

    def start(topology: dict[str, Any] | str | Path, data_dir: str | Path | None = None) -> BrokerServer:
        """Start a broker for `topology` (a topology document as a dict, or a file path)."""
        if isinstance(topology, dict):
            path = directory / f"topology-{len(started)}.yaml"
            path.write_text(yaml.safe_dump(topology))
            topology = path
        server = BrokerServer(str(topology), data_dir=None if data_dir is None else str(data_dir),
                              in_memory=data_dir is None)
        server.start()
        started.append(server)
        return server

    return start, started


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[StartBroker]:
    """A function that starts brokers; every broker it started is stopped after the test."""
    start, started = _starter(tmp_path)
    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture(scope="module")
def start_module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartBroker]:
    """Like `start_broker`, shared by a module's tests where they do not interfere."""
    start, started = _starter(tmp_path_factory.mktemp("broker"))
    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka's own broker (one KRaft node on loopback), shared by every test of the session: each test
    makes topics of its own (`kafka_broker.create_topic`)."""
    with KafkaBroker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker
