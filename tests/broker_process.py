"""`sbfed broker serve` in a process of its own, for tests and benchmarks that drive it as users do."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from patterns.drills.broker import BrokerNamespace, read_ready_file
from patterns.drills.processes import SbfedProcess

BROKER_READY_SECONDS = 60
BROKER_STOP_SECONDS = 30


@contextmanager
def brokers(
    raw_topology: Mapping[str, Any], directory: Path
) -> Iterator[tuple[dict[str, BrokerNamespace], Path]]:
    """`sbfed broker serve` in a process of its own, as users run it, in memory on ephemeral ports; yields its
    namespaces and the topology file; its log is `directory/broker.log`. Not in the test's process: the SDKs
    busy-wait for settlement outcomes, and a broker sharing the GIL with several such receivers answers each
    one ~100 ms late (locks then expire in the prefetch buffers)."""
    path, ready = directory / "topology.yaml", directory / "broker-ready.json"
    path.write_text(yaml.safe_dump(dict(raw_topology)))
    process = SbfedProcess(
        "`sbfed broker serve`",
        ["broker", "serve", "--topology", str(path), "--in-memory", "--amqp-port", "0", "--admin-port", "0",
         "--ready-file", str(ready), "--log-level", "WARNING"],
        directory / "broker.log",
    )
    process.start(ready.exists, BROKER_READY_SECONDS)
    try:
        yield read_ready_file(ready), path
    finally:
        process.stop(BROKER_STOP_SECONDS)
