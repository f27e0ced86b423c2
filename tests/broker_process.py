"""`sbfed broker serve` in a process of its own, for tests and benchmarks that drive it as users do."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from patterns.drills.broker import BrokerNamespace, read_ready_file
from patterns.drills.processes import SbfedProcess

BROKER_READY_SECONDS = 60
BROKER_STOP_SECONDS = 30
ROOT = Path(__file__).resolve().parents[1]


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


class ServeProcess:
    """`sbfed broker serve ARGS` as a process, with HOME and XDG_DATA_HOME inside the test's directory."""

    def __init__(self, home: Path, *args: str) -> None:
        self.ready = home / f"ready-{time.monotonic_ns()}.json"
        env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data-home")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sbfed.cli", "broker", "serve", *args, "--ready-file", str(self.ready),
             "--log-level", "WARNING"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_ready(self) -> dict:
        deadline = time.monotonic() + BROKER_READY_SECONDS
        while not self.ready.exists():
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the broker did not start"
            time.sleep(0.1)
        [namespace] = json.loads(self.ready.read_text())
        return namespace

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=BROKER_STOP_SECONDS)
        assert self.proc.returncode == 0, err
        return out

    def exit(self) -> tuple[int, str]:
        """For a broker that must refuse to start: its exit code and stderr."""
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err


def emulator_ports_free() -> bool:
    """Whether the ports `sbfed broker serve` takes with no arguments (the emulator's 5672 and 5300, AMQPS's
    5671, WebSockets' 5443) can be bound here now."""
    for port in (5672, 5300, 5671, 5443):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True
