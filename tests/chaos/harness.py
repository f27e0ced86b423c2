"""`sbfed broker serve` as a process a drill can kill, starve and flood, and what the drills measure of it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from azure.servicebus import ServiceBusClient, ServiceBusReceiveMode

READY_SECONDS = 60
KEY = "Y2hhb3Mta2V5LWZvci10ZXN0cw=="


def topology(queues: dict[str, dict[str, Any]], **namespace: Any) -> dict[str, Any]:
    """One namespace, `chaos`, with a Manage policy and the given queues."""
    policies = {"RootManageSharedAccessKey": {"key": KEY, "rights": ["Manage", "Send", "Listen"]}}
    return {"namespaces": {"chaos": {"policies": policies, "queues": queues, **namespace}}}


class BrokerProcess:
    """The broker in its own process; `kill()` is kill -9, `terminate()` is SIGTERM."""

    def __init__(self, work: Path, raw_topology: dict[str, Any], *, data_dir: Path | None = None,
                 sync: str = "full", args: tuple[str, ...] = ()) -> None:
        self.work = work
        self.topology_path = work / "topology.yaml"
        self.topology_path.write_text(yaml.safe_dump(raw_topology))
        self.ready_path = work / "ready.json"
        self.log_path = work / "broker.log"
        store = ["--data", str(data_dir), "--sync", sync] if data_dir else ["--in-memory"]
        self.argv = [sys.executable, "-m", "sbfed", "broker", "serve", "--topology", str(self.topology_path),
                     *store, "--amqp-port", "0", "--admin-port", "0", "--ready-file", str(self.ready_path),
                     "--log-level", "WARNING", *args]
        self.process: subprocess.Popen[bytes] | None = None
        self.namespace: dict[str, Any] = {}

    def start(self) -> BrokerProcess:
        self.ready_path.unlink(missing_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + READY_SECONDS
        while not self.ready_path.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the broker did not start; see {self.log_path}:\n{self.log()[-3000:]}")
            time.sleep(0.05)
        [self.namespace] = json.loads(self.ready_path.read_text())
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def connection_string(self) -> str:
        return self.namespace["connection_string"]

    @property
    def amqp_port(self) -> int:
        return int(self.namespace["amqp_port"])

    @property
    def admin_port(self) -> int:
        return int(self.namespace["admin_port"])

    def fd_count(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def terminate(self, timeout: float = 30) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


@contextmanager
def tmpfs(mount: Path, size_mb: int, why: str) -> Iterator[Path]:
    """A tmpfs of `size_mb` MB mounted at `mount` (made here) for the block; skips the test unless root (CI
    runs as root), saying `why` it mounts one."""
    if os.geteuid() != 0:
        pytest.skip(f"{why} mounts a tmpfs, which needs root (CI runs as root)")
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def wait_for(condition: Any, timeout: float, what: str) -> None:
    """Poll `condition()` every 0.1 s until true; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} (after {timeout:.0f} s)")
        time.sleep(0.1)


def open_sockets(port: int, count: int, opening: bytes = b"") -> list[socket.socket]:
    """`count` TCP connections to the broker, each having sent `opening`."""
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if opening:
            sock.sendall(opening)
        sockets.append(sock)
    return sockets


def raise_fd_limit() -> None:
    """The drills' own process opens thousands of sockets too."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def drain(connection_string: str, queue: str) -> list[str]:
    """Receive-and-delete everything `queue` holds; the message ids."""
    with ServiceBusClient.from_connection_string(connection_string) as client, \
            client.get_queue_receiver(queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                      max_wait_time=3) as receiver:
        ids: list[str] = []
        while batch := receiver.receive_messages(max_message_count=200, max_wait_time=3):
            ids.extend(str(m.message_id) for m in batch)
        return ids
